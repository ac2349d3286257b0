"""The installed C++ package: `cmake --install` into a temporary prefix, then the README's C++ example
(examples/cpp) configured with find_package(braze), built against braze::braze, and run: it executes a
fusion on the simulated device and checks the kernels against the reference evaluator."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest

import braze

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(braze.__file__).resolve().parents[2]  # build/python/braze/__init__.py


def _run(*command: str) -> str:
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.mark.skipif(not (BUILD / "CMakeCache.txt").exists() or shutil.which("cmake") is None,
                    reason="braze was not imported from a CMake build folder (pip install): nothing to install")
def test_find_package_braze_builds_and_runs_the_readme_example(tmp_path):
    prefix = tmp_path / "prefix"
    _run("cmake", "--install", str(BUILD), "--prefix", str(prefix))
    assert (prefix / "lib" / "cmake" / "braze" / "brazeConfig.cmake").exists()
    assert (prefix / "include" / "braze" / "ir" / "ops.h").exists()
    # Only the public API and what it includes: a scheduler's own headers stay private.
    assert not (prefix / "include" / "braze" / "scheduler" / "matmul").exists()
    example = tmp_path / "example"
    _run("cmake", "-S", str(REPO / "examples" / "cpp"), "-B", str(example), f"-DCMAKE_PREFIX_PATH={prefix}")
    _run("cmake", "--build", str(example), "-j", "2")
    out = _run(str(example / "sum_of_squares"))
    assert "the kernels match the reference" in out
    assert "sum(" in out  # the fusion's IR
