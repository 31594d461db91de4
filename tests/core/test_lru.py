"""The one cache shape: bounded, the least recently used dropped first, safe between threads."""

from __future__ import annotations

import threading

import pytest

from scheduler_core.lru import LRU
from scheduler_core.plugins.base import SHARED_COLUMNS, new_shared_columns, shared_column


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


def test_threads_putting_at_once_never_leave_more_than_the_size() -> None:
    cache: LRU[tuple[int, int], int] = LRU(50)
    barrier = threading.Barrier(4)

    def fill(thread: int) -> None:
        barrier.wait()
        for i in range(5000):
            cache.put((thread, i), i)
            cache.get((thread, i - 3))

    threads = [threading.Thread(target=fill, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(cache) == 50


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
