"""Values derived from objects the spool's reader shares, made once per object.

The reader (``scheduler_core.extender.record.spool_codec``) hands the same, never mutated, list or map for a per-node
field it has seen before (a candidate list, a filter's outcome, one snapshot's traffic figures). What the ingester
derives from such an object (its longest name, the passing positions, its stored column) is then worth keeping with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from scheduler_core.extender.lru import LRU
from scheduler_core.extender.scoring.plugins.base import SharedColumns, shared_column

V = TypeVar("V")


class IdentityCache(Generic[V]):
    """``make()`` kept per tuple of objects, compared by identity; the least recently used dropped past ``size``.

    The objects are held with the value, so their ids cannot be reused by others while it is kept. Objects made
    afresh for each call pass through without pushing out the shared ones for long: those are used again and stay.
    """

    def __init__(self, size: int) -> None:
        # The ingester's writing thread prepares again beside its preparing thread: the LRU is thread-safe.
        self._kept: SharedColumns = LRU(size)

    def get(self, sources: tuple[object, ...], make: Callable[[], V]) -> V:
        # The verbs' shared-column cache, keyed by the sources' ids: one value per distinct tuple of objects.
        return shared_column(self._kept, tuple(map(id, sources)), sources, make)
