"""braze standing in for nvFuser: after install_as_nvfuser() (or with BRAZE_AS_NVFUSER=1 set when braze
is imported), `import nvfuser` gives a module with braze's frontend under nvFuser's names, so scripts and
Lightning Thunder's nvFuser executor run on braze without a line changed.

- nvfuser.version() states the nvFuser API level braze implements (NVFUSER_API_LEVEL): the legacy
  FusionDefinition frontend, which Thunder uses below 0.2.28;
- `import nvfuser_direct` (nvFuser's newer frontend, which braze does not implement) fails with an
  ImportError, so a caller that tries it first falls back to the legacy one;
- nvfuser.FusionCache.reset() forgets the definitions and their prepared plans, as Thunder's test
  harness expects after every test;
- every other name is braze's (`nvfuser.FusionDefinition`, `nvfuser.DataType`, ...), and
  `nvfuser.pytorch_utils` is braze's.
"""

from __future__ import annotations

import sys
import types

NVFUSER_API_LEVEL = "0.2.27"


class FusionCache:
    """nvFuser's process-wide cache of definitions, as far as its callers reach it."""

    @staticmethod
    def get():
        return FusionCache

    @staticmethod
    def reset() -> None:
        from .definition_cache import definitions

        definitions.reset()

    @staticmethod
    def num_fusions() -> int:
        from .definition_cache import definitions

        return len(definitions)


def _nvfuser_module(braze) -> types.ModuleType:
    module = types.ModuleType("nvfuser", __doc__)
    module.__dict__.update({name: getattr(braze, name) for name in braze.__all__})
    module.version = lambda: NVFUSER_API_LEVEL
    module.__version__ = NVFUSER_API_LEVEL
    module.FusionCache = FusionCache
    module.braze = braze

    def __getattr__(name):  # the rest of braze's names, as nvFuser's module has its own
        try:
            return getattr(braze, name)
        except AttributeError:
            raise AttributeError(f"module 'nvfuser' (braze) has no attribute {name!r}") from None

    module.__getattr__ = __getattr__
    return module


def install_as_nvfuser() -> types.ModuleType:
    """Makes `import nvfuser` give braze (nvFuser's API level NVFUSER_API_LEVEL) and `import
    nvfuser_direct` fail; returns the module. Idempotent."""
    import braze
    from braze import pytorch_utils

    installed = sys.modules.get("nvfuser")
    if installed is not None and getattr(installed, "braze", None) is braze:
        return installed
    module = _nvfuser_module(braze)
    sys.modules["nvfuser"] = module
    sys.modules["nvfuser.pytorch_utils"] = pytorch_utils
    module.pytorch_utils = pytorch_utils
    sys.modules["nvfuser_direct"] = None  # import nvfuser_direct: ModuleNotFoundError
    return module
