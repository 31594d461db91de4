"""The per-node counts the ingester keeps for a batch are what its calls count one at a time, as the pruner takes
them off (``dashboard.services.node_tallies``), for records from the real verbs."""

from __future__ import annotations

import random

import msgspec
import pytest

from dashboard.ingest.cycles import cycles_ingest_events
from dashboard.models import VerbCall
from scheduler_core.extender.record.structs import VerbEvent
from tests.support.demo_verbs import NOW, cycle_events, demo_extender


@pytest.mark.django_db
def test_the_node_counts_of_a_batch_are_what_its_calls_count_one_by_one():
    """The ingester counts a batch's calls a distinct list at a time; pruning subtracts them a call at a time
    (``audit.tally_call``) and its cycles' placements (``tally_cycles``): both must give the same counts and
    last-seen times."""
    from dashboard.models import NodeTally, SchedulingCycle
    from dashboard.services.node_tallies import NodeCounts, tally_call, tally_cycles

    extender, cluster = demo_extender(60, without_metrics=2)
    rng = random.Random(13)
    events: list[VerbEvent] = []
    for n in range(8):
        cycle = cycle_events(extender, cluster, rng, profile="default" if n % 3 else "gpu-aware", mode="names")
        filtered = cycle[0]
        if n == 5:  # the same lists again, as equal copies rather than the same objects
            copy = msgspec.json.decode(msgspec.json.encode(filtered.filter), type=type(filtered.filter))
            cycle[0] = filtered = msgspec.structs.replace(filtered, filter=copy)
        events += [msgspec.structs.replace(e, started_at=NOW + n) for e in cycle]
        passed = filtered.filter.passed
        if passed and n % 2 == 0:
            bind = {"PodName": filtered.pod_name, "PodNamespace": filtered.pod_namespace}
            bind |= {"PodUID": filtered.pod_uid, "Node": passed[0]}
            bound = extender.bind("default", msgspec.json.encode(bind)).event
            events.append(msgspec.structs.replace(bound, started_at=NOW + n + 0.5))
    cycles_ingest_events(events=events)

    expected: dict[str, NodeCounts] = {}
    for call in VerbCall.objects.order_by("id"):
        values = {"http_status": call.http_status, "verb": call.verb, "error": call.error}
        tally_call(
            expected, values | {"started_at": call.started_at, "body": call.body, "record_json": call.record_json}
        )
    # Placements (and preferences) count cycles, as the pruner takes them off.
    tally_cycles(expected, SchedulingCycle.objects.values_list("preferred_node", "outcome", "chosen_node"))
    stored = {t.node: (t.considered, t.filtered_out, t.placements, t.last_seen_at) for t in NodeTally.objects.all()}
    assert stored == {n: (c.considered, c.filtered_out, c.placements, c.last_seen_at) for n, c in expected.items()}
    assert any(c.placements for c in expected.values()), "binds were counted"
    assert any(c.filtered_out for c in expected.values()), "failed nodes were counted"
