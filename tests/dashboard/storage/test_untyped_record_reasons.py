"""A stored record that no longer reads as the engine's is kept as it is, with a reason in schedlens's words."""

from __future__ import annotations

from dashboard.storage.call_record import record_from_json
from scheduler_core.extender.record.structs import FILTER, PRIORITIZE


def test_a_record_of_the_wrong_shape_says_which_field_and_what_it_holds():
    record = record_from_json(FILTER, {"nodes": ["a", 7], "node_mode": "names"})
    assert record.untyped is not None
    assert record.untyped_reason == "expected a string, got a number (at $.nodes[1])"


def test_a_record_with_an_unknown_node_mode_says_so():
    record = record_from_json(PRIORITIZE, {"nodes": ["a"], "node_mode": "everything"})
    assert record.untyped_reason == "unknown node mode 'everything'"
