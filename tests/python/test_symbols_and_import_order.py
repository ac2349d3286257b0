"""braze shares a process with torch (and whatever torch bundles): its shared library exports only
braze's own symbols, its extension only PyInit__C, and importing braze before or after torch works, in
fresh processes, with a fusion run on torch tensors and nothing reported at exit (no leaked instances)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import braze

PACKAGE = Path(braze.__file__).parent


def _dynamic_symbols(library: Path) -> list[str]:
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm not found: exported symbols not checked")
    result = subprocess.run([nm, "-D", "--defined-only", "-C", str(library)], capture_output=True, text=True,
                            check=True)
    # "0000000000025f4e T PyInit__C": the name is everything after the type letter.
    return [line.split(" ", 2)[2] for line in result.stdout.splitlines() if line.count(" ") >= 2]


def _library(pattern: str) -> Path:
    found = sorted(PACKAGE.glob(pattern))
    if not found:
        pytest.skip(f"{pattern} not found next to the braze package (not a Linux shared-library build)")
    return found[0]


def test_the_library_exports_only_braze_symbols():
    symbols = _dynamic_symbols(_library("libbraze.so*"))
    foreign = [s for s in symbols if not (s.startswith("braze::") or " for braze::" in s)]
    assert len(symbols) > 100  # the API is there
    assert foreign == [], foreign[:20]


def test_the_extension_exports_only_its_init_function():
    assert _dynamic_symbols(_library("_C*.so")) == ["PyInit__C"]


FUSION_ON_TORCH = """
    import numpy as np
    from braze import DataType, FusionDefinition
    x = torch.arange(6, dtype=torch.float32)
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        fd.add_output(fd.ops.mul(t, t))
    (out,) = fd.execute([x])
    assert out.tolist() == [0, 1, 4, 9, 16, 25], out
    if torch.cuda.is_available():
        (out,) = fd.execute([x.cuda()])
        assert out.cpu().tolist() == [0, 1, 4, 9, 16, 25], out
    print("ok")
"""


@pytest.mark.parametrize("first", ["braze", "torch"])
def test_braze_and_torch_import_in_either_order(first):
    pytest.importorskip("torch")
    second = "torch" if first == "braze" else "braze"
    code = f"import {first}\nimport {second}\n" + textwrap.dedent(FUSION_ON_TORCH)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
    assert "leaked" not in result.stderr, result.stderr
