"""braze as nvFuser (braze/as_nvfuser.py), each case in a fresh process: `import nvfuser` after
install_as_nvfuser() or with BRAZE_AS_NVFUSER=1, the API level its version() states, nvFuser's names,
nvfuser_direct absent, and FusionCache.reset()."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def _run(code: str, **env) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            env={**os.environ, **env})
    assert result.returncode == 0, result.stderr
    return result.stdout


USES_NVFUSER = """
    import nvfuser
    import numpy as np
    from nvfuser import DataType, FusionDefinition

    assert nvfuser.version() == "0.2.27", nvfuser.version()
    # Thunder's test: the legacy frontend from 0.2.23, nvfuser_direct from 0.2.28.
    level = tuple(int(p) for p in nvfuser.version().split("."))
    assert (0, 2, 23) <= level < (0, 2, 28)
    assert nvfuser.braze.version() != nvfuser.version()  # braze's own version is its own
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.mul(x, x))
    (out,) = fd.execute([np.arange(4, dtype=np.float32)])
    assert out.tolist() == [0, 1, 4, 9]
    from nvfuser.pytorch_utils import torch_dtype_to_nvfuser_dtype  # nvFuser's helper module
    try:
        import nvfuser_direct  # noqa: F401
    except ImportError:
        print("no nvfuser_direct")
    print("ok")
"""


def test_install_as_nvfuser_makes_import_nvfuser_give_braze():
    out = _run("import braze\nbraze.install_as_nvfuser()\nassert braze.install_as_nvfuser() is __import__('nvfuser')\n"
               + textwrap.dedent(USES_NVFUSER))
    assert out.split() == ["no", "nvfuser_direct", "ok"]


def test_the_environment_variable_installs_it_at_import_braze():
    out = _run("import braze\n" + textwrap.dedent(USES_NVFUSER), BRAZE_AS_NVFUSER="1")
    assert out.split()[-1] == "ok"
    result = subprocess.run([sys.executable, "-c", "import braze, nvfuser"], capture_output=True, text=True,
                            env={**os.environ, "BRAZE_AS_NVFUSER": "0"})
    assert result.returncode != 0  # off: no nvfuser module appears
    assert "No module named 'nvfuser'" in result.stderr


def test_fusion_cache_reset_forgets_the_definitions():
    out = _run("""
        import braze
        nvfuser = braze.install_as_nvfuser()
        from nvfuser import DataType, FusionDefinition

        def define():
            with FusionDefinition() as fd:
                x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
                fd.add_output(fd.ops.exp(x))
            return fd

        first, again = define(), define()
        assert first.id() == again.id() == 0 and nvfuser.FusionCache.get().num_fusions() == 1
        nvfuser.FusionCache.reset()
        assert nvfuser.FusionCache.num_fusions() == 0
        with FusionDefinition() as other:
            other.add_output(other.ops.neg(other.define_tensor(shape=[-1], contiguity=[True])))
        assert other.id() == 0  # ids start again
        print("ok")
    """)
    assert out.strip() == "ok"
