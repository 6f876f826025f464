"""The embedded Milvus Lite copies its map of deleted keys once per change of it, not once per
search (docs/retrieval.md#flushes).

Every search, query and point read of Lite 3.x starts by copying the collection's whole tombstone
map (``DeltaIndex.frozen_copy``), so that compaction dropping tombstones cannot make deleted rows
visible to a read already under way. Lite drops tombstones only once no older data file lives,
which in practice is never, so the map grows with every chunk a save replaces and each read pays
for the copy: 0.13 ms at 36,000 tombstones, three times per save in the soak's pattern.

The map changes only in two places, a flush folding its deletions in (``add_batch``) and
compaction's garbage collection (``gc_below``), both under the collection's maintenance lock,
under which reads take their copy too. So one copy serves every read until the next change:
this module keeps it and lets the two mutators forget it. Readers only call ``is_deleted`` on a
copy, so sharing one is safe.

Installed in the Lite server process ``openkb up`` starts (``openkb.runtime.lite_server``), beside
``lite_bm25`` and ``lite_vectors``. Trap: this reaches into Lite's internals
(``DeltaIndex.frozen_copy``, ``add_batch``, ``gc_below``, ``_map``); ``install()`` checks each name
and leaves Lite as it is (a copy per read, as before) when a release moves them;
``tests/retrieval/test_lite_tombstones.py`` fails on the pinned version if it no longer applies.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("openkb.lite_tombstones")

__all__ = ["install"]

_CACHE = "_openkb_frozen"
_INSTALLED = False


def install() -> bool:
    """Make this process's Milvus Lite share one copy of a collection's tombstones among reads
    until the tombstones change; False (and Lite unchanged) when its internals are not the ones
    this module knows."""
    global _INSTALLED
    if _INSTALLED:
        return True
    try:
        from milvus_lite.storage.delta_index import DeltaIndex
    except ImportError as exc:
        log.warning("Milvus Lite copies its tombstones for every read: %s", exc)
        return False
    missing = [n for n in ("frozen_copy", "add_batch", "gc_below", "is_deleted") if not hasattr(DeltaIndex, n)]
    probe = DeltaIndex("id")
    if not isinstance(getattr(probe, "_map", None), dict):
        missing.append("_map")
    if not hasattr(probe, "__dict__"):  # the copy is kept in the instance
        missing.append("__dict__")
    if missing:
        log.warning("Milvus Lite copies its tombstones for every read: its DeltaIndex has no %s", ", ".join(missing))
        return False

    frozen_copy, add_batch, gc_below = DeltaIndex.frozen_copy, DeltaIndex.add_batch, DeltaIndex.gc_below

    def _frozen_copy(self: Any) -> Any:
        copy = self.__dict__.get(_CACHE)
        if copy is None:
            copy = self.__dict__[_CACHE] = frozen_copy(self)
        return copy

    # no read runs during a change (the maintenance lock), so forgetting the copy once it is made
    # is enough; in ``finally``: a change that fails half-way has changed the map all the same
    def _add_batch(self: Any, batch: Any) -> None:
        try:
            add_batch(self, batch)
        finally:
            self.__dict__.pop(_CACHE, None)

    def _gc_below(self: Any, min_active_data_seq: int) -> int:
        try:
            return gc_below(self, min_active_data_seq)
        finally:
            self.__dict__.pop(_CACHE, None)

    DeltaIndex.frozen_copy = _frozen_copy  # type: ignore[method-assign]
    DeltaIndex.add_batch = _add_batch  # type: ignore[method-assign]
    DeltaIndex.gc_below = _gc_below  # type: ignore[method-assign]
    _INSTALLED = True
    return True
