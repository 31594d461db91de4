"""The stored bodies read straight into a replay's columns (``dashboard.storage.replay_inputs``) replay exactly as
the records the API serves do (``dashboard.selectors.cycles.cycle_read``, replayed by
``scheduler_core.history_replay.what_if.replay``)."""

from __future__ import annotations

import dataclasses

import pytest

from dashboard.models import shared_part_data
from dashboard.replays.selectors import replay_rows
from dashboard.selectors.cycles import cycle_read
from dashboard.storage.replay_inputs import CycleReader
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.history_replay.fast_replay import outcome_of, replay_columns
from scheduler_core.history_replay.recorded_cycles import recorded_cycle_from_records
from scheduler_core.history_replay.what_if import RecordedInputs, replay, scenario_from_profile
from tests.support.history import PROFILES
from tests.support.stored_calls import stored_answer, stored_record

pytestmark = pytest.mark.django_db


@pytest.fixture(params=["transcoded", "as spooled"])
def recorded(request, history):
    """The cycles of ``conftest.recorded``, their calls stored transcoded (body format 2) or as the verbs spooled
    them (format 3)."""
    history.deriving = request.param == "as spooled"
    cycles = history.record(30)
    cycles += history.record(10, profile="gpu-aware")
    cycles += history.record(6, nodes=history.node_names[:5])
    return cycles


def scenarios():
    profiles = load_profiles(PROFILES.read_text())
    found = [scenario_from_profile(p.describe()) for p in profiles.values()]
    found.append(dataclasses.replace(found[0], weights={"NetworkTraffic": 1}, max_bytes_per_second=6e7))
    found.append(
        dataclasses.replace(found[0], weights={"ImageLocality": 2, "NodeResourceFitByCR": 1}, answer_scale="fixed")
    )
    found.append(dataclasses.replace(found[1], filters=("TrafficThreshold",), fail_on_missing=True))
    return found


def test_the_bodies_read_as_columns_replay_as_the_records_do(recorded):
    reader = CycleReader()
    rows = list(replay_rows([c.id for c in recorded]))
    assert len(rows) == len(recorded)
    by_id = {c.id: c for c in recorded}
    for row in rows:
        fast = reader.cycle(row, shared_parts=shared_part_data)
        assert fast.columns is not None, row.cycle_id
        assert not fast.skipped
        cycle = by_id[row.cycle_id]
        records = cycle_read(cycle=cycle).records
        general = recorded_cycle_from_records(cycle.id, records)
        assert general.columns is not None
        assert fast.weights == general.weights
        assert fast.columns.answer_scale == general.columns.answer_scale
        assert list(fast.columns.candidates) == list(general.columns.candidates)
        inputs = RecordedInputs.from_records(records.filter, records.prioritize)
        for scenario in scenarios():
            a = replay_columns(fast.columns, scenario)
            b = outcome_of(replay(inputs, scenario))
            assert a.passed.tolist() == b.passed.tolist()
            assert a.finals.tobytes() == b.finals.tobytes()
            assert a.answers.tolist() == b.answers.tolist()
            assert (a.preferred, a.tied, a.partial) == (b.preferred, b.tied, b.partial)
    assert reader.fast == len(recorded)
    # Both kinds of filter bodies were read: lists in a shared part (80 nodes) and in the body (5 nodes), or as
    # spooled.
    assert {len(c.candidates) for c in (reader.cycle(r, shared_parts=shared_part_data).columns for r in rows)} == {
        80,
        5,
    }


def test_a_cycle_stored_as_json_is_read_the_general_way(recorded):
    from dashboard.models import VerbCall

    assert {call.body[0] for c in recorded for call in c.calls.exclude(verb="bind")} == (
        {3} if recorded[0].calls.get(verb="filter").body[0] == 3 else {2}
    ), "every call stored in the parameter's format"

    cycle = recorded[0]
    for call in VerbCall.objects.filter(cycle=cycle, verb__in=("filter", "prioritize")):
        record, response = stored_record(call), stored_answer(call)
        VerbCall.objects.filter(pk=call.pk).update(body=None, record_json=record, response_json=response)
    reader = CycleReader()
    row = next(iter(replay_rows([cycle.id])))
    read = reader.cycle(row, shared_parts=shared_part_data)
    assert reader.fast == 0
    assert read.columns is not None  # the records, then columns_from_inputs
    assert list(read.columns.candidates) == list(stored_record(recorded[0].calls.get(verb="filter"))["nodes"])
