"""``answer_tie``: the cycles where rounding to kube-scheduler's 0..10 scale erased our preference, flagged by the
ingester and listed by ``?answer_tie=true``.

On the ``fixed`` scale (``spread`` keeps 10 for the best node, so it never ties a node that scored less): node-1 is
busy (final 0); 1.12 and 1.16 MB give finals 72 and 71, which both answer 7; 1.0 and 2.0 MB give 75 and 50, answered
8 and 5.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import pickle
from datetime import timedelta

import pytest
from django.db import connection

from dashboard.filters import CycleFilterSet
from dashboard.ingest.cycles import cycles_ingest_events
from dashboard.ingest.new_calls import build_call
from dashboard.models import SchedulingCycle
from scheduler_core.extender.scoring.answer import preference_tied
from tests.support.kube_scheduler import T0, KubeScheduler
from tests.support.stored_calls import stored_record

MINUTE = timedelta(minutes=1)
NODES = ["node-1", "node-2", "node-3"]
TIED = {"node-1": 4.0e6, "node-2": 1.12e6, "node-3": 1.16e6}
UNTIED = {"node-1": 4.0e6, "node-2": 1.0e6, "node-3": 2.0e6}
EQUAL = {"node-1": 4.0e6, "node-2": 1.0e6, "node-3": 1.0e6}
"""node-2 and node-3 score the same: answering them the same erases nothing."""


def scheduler(traffic: dict[str, float]) -> KubeScheduler:
    """kube-scheduler calling profiles that answer on the fixed scale."""
    found = KubeScheduler(dict(traffic))
    found.profiles = {name: dataclasses.replace(p, answer_scale="fixed") for name, p in found.profiles.items()}
    return found


def test_the_spread_scale_never_ties_our_preferred_node_with_a_node_that_scored_less():
    _, scored, _ = KubeScheduler(dict(TIED)).events(at=T0, name="spread-1", nodes=NODES)
    record = scored.prioritize
    assert record.answer_scale == "spread"
    assert record.extender == [0, 10, 9]
    assert not preference_tied(record.final, record.extender)


def prioritize_record(cycle: SchedulingCycle) -> dict:
    return stored_record(cycle.calls.get(verb="prioritize"))


@pytest.fixture
def history() -> dict[str, SchedulingCycle]:
    return {
        "tied-1": scheduler(TIED).schedule(at=T0, name="tied-1", nodes=NODES),
        "untied-1": scheduler(UNTIED).schedule(at=T0 + MINUTE, name="untied-1", nodes=NODES),
        "equal-1": scheduler(EQUAL).schedule(at=T0 + 2 * MINUTE, name="equal-1", nodes=NODES),
        "tied-2": scheduler(TIED).schedule(at=T0 + 3 * MINUTE, name="tied-2", nodes=NODES, bind=False),
        "one-node": scheduler(TIED).schedule(at=T0 + 4 * MINUTE, name="one-node", nodes=["node-2"]),
    }


@pytest.mark.django_db
def test_the_ingester_flags_exactly_the_cycles_whose_answer_tied_our_preferred_node(history):
    flags = {name: cycle.answer_tie for name, cycle in history.items()}
    assert flags == {"tied-1": True, "untied-1": False, "equal-1": False, "tied-2": True, "one-node": False}
    for name in ("tied-1", "untied-1", "equal-1"):  # the premise: what kube-scheduler was really answered
        record = prioritize_record(history[name])
        assert preference_tied(record["final"], record["extender"]) is flags[name], name
    tied = prioritize_record(history["tied-1"])
    assert tied["extender"][1] == tied["extender"][2]
    assert tied["final"][1] > tied["final"][2]
    assert history["tied-1"].preferred_node == "node-2"


def cycle_ids(api, params: dict) -> list[int]:
    response = api.get("/api/v1/cycles/", {**params, "page_size": 500})
    assert response.status_code == 200, response.content
    return [row["id"] for row in response.json()["results"]]


@pytest.mark.django_db
def test_the_api_lists_exactly_the_tied_cycles_and_shows_the_flag(api, history):
    newest_first = sorted(history.values(), key=lambda c: (c.started_at, c.id), reverse=True)
    assert cycle_ids(api, {"answer_tie": "true"}) == [history["tied-2"].id, history["tied-1"].id]
    assert cycle_ids(api, {"answer_tie": "false"}) == [c.id for c in newest_first if not c.answer_tie]
    assert cycle_ids(api, {"answer_tie": "true", "outcome": "bound"}) == [history["tied-1"].id]
    detail = api.get(f"/api/v1/cycles/{history['tied-1'].id}/").json()
    assert detail["answer_tie"] is True
    assert api.get(f"/api/v1/cycles/{history['untied-1'].id}/").json()["answer_tie"] is False


@pytest.mark.django_db
def test_a_bad_answer_tie_value_is_a_400_naming_it(api):
    response = api.get("/api/v1/cycles/", {"answer_tie": "perhaps"})
    assert response.status_code == 400
    assert response.json()["field"] == "answer_tie"


@pytest.mark.django_db
def test_the_exports_carry_the_flag(api, history):
    response = api.get("/api/v1/cycles/export.csv", {"answer_tie": "true"})
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [(r["pod_name"], r["answer_tie"]) for r in rows] == [("tied-1", "True"), ("tied-2", "True")]
    response = api.get("/api/v1/cycles/export.ndjson")
    objects = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert {o["pod_name"]: o["answer_tie"] for o in objects}["untied-1"] is False


@pytest.mark.django_db
def test_the_flag_is_kept_when_the_cycles_calls_arrive_in_separate_batches():
    """The prioritize joins a stored cycle (the flag is updated), then a bind joins it: the summary is derived again
    from the stored prioritize's record (``Summary.of_call``)."""
    filtered, scored, bound = scheduler(TIED).events(at=T0, name="late-1", nodes=NODES)
    for event in (filtered, scored, bound):
        cycles_ingest_events(events=[event])
        cycle = SchedulingCycle.objects.get(calls__event_id=filtered.event_id)
        assert cycle.answer_tie is (event is not filtered), event.verb
    assert cycle.outcome == "bound"


def test_a_prepared_call_keeps_its_flag_across_the_process_boundary():
    """Prepared calls are pickled from the preparing processes to the ingester (``Summary.__getstate__``)."""
    for traffic, expected in ((TIED, True), (UNTIED, False)):
        _, scored, _ = scheduler(traffic).events(at=T0, name="pickled-1", nodes=NODES)
        prepared = build_call(scored)
        assert prepared.summary.answer_tie is expected
        received = pickle.loads(pickle.dumps(prepared))  # noqa: S301 (our own bytes)
        assert received.summary.answer_tie is expected
        assert received.summary.nodes == prepared.summary.nodes == NODES


@pytest.mark.django_db
def test_tied_cycles_are_paged_from_their_partial_index_on_postgresql(history):
    if connection.vendor != "postgresql":
        pytest.skip("the plan is PostgreSQL's")
    queryset = CycleFilterSet({"answer_tie": "true"}, queryset=SchedulingCycle.objects.all()).qs
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a handful of rows: make the planner show its index
    assert "cycle_answer_tie" in queryset.order_by("-started_at", "-id")[:51].explain()
