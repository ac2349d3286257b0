"""braze: a tensor-fusion library with nvFuser's legacy Python frontend.

    from braze import FusionDefinition, DataType

`fd.execute(inputs)` runs the fusion through its cache of prepared plans: on the inputs' GPU for
torch, CuPy or JAX tensors on a CUDA device, and on the simulated device (the CPU simulator running the
same kernels) for numpy arrays (ml_dtypes for bf16/fp8) and CPU tensors. `fd.explain(inputs)` shows the
plan and whether the cache already holds it.
"""

import atexit
import os

from . import _C
from ._C import BrazeIndexError, BrazeTypeError, BrazeValueError, DataType, Plan, Segment, empty_cache
from .as_nvfuser import install_as_nvfuser
from .config import config, show_config
from .fusion_definition import FusionDefinition
from .generator import manual_seed
from .handles import Scalar, Tensor
from .ops import op_names
from .tensor_descriptor import compute_contiguity, compute_tensor_descriptor

# The binding keeps the torch module's Tensor type and dtypes for fast input checks; they are dropped
# before the interpreter finalizes, so that nothing reachable from them is reported as leaked.
atexit.register(_C._release_torch_types)

try:
    from ._C import __version__
except ImportError:  # pragma: no cover - set by CMake from the project version
    __version__ = "0.0.0"


def version() -> str:
    return __version__


__all__ = [
    "BrazeIndexError",
    "BrazeTypeError",
    "BrazeValueError",
    "DataType",
    "FusionDefinition",
    "Plan",
    "Segment",
    "Scalar",
    "Tensor",
    "compute_contiguity",
    "compute_tensor_descriptor",
    "config",
    "empty_cache",
    "install_as_nvfuser",
    "manual_seed",
    "op_names",
    "show_config",
    "version",
]

# BRAZE_AS_NVFUSER=1: `import nvfuser` gives braze from the start (as_nvfuser.py), with no line changed.
if os.environ.get("BRAZE_AS_NVFUSER", "0") not in ("", "0"):
    install_as_nvfuser()
