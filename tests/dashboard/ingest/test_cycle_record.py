"""Every filter / prioritize / bind folds into one recorded SchedulingCycle, also across server processes."""

from __future__ import annotations

import http.client
import json

import pytest

from dashboard.ingest.spool_ingest import spool_ingest
from dashboard.models import Outcome, SchedulingCycle, VerbCall
from dashboard.spool import Spool
from scheduler_core.extender.scoring.profiles import load_profiles
from tests.support.extender_requests import args, binding, call, pod
from tests.support.ingest import ingest_everything
from tests.support.live_server import LiveServer
from tests.support.stored_calls import stored_answer, stored_record

JSON = "application/json"
NODES = ["node-1", "node-2", "node-3"]


@pytest.mark.django_db
def test_a_full_cycle_is_recorded_once_with_every_verdict_score_and_answer(client, runtime):
    the_pod = pod()
    filtered = call(client, "filter", args(the_pod, NODES))
    scores = call(client, "prioritize", args(the_pod, filtered["NodeNames"]))
    call(client, "bind", binding(the_pod, "node-2"))

    assert spool_ingest(spool=runtime.spool) == 3
    cycle = SchedulingCycle.objects.get()
    assert (cycle.pod_namespace, cycle.pod_name, cycle.pod_uid) == ("shop", "web-7d9f", the_pod["metadata"]["uid"])
    assert cycle.profile == "default"
    assert cycle.node_mode == "names"
    assert cycle.outcome == Outcome.BOUND
    assert cycle.chosen_node == "node-2"
    assert cycle.preferred_node == "node-2", "node-2 has the least traffic"
    assert (cycle.candidate_count, cycle.feasible_count) == (3, 3)
    assert cycle.filter_ms is not None
    assert cycle.prioritize_ms is not None
    assert cycle.bind_ms is not None
    assert cycle.metric_age_seconds is not None
    assert cycle.finished_at >= cycle.started_at

    calls = {c.verb: c for c in cycle.calls.all()}
    assert set(calls) == {"filter", "prioritize", "bind"}
    assert stored_record(calls["filter"])["traffic_bytes"] == [4.0e6, 1.0e6, 2.0e6]
    assert stored_answer(calls["filter"]) == filtered
    assert stored_answer(calls["prioritize"]) == scores
    traffic = stored_record(calls["prioritize"])["plugins"][0]
    assert (traffic["name"], traffic["weight"]) == ("NetworkTraffic", 1)
    assert traffic["raw"] == [4.0e6, 1.0e6, 2.0e6]
    assert traffic["scores"] == [0.0, 75.0, 50.0]
    assert stored_record(calls["prioritize"])["extender"] == [0, 10, 7], "spread: 10 × (final − 0) / (75 − 0), half up"
    assert stored_record(calls["bind"])["node"] == "node-2"


@pytest.mark.django_db
def test_ingesting_the_same_records_twice_changes_nothing(client, runtime):
    the_pod = pod()
    call(client, "filter", args(the_pod, NODES))
    batch = runtime.spool.read_batch(10)
    spool_ingest(spool=runtime.spool)
    for _, data in batch:  # as if the ingester crashed after the commit, before deleting from the spool
        runtime.spool.append(data)
    spool_ingest(spool=runtime.spool)
    assert VerbCall.objects.count() == 1
    assert SchedulingCycle.objects.count() == 1


@pytest.mark.django_db
def test_a_retry_of_the_same_pod_opens_a_new_cycle(client, runtime):
    the_pod = pod()
    call(client, "filter", args(the_pod, ["node-9"]))
    call(client, "filter", args(the_pod, NODES))
    spool_ingest(spool=runtime.spool)
    assert SchedulingCycle.objects.filter(pod_uid=the_pod["metadata"]["uid"]).count() == 2


