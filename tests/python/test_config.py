"""braze.show_config(): what a bug report needs (versions, libraries, the driver's answer, the disk cache,
BRAZE_* settings), asked without a GPU and without importing the frameworks."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import braze


def _config_in_fresh_process(env_updates):
    """config() from a new interpreter: the kernel disk cache's directory is fixed at a process's first use."""
    env = dict(os.environ)
    env.update(env_updates)
    script = "import braze, json, sys; print(json.dumps(braze.config())); print(sorted(sys.modules))"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    report_line, modules_line = result.stdout.splitlines()[-2:]
    return json.loads(report_line), modules_line


def test_config_names_every_piece_braze_depends_on():
    report = braze.config()
    assert report["braze"] == braze.__version__
    for key in ("built with", "nvrtc", "cuda headers", "cuda driver", "hiprtc", "hip runtime", "kernel disk cache", "python",
                "numpy"):
        assert report.get(key), f"{key} missing from {report}"
    if "no CUDA driver found" in report["cuda driver"]:
        # The reason is the one GPU calls raise, and no device lines follow.
        assert "CPU simulator" in report["cuda driver"]
        assert not any(key.startswith("device ") for key in report)


def test_config_reports_the_cache_directory_and_braze_variables(tmp_path):
    report, modules = _config_in_fresh_process(
        {"BRAZE_CACHE_DIR": str(tmp_path / "cache"), "BRAZE_DUMP": "segments", "BRAZE_CUDA_GRAPHS": "1"})
    assert report["kernel disk cache"] == str(tmp_path / "cache" / "kernels-v1")
    assert report["env BRAZE_DUMP"] == "segments"
    assert report["env BRAZE_CUDA_GRAPHS"] == "1"
    assert not (tmp_path / "cache").exists()  # asking creates nothing
    # Versions come from package metadata: asking imports no framework.
    assert "'torch'" not in modules and "'jax'" not in modules and "'cupy'" not in modules

    off, _ = _config_in_fresh_process({"BRAZE_CACHE_DIR": ""})
    assert off["kernel disk cache"] == "off"


def test_show_config_prints_one_aligned_line_per_entry():
    out = io.StringIO()
    braze.show_config(file=out)
    lines = out.getvalue().splitlines()
    report = braze.config()
    assert len(lines) == len(report)
    # The value starts in one column on every line: just past the widest "key:" and a space.
    width = max(len(key) for key in report) + 2
    for line, (key, value) in zip(lines, report.items()):
        assert line.startswith(f"{key}:") and line[width:] == value and line[width - 1] == " ", line
    assert lines[0].startswith("braze:") and lines[0].endswith(braze.__version__)


def test_importing_braze_loads_no_cuda_library():
    """import braze works with no GPU and touches none (USER_EXPECTATIONS 10, 11): the driver and NVRTC
    are opened on first use, so importing loads neither (on a GPU machine too), and so creates no CUDA
    context and allocates nothing on a GPU."""
    script = "import braze; print(open('/proc/self/maps').read())"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                            env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    loaded = {line.split()[-1] for line in result.stdout.splitlines() if "/" in line}
    assert not any("libcuda" in path or "libnvrtc" in path for path in loaded), sorted(loaded)
