"""The process-wide cache of finished definitions, as nvFuser keeps one: a definition identical to an
earlier one (the same ops, inputs, outputs, dtypes, shapes and constants, compared through the lossless
JSON record of the fusion) gets the earlier one's id and shares its execute caches, so it is neither
planned nor compiled again. FusionDefinition(id) gives back the definition with that id.

The entries live as long as the process; each holds a copy of its fusion and the FusionCache objects
of the definitions that share it.
"""

from __future__ import annotations

import threading

from ._C import BrazeValueError


class _Entry:
    __slots__ = ("id", "fusion", "drawn_inputs", "vector_sizes", "host_caches", "gpu_caches")

    def __init__(self, id, fusion, drawn_inputs, vector_sizes):
        self.id = id
        self.fusion = fusion
        self.drawn_inputs = drawn_inputs  # the seed inputs each execute draws (generator.py)
        self.vector_sizes = vector_sizes  # the define_vector inputs execute takes as lists: {place: length}
        self.host_caches = {}
        self.gpu_caches = {}


class DefinitionCache:
    def __init__(self):
        self._lock = threading.Lock()
        self._by_record: dict[str, _Entry] = {}
        self._by_id: list[_Entry] = []

    def register(self, fd) -> None:
        """Gives a finished definition its id, and the execute caches of identical earlier ones."""
        drawn = list(fd.__dict__.get("_drawn_inputs", []))
        vectors = dict(fd.__dict__.get("_vector_sizes", {}))
        # The same fusion, but seeds passed or drawn, or scalars passed one by one or as lists.
        record = fd._fusion.to_json() + repr(drawn) + repr(sorted(vectors.items()))
        with self._lock:
            entry = self._by_record.get(record)
            if entry is None:
                entry = _Entry(len(self._by_id), fd._fusion.__copy__(), drawn, vectors)
                self._by_record[record] = entry
                self._by_id.append(entry)
        self._attach(fd, entry)

    def adopt(self, fd, id: int) -> None:
        """Makes `fd` (new, not entered) the finished definition with this id."""
        with self._lock:
            if not 0 <= id < len(self._by_id):
                raise BrazeValueError(
                    f"FusionDefinition(id={id}): no definition has that id in this process "
                    f"({len(self._by_id)} defined; ids come from fd.id())")
            entry = self._by_id[id]
        fd._fusion = entry.fusion.__copy__()
        fd._state = "done"
        self._attach(fd, entry)

    def __len__(self) -> int:
        return len(self._by_id)

    def reset(self) -> None:
        """Forgets every definition and, with them, their execute caches (prepared plans): later
        definitions start from id 0. Definitions made before keep working with the caches they hold."""
        with self._lock:
            self._by_record.clear()
            self._by_id.clear()

    @staticmethod
    def _attach(fd, entry) -> None:
        fd._id = entry.id
        if entry.drawn_inputs:
            fd._drawn_inputs = list(entry.drawn_inputs)
        if entry.vector_sizes:
            fd._vector_sizes = dict(entry.vector_sizes)
        # execute.py keeps the FusionCache objects in these dicts: sharing them shares the plans.
        fd._host_caches = entry.host_caches
        fd._gpu_caches = entry.gpu_caches


definitions = DefinitionCache()
