"""A bind through the API server records its intent before the Binding and its outcome after; a process that dies in
between leaves the intent, which the runtime's reconciler settles from the pod's ``spec.nodeName`` and the ingester
folds into the cycle (``dashboard.bind_intents``, ``scheduler_core.extender.record.bind_intents``).

The process dying is a ``BaseException`` raised by the binder after (or before) the Binding: nothing after it runs,
as after a SIGKILL, so the spool holds the verb's own intent and no record. The same with a real SIGKILL under
gunicorn: ``tests/faults/test_bind_killed.py``.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator

import msgspec
import pytest
from prometheus_client import REGISTRY

from dashboard.ingest.spool_ingest import spool_ingest
from dashboard.models import Outcome, SchedulingCycle, VerbCall
from scheduler_core.extender.protocol.binding import BindOutcome
from scheduler_core.extender.record.spool_codec import decode_event, decode_intent, encode_event
from scheduler_core.kube.api import KubernetesBinder
from tests.support.fake_kube_api import FakeKubeAPI, api_client_for, create_binding
from tests.support.stored_calls import stored_record

pytestmark = pytest.mark.django_db

JSON = "application/json"
NODES = ["node-1", "node-2", "node-3"]
POD_PATH = "/api/v1/namespaces/shop/pods/web-1"


class ProcessKilled(BaseException):
    """The process stops here: no handler runs, nothing is spooled after."""


class DiesMidBind(KubernetesBinder):
    """Creates the Binding (``binds``), then the process dies before the verb returns."""

    binds = True

    def bind(self, *, namespace: str, name: str, uid: str, node: str) -> BindOutcome:
        if self.binds:
            super().bind(namespace=namespace, name=name, uid=uid, node=node)
        raise ProcessKilled


@pytest.fixture
def kube_api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        for node in [*NODES, "node-5"]:
            server.put_node(node)
        yield server


@pytest.fixture
def uid(kube_api: FakeKubeAPI) -> str:
    uid = str(uuid.uuid4())
    kube_api.add_pod("web-1", namespace="shop", uid=uid)
    return uid


def call(client, verb: str, body: dict) -> object:
    response = client.post(f"/extender/default/{verb}", data=json.dumps(body), content_type=JSON)
    assert response.status_code == 200, response.content
    return json.loads(response.content)


def filter_and_prioritize(client, uid: str) -> None:
    pod = {"metadata": {"name": "web-1", "namespace": "shop", "uid": uid}, "spec": {"containers": []}}
    args = {"Pod": pod, "Nodes": None, "NodeNames": NODES}
    call(client, "filter", args)
    call(client, "prioritize", args)


def binding(uid: str, node: str = "node-2") -> dict:
    return {"PodName": "web-1", "PodNamespace": "shop", "PodUID": uid, "Node": node}


def reconciled_count(outcome: str) -> float:
    return REGISTRY.get_sample_value("schedlens_bind_intents_reconciled_total", {"outcome": outcome}) or 0.0


def bind_dies(client, runtime, kube_api: FakeKubeAPI, uid: str, *, binds: bool = True) -> None:
    binder = DiesMidBind(api_client_for(kube_api))
    binder.binds = binds
    runtime.extender.binder = binder
    with pytest.raises(ProcessKilled):
        client.post("/extender/default/bind", data=json.dumps(binding(uid)), content_type=JSON)
    runtime.extender.binder = KubernetesBinder(api_client_for(kube_api))  # the restarted process's


def test_the_intent_is_spooled_before_the_binding_and_settled_by_the_bind_record(client, runtime, kube_api, uid):
    runtime.extender.binder = KubernetesBinder(api_client_for(kube_api))
    filter_and_prioritize(client, uid)
    seen: list[list[tuple[int, bytes]]] = []

    def watching(server, request, match):  # the spool as the API server receives the Binding
        seen.append(runtime.spool.intents())
        return create_binding(server, request, match)

    kube_api.add_route("POST", r"/api/v1/namespaces/(?P<namespace>shop)/pods/(?P<name>web-1)/binding", watching)
    answer = call(client, "bind", binding(uid))

    assert answer == {"Error": ""}
    ((intent_row,),) = seen
    intent = decode_intent(intent_row[1])
    assert (intent.pod_namespace, intent.pod_name, intent.pod_uid, intent.node) == ("shop", "web-1", uid, "node-2")
    assert intent.profile == "default"
    assert runtime.spool.intents() == [], "settled by the bind's record, in the same transaction"
    record = decode_event(runtime.spool.read_rows(10)[-1].data)
    assert (record.event_id, record.started_at) == (intent.event_id, intent.started_at)
    assert record.bind is not None
    assert (record.bind.api_status, record.bind.detail) == (201, "bound"), "the record as without intents"

    assert spool_ingest(spool=runtime.spool) == 3
    cycle = SchedulingCycle.objects.get(pod_uid=uid)
    assert (cycle.outcome, cycle.chosen_node) == (Outcome.BOUND, "node-2")
    assert VerbCall.objects.filter(cycle=cycle, verb="bind").count() == 1


def test_a_bind_done_by_a_process_that_died_is_recorded_with_its_node(client, runtime, kube_api, uid):
    filter_and_prioritize(client, uid)
    bind_dies(client, runtime, kube_api, uid)
    assert kube_api.pod("web-1", "shop")["spec"]["nodeName"] == "node-2", "the Binding was created"
    (intent_row,) = runtime.spool.intents()

    assert spool_ingest(spool=runtime.spool) == 2, "the intent is no spool record: only filter and prioritize"
    assert SchedulingCycle.objects.get(pod_uid=uid).outcome == Outcome.PENDING
    assert runtime.spool.intents() == [intent_row], "the ingester neither loses nor stores the intent"

    before = reconciled_count("bound")
    runtime.reconciler.grace_seconds = 0
    result = runtime.reconciler.reconcile_once()
    assert [r.outcome for r in result.reconciled] == ["bound"]
    assert reconciled_count("bound") == before + 1
    assert runtime.spool.intents() == []

    assert spool_ingest(spool=runtime.spool) == 1
    cycle = SchedulingCycle.objects.get(pod_uid=uid)
    assert (cycle.outcome, cycle.chosen_node, cycle.error) == (Outcome.BOUND, "node-2", "")
    (bind,) = VerbCall.objects.filter(cycle=cycle, verb="bind")
    assert bind.event_id == decode_intent(intent_row[1]).event_id
    assert stored_record(bind)["node"] == "node-2"
    assert stored_record(bind)["detail"].startswith("reconciled after schedlens stopped mid-bind")


@pytest.mark.parametrize(
    ("change", "outcome", "error"),
    [
        ("bound elsewhere", "bound_elsewhere", "bind: pod is bound to another node: node-5"),
        ("not bound", "not_bound", "bind: the pod was not bound"),
        ("deleted", "pod_gone", "bind: the pod no longer exists (deleted)"),
    ],
)
def test_a_bind_that_did_not_happen_is_recorded_as_the_pod_shows(
    client, runtime, kube_api, uid, change, outcome, error
):
    filter_and_prioritize(client, uid)
    bind_dies(client, runtime, kube_api, uid, binds=False)  # died before asking
    if change == "bound elsewhere":  # e.g. kube-scheduler retried through another replica, which chose node-5
        kube_api.set_pod_node("web-1", "node-5", "shop")
    elif change == "deleted":
        kube_api.delete_pod("web-1", "shop")

    runtime.reconciler.grace_seconds = 0
    assert [r.outcome for r in runtime.reconciler.reconcile_once().reconciled] == [outcome]
    spool_ingest(spool=runtime.spool)

    cycle = SchedulingCycle.objects.get(pod_uid=uid)
    assert cycle.outcome == Outcome.ERROR
    assert cycle.chosen_node == ""
    assert cycle.error.startswith(error)
    assert VerbCall.objects.filter(cycle=cycle, verb="bind").count() == 1


def test_an_intent_waits_while_the_api_server_cannot_answer_then_is_settled(client, runtime, kube_api, uid):
    filter_and_prioritize(client, uid)
    bind_dies(client, runtime, kube_api, uid)
    kube_api.inject("GET", POD_PATH, 503, times=1)
    runtime.reconciler.grace_seconds = 0

    down = runtime.reconciler.reconcile_once()
    assert (down.reconciled, len(down.failed)) == ([], 1)
    assert len(runtime.spool.intents()) == 1
    spool_ingest(spool=runtime.spool)
    assert SchedulingCycle.objects.get(pod_uid=uid).outcome == Outcome.PENDING
    assert not VerbCall.objects.filter(verb="bind").exists(), "not stored as a finished bind"

    up = runtime.reconciler.reconcile_once()
    assert [r.outcome for r in up.reconciled] == ["bound"]
    spool_ingest(spool=runtime.spool)
    cycle = SchedulingCycle.objects.get(pod_uid=uid)
    assert (cycle.outcome, cycle.chosen_node) == (Outcome.BOUND, "node-2")


def test_a_late_record_of_a_reconciled_bind_is_not_stored_twice(client, runtime, kube_api, uid):
    """A bind that outlived the grace (it cannot: 4 s against 30) and then recorded itself: same event id, one call."""
    filter_and_prioritize(client, uid)
    bind_dies(client, runtime, kube_api, uid)
    runtime.reconciler.grace_seconds = 0
    (reconciled,) = runtime.reconciler.reconcile_once().reconciled
    late = msgspec.structs.replace(reconciled.event, error="", response=msgspec.Raw(b'{"Error":""}'))
    runtime.spool.append(encode_event(late))

    spool_ingest(spool=runtime.spool)
    cycle = SchedulingCycle.objects.get(pod_uid=uid)
    assert VerbCall.objects.filter(cycle=cycle, verb="bind").count() == 1
    assert (cycle.outcome, cycle.chosen_node) == (Outcome.BOUND, "node-2")


def test_a_bind_whose_intent_cannot_be_spooled_is_refused_unless_the_policy_answers(
    client, runtime, kube_api, uid, settings, monkeypatch
):
    runtime.extender.binder = KubernetesBinder(api_client_for(kube_api))

    def full(data: bytes) -> int:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(runtime.spool, "intend", full)
    settings.SCHEDLENS_SPOOL_FAILURE = "fail"
    response = client.post("/extender/default/bind", data=json.dumps(binding(uid)), content_type=JSON)
    assert response.status_code == 503
    assert "not bound" in json.loads(response.content)["error"]
    assert kube_api.requests_to("POST", POD_PATH + "/binding") == [], "nothing bound that nobody could account for"

    settings.SCHEDLENS_SPOOL_FAILURE = "answer"
    assert call(client, "bind", binding(uid)) == {"Error": ""}
    assert kube_api.pod("web-1", "shop")["spec"]["nodeName"] == "node-2"


def test_a_simulated_bind_records_no_intent(client, runtime, uid):
    call(client, "bind", binding(uid))
    assert runtime.spool.intents() == []
    assert decode_event(runtime.spool.read_rows(1)[0].data).bind.simulated


def test_a_bind_whose_record_cannot_be_spooled_keeps_its_intent_and_is_reconciled(client, runtime, kube_api, uid):
    """The spool refuses the record after the Binding (disk full): the transaction that would have settled the intent
    is rolled back whole, so the intent stays and the bind is recorded once the spool takes records again."""
    runtime.extender.binder = KubernetesBinder(api_client_for(kube_api))
    filter_and_prioritize(client, uid)
    conn = sqlite3.connect(runtime.spool.path)
    conn.execute("CREATE TRIGGER full BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'disk is full'); END")
    conn.commit()

    response = client.post("/extender/default/bind", data=json.dumps(binding(uid)), content_type=JSON)
    assert response.status_code == 503, "SCHEDLENS_SPOOL_FAILURE=fail"
    assert kube_api.pod("web-1", "shop")["spec"]["nodeName"] == "node-2"
    assert len(runtime.spool.intents()) == 1

    runtime.reconciler.grace_seconds = 0
    with pytest.raises(sqlite3.Error, match="disk is full"):  # the thread logs it and tries again
        runtime.reconciler.reconcile_once()
    assert len(runtime.spool.intents()) == 1, "the spool still refuses: the intent stays"
    conn.execute("DROP TRIGGER full")
    conn.commit()
    conn.close()
    assert [r.outcome for r in runtime.reconciler.reconcile_once().reconciled] == ["bound"]

    spool_ingest(spool=runtime.spool)
    cycle = SchedulingCycle.objects.get(pod_uid=uid)
    assert (cycle.outcome, cycle.chosen_node) == (Outcome.BOUND, "node-2")
