"""What braze runs with here: `braze.show_config()` for bug reports, `braze.config()` as a dict.

The C++ side reports braze, NVRTC, the CUDA headers, the driver and its devices, the kernel disk cache
and the BRAZE_* variables; this module adds Python and the packages braze works with. Package versions
come from their installed metadata, so asking never imports torch or JAX (seconds, and a CUDA context).
"""

from __future__ import annotations

import importlib.metadata
import platform
import sys
from typing import Dict, Optional, TextIO

from . import _C

# Packages whose versions matter to braze: its own dependencies, then the frameworks whose tensors it takes.
_PACKAGES = ("numpy", "ml_dtypes", "nanobind", "torch", "cupy-cuda12x", "cupy-cuda13x", "cupy", "jax", "jaxlib")


def _package_version(name: str) -> Optional[str]:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def config() -> Dict[str, str]:
    """Every version, library and setting braze depends on here, in the order show_config prints them."""
    report = dict(_C.config_report())
    report["python"] = f"{platform.python_version()} ({sys.executable})"
    report["platform"] = platform.platform()
    for name in _PACKAGES:
        version = _package_version(name)
        if version is not None:
            report[name] = version
    return report


def show_config(file: Optional[TextIO] = None) -> None:
    """Prints config() as aligned `key: value` lines (to stdout unless `file` is given)."""
    report = config()
    width = max(len(key) for key in report)
    out = sys.stdout if file is None else file
    for key, value in report.items():
        print(f"{key + ':':<{width + 1}} {value}", file=out)
