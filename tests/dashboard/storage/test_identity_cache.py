"""The ingester's cache of values derived from shared objects: by identity, least recently used dropped."""

from __future__ import annotations

from dashboard.storage.identity_cache import IdentityCache


def test_a_value_is_made_once_per_object_and_again_for_an_equal_but_other_object() -> None:
    cache: IdentityCache[int] = IdentityCache(4)
    made: list[object] = []
    shared, equal = ["a", "b"], ["a", "b"]

    def make(obj: object) -> int:
        made.append(obj)
        return len(made)

    assert cache.get((shared,), lambda: make(shared)) == 1
    assert cache.get((shared,), lambda: make(shared)) == 1
    assert cache.get((equal,), lambda: make(equal)) == 2, "equal is not the same: its value is made for it"
    assert made == [shared, equal]


def test_objects_made_afresh_push_out_the_least_recently_used_not_the_one_in_use() -> None:
    cache: IdentityCache[str] = IdentityCache(2)
    shared = ["node-1"]
    assert cache.get((shared,), lambda: "first") == "first"
    for n in range(10):  # one new object per call, as a list decoded afresh for each record
        cache.get(([n],), lambda: "fresh")
        assert cache.get((shared,), lambda: "again") == "first"


def test_a_pair_is_found_only_with_both_objects_the_same() -> None:
    cache: IdentityCache[str] = IdentityCache(4)
    nodes, failures, other = ["a"], {"a": {}}, {"a": {}}
    cache.get((nodes, failures), lambda: "pair")
    assert cache.get((nodes, other), lambda: "other pair") == "other pair"
    assert cache.get((nodes, failures), lambda: "made again") == "pair"
