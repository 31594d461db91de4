"""A small least-recently-used map, safe to share between threads: the one cache shape schedlens keeps.

Per-candidate-list columns (:mod:`scheduler_core.extender.scoring.plugins.base`), the NodeNames lists seen lately
(:mod:`scheduler_core.extender.candidates`), the spool reader's repeated values
(:mod:`scheduler_core.extender.record.spool_codec`) and the ingester's and dashboard's memos all keep a bounded number
of values where some are used on every call and others once. Dropping the least recently used keeps the first kind while
the second passes through; starting over when full, as these caches once did, threw the hot values out with the cold
ones (a 1000-node filter then worked out its outcome again on every other call).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most ``size`` entries; :meth:`get` marks an entry used, :meth:`put` past the size drops the oldest used."""

    __slots__ = ("_entries", "_lock", "size")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("an LRU keeps at least one entry")
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            if len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def get_or_make(self, key: K, make: Callable[[], V]) -> V:
        """The value kept under ``key``, else ``make()`` kept there. ``make`` runs outside the lock: two threads
        missing at once both make it, and the later one is kept (values kept here are equal for equal keys)."""
        found = self.get(key)
        if found is None:
            found = make()
            self.put(key, found)
        return found

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
