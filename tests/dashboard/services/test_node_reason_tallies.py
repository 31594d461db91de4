"""Why nodes were filtered out (``NodeReasonTally``) and which node each cycle preferred (``NodeTally.preferred``),
counted as the record grows and as it is pruned: always what an independent count over the retained records gives."""

from __future__ import annotations

import pickle
from collections import Counter
from datetime import timedelta
from importlib import import_module

import pytest

from dashboard.ingest.cycles import cycles_ingest_events, ingest_calls
from dashboard.ingest.new_calls import build_call
from dashboard.models import NodeReasonTally, NodeTally, SchedulingCycle, VerbCall
from dashboard.placements.models import ObservationKind
from dashboard.placements.services import placements_record
from dashboard.services.node_tallies import node_tallies_rebuild
from dashboard.services.retention import cycles_prune
from scheduler_core.extender.record.spool_codec import decode_event, encode_event
from tests.support.kube_scheduler import NODES, T0
from tests.support.stored_calls import stored_record

MINUTE = timedelta(minutes=1)
DAY = timedelta(days=1)


def counted_reasons() -> dict[tuple[str, str, str], int]:
    return {(r.node, r.plugin, r.reason): r.count for r in NodeReasonTally.objects.all()}


def recounted_reasons() -> dict[tuple[str, str, str], int]:
    """From the retained filter calls' records, one by one, as a reader decodes them."""
    expected: Counter[tuple[str, str, str]] = Counter()
    for call in VerbCall.objects.filter(verb="filter", http_status=200):
        for node, verdicts in stored_record(call).get("failures", {}).items():
            for plugin, reason in verdicts.items():
                expected[(node, plugin, reason)] += 1
    return dict(expected)


def counted_preferred() -> dict[str, int]:
    return {t.node: t.preferred for t in NodeTally.objects.all() if t.preferred}


def recounted_preferred() -> dict[str, int]:
    return dict(Counter(SchedulingCycle.objects.exclude(preferred_node="").values_list("preferred_node", flat=True)))


def node_rows() -> dict[str, tuple]:
    return {
        t.node: (t.considered, t.filtered_out, t.placements, t.preferred, t.last_seen_at)
        for t in NodeTally.objects.all()
    }


@pytest.fixture
def history(kube_scheduler) -> None:
    """Cycles whose filters fail nodes for several plugins and reasons, ingested every way the ingester takes them."""
    at = T0
    for n in range(3):  # node-5 above the traffic threshold, node-6 and node-7 without NodeResources
        kube_scheduler.schedule(at=at, name=f"web-{n}", nodes=[*NODES, "node-6", "node-7"])
        at += MINUTE
    for n in range(2):
        kube_scheduler.schedule(at=at, name=f"train-{n}", gpu=True, profile="gpu-aware", nodes=[*NODES, "node-6"])
        at += MINUTE
    # Through the spool's encoding, one batch: the outcome decoded once, the same failures object for both filters.
    spooled = [
        decode_event(encode_event(e))
        for n in range(2)
        for e in kube_scheduler.events(at=at + n * timedelta(seconds=1), name=f"api-{n}", nodes=["node-4", "node-5"])
    ]
    cycles_ingest_events(events=spooled)
    at += MINUTE
    # Built in a builder process from the spool: its batch comes back pickled, shared failures as one object.
    built = [
        build_call(decode_event(encode_event(e)))
        for n in range(3)
        for e in kube_scheduler.events(at=at + n * timedelta(seconds=1), name=f"job-{n}", nodes=[*NODES, "node-6"])
    ]
    batch = pickle.loads(pickle.dumps(built))  # noqa: S301 (our own bytes)
    assert batch[0].failures is batch[3].failures
    ingest_calls(batch)
    at += MINUTE
    # A filter that leaves one node (the cycle prefers it), then a prioritize of the same attempt in a later batch
    # that scores two others: the cycle's preference moves from node-2 to one of them.
    uid = "uid-moved"
    lone = kube_scheduler.events(at=at, name="moved", uid=uid, nodes=["node-2", "node-5"], bind=False)
    cycles_ingest_events(events=lone[:1])
    assert SchedulingCycle.objects.get(pod_uid=uid).preferred_node == "node-2"
    other = kube_scheduler.events(at=at, name="moved", uid=uid, nodes=["node-1", "node-3"], bind=False)
    cycles_ingest_events(events=other[1:2])
    assert SchedulingCycle.objects.get(pod_uid=uid).preferred_node in {"node-1", "node-3"}


@pytest.mark.django_db
def test_ingested_failures_are_counted_per_node_plugin_and_reason(history):
    counted = counted_reasons()
    assert counted == recounted_reasons()
    assert {plugin for _, plugin, _ in counted} == {"TrafficThreshold", "NodeResourceFitByCR"}
    assert counted[("node-5", "TrafficThreshold", "receive rate above 125.0 MB/s")] == 9  # every default filter
    assert counted[("node-7", "NodeResourceFitByCR", "no NodeResources object for node")] == 3
    assert sum(counted.values()) >= sum(t.filtered_out for t in NodeTally.objects.all())


