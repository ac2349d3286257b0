"""fd.ops: the op builders of a FusionDefinition, with nvFuser's names and keyword arguments.

Each group lives in its own module (elementwise, reductions, shape, indexing, embedding); Operators combines
them and binds them to one FusionDefinition. Ops may only be added while the definition is open
(inside `with FusionDefinition() as fd:`), as in nvFuser.
"""

from __future__ import annotations

from .handles import wrap
from .ops_elementwise import ElementwiseOps
from .ops_embedding import EmbeddingOps
from .ops_indexing import IndexingOps
from .ops_reduction import ReductionOps
from .ops_scan_scatter import ScanScatterOps
from .ops_shape import ShapeOps


class Operators(ElementwiseOps, ReductionOps, ShapeOps, IndexingOps, EmbeddingOps, ScanScatterOps):
    """The `fd.ops` namespace of one FusionDefinition."""

    def __init__(self, fd):
        self._fd = fd

    def _begin(self, op: str):
        self._fd._check_open(f"fd.ops.{op}")

    def _wrap(self, val):
        return wrap(val, self._fd)


def op_names() -> list[str]:
    """Every fd.ops name braze provides."""
    return sorted(name for name in dir(Operators) if not name.startswith("_"))
