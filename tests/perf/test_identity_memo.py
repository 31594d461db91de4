"""The ingester's memo of values derived from shared objects: by identity, least recently used dropped."""

from __future__ import annotations

from dashboard.identity_memo import IdentityMemo


def test_a_value_is_made_once_per_object_and_again_for_an_equal_but_other_object() -> None:
    memo: IdentityMemo[int] = IdentityMemo(4)
    made: list[object] = []
    shared, equal = ["a", "b"], ["a", "b"]

    def make(obj: object) -> int:
        made.append(obj)
        return len(made)

    assert memo.get((shared,), lambda: make(shared)) == 1
    assert memo.get((shared,), lambda: make(shared)) == 1
    assert memo.get((equal,), lambda: make(equal)) == 2, "equal is not the same: its value is made for it"
    assert made == [shared, equal]


def test_objects_made_afresh_push_out_the_least_recently_used_not_the_one_in_use() -> None:
    memo: IdentityMemo[str] = IdentityMemo(2)
    shared = ["node-1"]
    assert memo.get((shared,), lambda: "first") == "first"
    for n in range(10):  # one new object per call, as a list decoded afresh for each record
        memo.get(([n],), lambda: "fresh")
        assert memo.get((shared,), lambda: "again") == "first"


def test_a_pair_is_found_only_with_both_objects_the_same() -> None:
    memo: IdentityMemo[str] = IdentityMemo(4)
    nodes, failures, other = ["a"], {"a": {}}, {"a": {}}
    memo.get((nodes, failures), lambda: "pair")
    assert memo.get((nodes, other), lambda: "other pair") == "other pair"
    assert memo.get((nodes, failures), lambda: "made again") == "pair"
