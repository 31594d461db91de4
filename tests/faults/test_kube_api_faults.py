"""Kubernetes API faults end to end: kube-scheduler's client → gunicorn → the bind verb → the Kubernetes-shaped
server, and the record the ingester makes of it.

The binder's own faults one by one (409 same and other node, 404, 429 with Retry-After, 5xx, a slow server, a
dropped connection) are ``tests/scheduler_core/kube/test_binder.py``; a slow binding next to a filter is
``tests/config/test_live_server.py``. Here: a binding slower than kube-scheduler's 5 s timeout followed by the
retry's 409, and binds for a pod that does not exist or whose UID changed, through the verb over HTTP.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from dashboard.ingest.spool_ingest import spool_ingest
from dashboard.models import Outcome, SchedulingCycle
from dashboard.spool import Spool
from scheduler_core.cli.simulator import ExtenderClient
from tests.support.fake_kube_api import FakeKubeAPI, write_kubeconfig
from tests.support.processes import Gunicorn, wait_for
from tests.support.stored_calls import stored_record

pytestmark = pytest.mark.django_db

KUBE_SCHEDULER_TIMEOUT = 5.0
BINDING = "/api/v1/namespaces/shop/pods/web-1/binding"
POD = {
    "metadata": {"name": "web-1", "namespace": "shop", "uid": "uid-1", "resourceVersion": "7"},
    "spec": {"containers": [{"name": "web", "image": "nginx:1.25.4"}], "schedulerName": "schedlens-scheduler"},
}
NODES = ["node-1", "node-2", "node-3"]


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        for name in NODES:
            server.put_node(name)
        server.add_pod("web-1", namespace="shop", uid="uid-1", scheduler_name="schedlens-scheduler")
        yield server


@pytest.fixture
def extender(api: FakeKubeAPI, tmp_path: Path, production_env: dict[str, str]) -> Iterator[Gunicorn]:
    env = {
        **production_env,
        "KUBECONFIG": str(write_kubeconfig(api, tmp_path / "kubeconfig")),
        "SCHEDLENS_CLUSTER_SOURCE": "kubernetes",
        "SCHEDLENS_CLUSTER_FILE": "",
        "SCHEDLENS_BIND_MODE": "kubernetes",
    }
    server = Gunicorn(env, tmp_path / "gunicorn.log")
    yield server
    server.stop()


def cycle(client: ExtenderClient, node: str, uid: str = "uid-1") -> tuple[str, float]:
    """One kube-scheduler cycle choosing ``node``: filter, prioritize, bind; returns the bind's Error and seconds."""
    pod = {**POD, "metadata": {**POD["metadata"], "uid": uid}}
    args = msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": NODES})
    assert client.call("filter", args)["NodeNames"] == NODES
    client.call("prioritize", args)
    started = time.monotonic()
    binding = {"PodName": "web-1", "PodNamespace": "shop", "PodUID": uid, "Node": node}
    answer = client.call("bind", msgspec.json.encode(binding))
    return answer["Error"], time.monotonic() - started


def recorded(spool_dir: str) -> list[SchedulingCycle]:
    """Ingest the spool, waiting (bounded) for answers still being confirmed; the rest count as unconfirmed."""
    spool = Spool(spool_dir)
    deadline = time.monotonic() + 5.0
    spool_ingest(spool=spool)
    while spool.depth() and time.monotonic() < deadline:
        time.sleep(0.01)
        spool_ingest(spool=spool)
    spool_ingest(spool=spool, confirm_grace_seconds=0)
    return list(SchedulingCycle.objects.order_by("started_at", "id"))


@pytest.mark.parametrize(
    ("retry_node", "retry_error"),
    [("node-2", ""), ("node-3", "pod is already bound to another node: node-2")],
    ids=["retry-to-the-same-node-succeeds", "retry-to-another-node-is-refused"],
)
def test_a_binding_slower_than_kube_scheduler_s_timeout_then_the_retry_s_409(
    api: FakeKubeAPI, extender: Gunicorn, production_env: dict[str, str], retry_node: str, retry_error: str
) -> None:
    api.inject("POST", BINDING, None, delay=KUBE_SCHEDULER_TIMEOUT + 1)  # slow, but the binding is made
    client = ExtenderClient(f"{extender.url}/extender/default", timeout=KUBE_SCHEDULER_TIMEOUT)

    error, seconds = cycle(client, "node-2")
    assert "timed out" in error
    assert seconds < KUBE_SCHEDULER_TIMEOUT, "answered before kube-scheduler gives up on the call"

    wait_for(lambda: (api.pod("web-1", "shop") or {})["spec"].get("nodeName"), what="the slow binding to land")
    error, _ = cycle(client, retry_node)
    assert retry_error in error if retry_error else error == ""
    client.close()

    first, retry = recorded(production_env["SCHEDLENS_SPOOL_DIR"])
    assert first.outcome == Outcome.ERROR
    assert "bind: binding timed out" in first.error
    if retry_error:
        assert retry.outcome == Outcome.ERROR
        assert retry_error in retry.error
    else:
        assert retry.outcome == Outcome.BOUND
        assert retry.chosen_node == "node-2"
        (bind,) = retry.calls.filter(verb="bind")
        assert stored_record(bind)["api_status"] == 409
        assert stored_record(bind)["detail"].startswith("409: already bound to the same node")


@pytest.mark.parametrize(
    ("binding", "error", "api_status"),
    [
        ({"PodName": "ghost", "PodUID": "uid-ghost"}, "pod not found (deleted before binding)", 404),
        (
            {"PodName": "web-1", "PodUID": "uid-of-an-older-web-1"},
            "pod UID does not match (the pod was recreated)",
            409,
        ),
    ],
    ids=["unknown-pod", "uid-mismatch"],
)
def test_a_bind_for_a_pod_the_api_server_does_not_hold_is_answered_with_an_error_and_recorded(
    api: FakeKubeAPI, extender: Gunicorn, production_env: dict[str, str], binding: dict, error: str, api_status: int
) -> None:
    client = ExtenderClient(f"{extender.url}/extender/default", timeout=KUBE_SCHEDULER_TIMEOUT)
    body = msgspec.json.encode({"PodNamespace": "shop", "Node": "node-1", **binding})
    assert client.call("bind", body) == {"Error": error}
    client.close()
    assert (api.pod("web-1", "shop") or {})["spec"].get("nodeName") is None, "nothing was bound"

    (cycle_,) = recorded(production_env["SCHEDLENS_SPOOL_DIR"])
    assert cycle_.outcome == Outcome.ERROR
    (bind,) = cycle_.calls.all()
    assert bind.error == error
    assert stored_record(bind)["api_status"] == api_status