@pytest.mark.django_db
def test_a_filter_that_leaves_no_node_records_an_unschedulable_cycle(client, runtime, settings):
    the_pod = pod()
    the_pod["spec"]["containers"][0]["resources"] = {"requests": {"example.com/gpu": "1"}}
    runtime.extender.profiles = runtime.profiles = load_profiles(
        "profiles: [{name: default, plugins: {filter: {enabled: [{name: NodeResourceFitByCR}]}}}]"
    )
    answer = call(client, "filter", args(the_pod, NODES))
    spool_ingest(spool=runtime.spool)
    assert answer["NodeNames"] == []
    cycle = SchedulingCycle.objects.get()
    assert cycle.outcome == Outcome.UNSCHEDULABLE
    assert cycle.feasible_count == 0


@pytest.mark.django_db
def test_a_refused_call_is_recorded_as_an_error_cycle(client, runtime):
    client.post("/extender/default/filter", data=b"{", content_type=JSON)
    spool_ingest(spool=runtime.spool)
    cycle = SchedulingCycle.objects.get()
    assert cycle.outcome == Outcome.ERROR
    assert "truncated" in cycle.error


def _post(server: LiveServer, verb: str, body: bytes) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("POST", f"/extender/default/{verb}", body=body, headers={"Content-Type": JSON})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    assert response.status == 200, data
    return data


@pytest.fixture
def two_replicas(tmp_path):
    """Two schedlens processes with their own spools, like two replicas behind one Service."""
    servers = []
    try:
        for name in ("a", "b"):
            env = {
                "SCHEDLENS_SPOOL_DIR": str(tmp_path / f"spool-{name}"),
                "SCHEDLENS_INGEST_IN_PROCESS": "false",
                "SCHEDLENS_BIND_MODE": "simulated",
                "SCHEDLENS_CONFIG": "",
                "SCHEDLENS_CLUSTER_FILE": "",
            }
            servers.append(LiveServer(env))
        yield servers
    finally:
        for server in servers:
            server.stop()


@pytest.mark.django_db(transaction=True)
def test_calls_of_one_cycle_answered_by_two_processes_fold_into_one_cycle(two_replicas, tmp_path):
    replica_a, replica_b = two_replicas
    the_pod = pod()
    filtered = json.loads(_post(replica_a, "filter", args(the_pod, NODES)))
    _post(replica_b, "prioritize", args(the_pod, filtered["NodeNames"]))
    _post(replica_b, "bind", binding(the_pod, "node-3"))

    # Replica b's spool reaches the database first: its calls wait for the filter of replica a.
    assert ingest_everything(Spool(tmp_path / "spool-b")) == 2
    assert ingest_everything(Spool(tmp_path / "spool-a")) == 1

    cycle = SchedulingCycle.objects.get()
    assert cycle.outcome == Outcome.BOUND
    assert cycle.chosen_node == "node-3"
    assert sorted(cycle.calls.values_list("verb", flat=True)) == ["bind", "filter", "prioritize"]
    assert len(set(cycle.calls.values_list("server", flat=True))) == 2
    assert cycle.candidate_count == 3


@pytest.mark.django_db(transaction=True)
def test_a_prioritize_stored_after_the_bind_of_its_cycle_joins_that_cycle(two_replicas, tmp_path):
    # Filter and bind answered by one replica, prioritize by the other; the bind's replica stores first, so the
    # cycle is already bound when the prioritize (made before the bind) reaches the database.
    replica_a, replica_b = two_replicas
    the_pod = pod()
    filtered = json.loads(_post(replica_a, "filter", args(the_pod, NODES)))
    _post(replica_b, "prioritize", args(the_pod, filtered["NodeNames"]))
    _post(replica_a, "bind", binding(the_pod, "node-3"))

    assert ingest_everything(Spool(tmp_path / "spool-a")) == 2
    assert ingest_everything(Spool(tmp_path / "spool-b")) == 1

    cycle = SchedulingCycle.objects.get()
    assert (cycle.outcome, cycle.chosen_node) == (Outcome.BOUND, "node-3")
    assert sorted(cycle.calls.values_list("verb", flat=True)) == ["bind", "filter", "prioritize"]
