"""The one cache shape: bounded, the least recently used dropped first, safe between threads."""

from __future__ import annotations

import threading
from collections import OrderedDict
from types import SimpleNamespace

import pytest

from scheduler_core.extender import lru as lru_module
from scheduler_core.extender.lru import LRU
from scheduler_core.extender.scoring.plugins.base import SHARED_COLUMNS, new_shared_columns, shared_column


def test_an_entry_read_lately_outlives_older_ones_past_the_size() -> None:
    cache: LRU[str, int] = LRU(3)
    for key, value in (("a", 1), ("b", 2), ("c", 3)):
        cache.put(key, value)
    assert cache.get("a") == 1  # "a" is now the most recently used

    cache.put("d", 4)

    assert len(cache) == 3
    assert cache.get("b") is None, "the least recently used entry goes first"
    assert [cache.get(key) for key in ("a", "c", "d")] == [1, 3, 4]


def test_get_or_make_makes_a_value_once_while_it_is_kept() -> None:
    cache: LRU[str, list[int]] = LRU(2)
    made: list[str] = []

    def make(key: str) -> list[int]:
        made.append(key)
        return [len(made)]

    first = cache.get_or_make("x", lambda: make("x"))
    assert cache.get_or_make("x", lambda: make("x")) is first
    cache.get_or_make("y", lambda: make("y"))
    cache.get_or_make("z", lambda: make("z"))  # drops "x"
    assert cache.get_or_make("x", lambda: make("x")) is not first
    assert made == ["x", "y", "z", "x"]


def test_a_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        LRU(0)


class _Entries(OrderedDict[str, int]):
    """The LRU's own entries, stopping the put of ``stop_at`` halfway: stored and moved to the end, the oldest not
    dropped yet (the point where a second put, let in, would leave one entry too many)."""

    def __init__(self, entries: OrderedDict[str, int], stop_at: str) -> None:
        super().__init__(entries)
        self.stop_at = stop_at
        self.halfway = threading.Event()
        self.go_on = threading.Event()

    def move_to_end(self, key: str, last: bool = True) -> None:
        super().move_to_end(key, last)
        if key == self.stop_at:
            self.halfway.set()
            assert self.go_on.wait(10), "never let go on"


class _Lock:
    """A real lock that sets ``asked`` when ``thread`` asks for it, before that thread may have to wait."""

    def __init__(self, asked: threading.Event) -> None:
        self._lock = threading.Lock()
        self.asked = asked
        self.thread: threading.Thread | None = None

    def __enter__(self) -> bool:
        if threading.current_thread() is self.thread:
            self.asked.set()
        return self._lock.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._lock.__exit__(*exc)


def test_threads_putting_at_once_never_leave_more_than_the_size() -> None:
    """A put stopped halfway while another thread puts: the second waits for the first, and returns with no more
    than ``size`` entries kept.

    The interleaving is forced, not hoped for: the LRU's entries stop the first put at the race window, the second
    put starts, and the first goes on once the second has asked for the LRU's lock (it then waits for the first)
    or, if there is no lock to ask for, has returned (it ran through the window: one entry too many).
    """
    second_waits_or_is_done = threading.Event()
    lock = _Lock(second_waits_or_is_done)
    with pytest.MonkeyPatch.context() as patch:  # the LRU's own lock, only able to say who asks for it
        patch.setattr(lru_module, "threading", SimpleNamespace(Lock=lambda: lock), raising=False)
        cache: LRU[str, int] = LRU(2)
    cache.put("old-1", 1)
    cache.put("old-2", 2)
    entries = cache._entries = _Entries(cache._entries, stop_at="new-1")
    errors: list[BaseException] = []
    kept_after_second_put: list[int] = []

    def put_first() -> None:
        try:
            cache.put("new-1", 3)
        except BaseException as exc:
            errors.append(exc)

    def put_second() -> None:
        try:
            cache.put("new-2", 4)
            kept_after_second_put.append(len(cache))
        except BaseException as exc:
            errors.append(exc)
        finally:
            second_waits_or_is_done.set()

    first = threading.Thread(target=put_first, daemon=True)
    second = lock.thread = threading.Thread(target=put_second, daemon=True)
    first.start()
    assert entries.halfway.wait(10), "the first put never reached its entries"
    second.start()
    assert second_waits_or_is_done.wait(10)
    entries.go_on.set()
    first.join(10)
    second.join(10)

    assert errors == []
    assert kept_after_second_put == [2], "a put returned with more entries kept than the LRU's size"
    assert list(cache._entries) == ["new-1", "new-2"]


def test_a_column_every_call_reads_survives_many_columns_read_once() -> None:
    """The candidates' names or traffic stay made while pods with ever new images come and go."""
    shared = new_shared_columns()
    nodes = ["node-1", "node-2"]
    made: list[str] = []

    def column(label: str) -> list[str]:
        made.append(label)
        return [label]

    for pod in range(4 * SHARED_COLUMNS):
        shared_column(shared, "names", (nodes,), lambda: column("names"))
        shared_column(shared, ("image", pod), (nodes,), lambda: column("image"))

    assert made.count("names") == 1
    assert made.count("image") == 4 * SHARED_COLUMNS


def test_a_column_asked_for_with_other_sources_is_made_again() -> None:
    shared = new_shared_columns()
    old_snapshot, new_snapshot = object(), object()
    first = shared_column(shared, "traffic", (old_snapshot,), lambda: ["old"])
    assert shared_column(shared, "traffic", (old_snapshot,), lambda: ["never"]) is first
    assert shared_column(shared, "traffic", (new_snapshot,), lambda: ["new"]) == ["new"]