@pytest.mark.django_db
def test_preferred_nodes_are_counted_per_cycle_even_when_a_late_call_moves_them(history):
    assert counted_preferred() == recounted_preferred()
    assert sum(counted_preferred().values()) == SchedulingCycle.objects.exclude(preferred_node="").count()


@pytest.mark.django_db
def test_pruning_subtracts_exactly_what_the_pruned_record_added(history):
    cycles_prune(older_than=T0 + 3 * MINUTE)
    assert SchedulingCycle.objects.filter(started_at__lt=T0 + 3 * MINUTE).count() == 0
    assert counted_reasons() == recounted_reasons()
    assert counted_preferred() == recounted_preferred()
    assert ("node-7", "NodeResourceFitByCR", "no NodeResources object for node") not in counted_reasons()
    cycles_prune(older_than=T0 + 5 * MINUTE + 30 * timedelta(seconds=1))
    assert counted_reasons() == recounted_reasons()
    assert counted_preferred() == recounted_preferred()
    cycles_prune(older_than=T0 + DAY)
    assert not NodeReasonTally.objects.exists(), "no reason a retained call gives is left"
    assert not NodeTally.objects.exists()


@pytest.mark.django_db
def test_a_rebuild_counts_what_the_ingester_and_the_pruner_counted(history):
    cycles_prune(older_than=T0 + 2 * MINUTE)
    reasons, nodes = counted_reasons(), node_rows()
    assert reasons
    NodeReasonTally.objects.update(count=1)
    NodeTally.objects.update(preferred=0)
    assert node_tallies_rebuild() == len(nodes)
    assert counted_reasons() == reasons
    assert node_rows() == nodes


@pytest.mark.django_db
def test_migration_0007_backfills_the_record_stored_before_it_as_the_ingester_counts(history):
    from django.apps import apps

    backfill = import_module("dashboard.migrations.0007_node_reason_tallies").backfill
    reasons, preferred = counted_reasons(), counted_preferred()
    NodeReasonTally.objects.all().delete()
    NodeTally.objects.update(preferred=0)  # as the AddField leaves them
    backfill(apps, None)
    assert counted_reasons() == reasons
    assert counted_preferred() == preferred


def counted_placements() -> dict[str, int]:
    return {t.node: t.placements for t in NodeTally.objects.all() if t.placements}


def recounted_placements() -> dict[str, int]:
    bound = SchedulingCycle.objects.filter(outcome="bound").exclude(chosen_node="")
    return dict(Counter(bound.values_list("chosen_node", flat=True)))


@pytest.mark.django_db
def test_placements_count_bound_cycles_whoever_bound_them_and_go_with_the_cycles(kube_scheduler):
    # One pod bound by schedlens, one that kube-scheduler bound itself: the placement watcher concludes its cycle.
    kube_scheduler.schedule(at=T0, name="ours", nodes=NODES)
    theirs = kube_scheduler.schedule(at=T0 + MINUTE, name="theirs", nodes=NODES, bind=False)
    assert theirs.chosen_node == ""
    placements_record(
        key="bound:theirs",
        kind=ObservationKind.BOUND,
        pod_uid=theirs.pod_uid,
        pod_namespace=theirs.pod_namespace,
        pod_name=theirs.pod_name,
        node="node-3",
        occurred_at=(T0 + MINUTE + timedelta(seconds=1)).timestamp(),
    )

    assert counted_placements() == recounted_placements()
    assert counted_placements().get("node-3", 0) >= 1
    nodes = node_rows()
    node_tallies_rebuild()
    assert node_rows() == nodes
    cycles_prune(older_than=T0 + DAY)
    assert counted_placements() == {}


@pytest.mark.django_db
def test_a_reason_longer_than_its_column_is_counted_cut_as_every_writer_cuts_it(kube_scheduler):
    """A plugin may explain a failure at any length: the count goes under the reason cut to the column's width
    (``reason_key``), the same key the pruner and a rebuild use, however the batch was counted."""
    import msgspec

    from dashboard.services.node_tallies import reason_key

    plugin, reason = "P" * 200, "a long reason " * 40
    events = kube_scheduler.events(at=T0, name="long-0", nodes=["node-4", "node-5"], bind=False)
    filtered = events[0]
    assert filtered.filter is not None
    record = msgspec.structs.replace(filtered.filter, failures={"node-5": {plugin: reason}}, passed=["node-4"])
    cycles_ingest_events(events=[msgspec.structs.replace(filtered, filter=record)])

    assert counted_reasons() == {("node-5", *reason_key(plugin, reason)): 1}
    before = counted_reasons()
    node_tallies_rebuild()
    assert counted_reasons() == before
