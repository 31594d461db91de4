"""schedlens SIGKILLed between creating a Binding and recording the bind: the restarted process records it anyway.

Found with a real kube-scheduler and two replicas, one SIGKILLed mid-burst: every pod was bound, but without the
placement watcher 3 of 300 cycles stayed ``pending`` with no chosen node. Here the Kubernetes-shaped API server creates
the Binding and holds its answer back (``inject(..., hold=…)``), so the worker is killed with the pod bound and the
bind's record not spooled. gunicorn starts a new worker on the same spool (as a StatefulSet replica restarts on its
own volume); its runtime reconciles the intent the killed worker spooled before asking (``dashboard.bind_intents``)
against the pod's ``spec.nodeName``, and the ingester gives the cycle its node. No placement watcher runs.
"""

from __future__ import annotations

import http.client
import os
import signal
import threading
import time
import uuid
from pathlib import Path

import msgspec
import pytest

from dashboard.models import Outcome, SchedulingCycle, VerbCall
from dashboard.spool import Spool
from scheduler_core.cli.simulator import ExtenderClient
from tests.support.fake_kube_api import FakeKubeAPI, write_kubeconfig
from tests.support.processes import Gunicorn, database_url, wait_for
from tests.support.stored_calls import stored_record

pytestmark = pytest.mark.django_db(transaction=True)

NODES = ["node-1", "node-2", "node-3"]
BINDING = "/api/v1/namespaces/shop/pods/web-1/binding"
GRACE_SECONDS = 2.0


def post_bind(port: int, body: bytes, failures: list[BaseException]) -> None:
    """kube-scheduler's bind call, on a connection of its own, never retried (Go does not retry a POST that was
    sent): it fails when the worker dies."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", "/extender/default/bind", body=body, headers={"Content-Type": "application/json"})
        conn.getresponse().read()
    except (OSError, http.client.HTTPException) as exc:
        failures.append(exc)
    finally:
        conn.close()


def test_a_bind_killed_after_the_binding_is_recorded_with_its_node_by_the_restarted_process(
    settings, tmp_path: Path, production_env: dict[str, str]
) -> None:
    uid = str(uuid.uuid4())
    pod = {"metadata": {"name": "web-1", "namespace": "shop", "uid": uid}, "spec": {"containers": []}}
    with FakeKubeAPI() as api:
        for node in NODES:
            api.put_node(node)
        api.add_pod("web-1", namespace="shop", uid=uid, scheduler_name="schedlens-scheduler")
        env = {
            **production_env,
            "DATABASE_URL": database_url(settings.DATABASES["default"]),
            "KUBECONFIG": str(write_kubeconfig(api, tmp_path / "kubeconfig")),
            "SCHEDLENS_CLUSTER_SOURCE": "kubernetes",
            "SCHEDLENS_CLUSTER_FILE": "",
            "SCHEDLENS_BIND_MODE": "kubernetes",
            "SCHEDLENS_INGEST_IN_PROCESS": "true",
            "SCHEDLENS_BIND_INTENT_GRACE_SECONDS": str(GRACE_SECONDS),
            "SCHEDLENS_BIND_RECONCILE_SECONDS": "0.2",
            "SCHEDLENS_POD_EVENTS": "false",
        }
        server = Gunicorn(env, tmp_path / "gunicorn.log", workers=1)
        try:
            client = ExtenderClient(f"{server.url}/extender/default")
            args = msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": NODES})
            assert client.call("filter", args)["NodeNames"] == NODES
            client.call("prioritize", args)
            client.close()

            api.inject("POST", BINDING, None, hold=60)  # the Binding is created; its answer never comes
            (worker,) = server.workers()
            failures: list[BaseException] = []
            body = msgspec.json.encode({"PodName": "web-1", "PodNamespace": "shop", "PodUID": uid, "Node": "node-2"})
            caller = threading.Thread(target=post_bind, args=(server.port, body, failures))
            caller.start()
            wait_for(
                lambda: (api.pod("web-1", "shop") or {})["spec"].get("nodeName") == "node-2",
                what="the Binding to be created",
            )
            os.kill(worker, signal.SIGKILL)  # within the binder's 4 s: its record is not spooled
            caller.join(timeout=30)
            assert failures, "kube-scheduler saw the call fail"
            spool = Spool(env["SCHEDLENS_SPOOL_DIR"])
            left = spool.intents()  # by the killed worker (checked below, after what matters)
            wait_for(lambda: [w for w in server.workers() if w != worker], what="gunicorn to start a new worker")

            cycle = wait_for(
                lambda: SchedulingCycle.objects.filter(pod_uid=uid, outcome=Outcome.BOUND).first(),
                what="the restarted worker to reconcile the bind and its ingester to store it",
                timeout=GRACE_SECONDS + 60,
            )
            time.sleep(1.0)  # a few more reconcile and ingest passes: nothing more is recorded
            assert spool.intents() == []
            spool.close()
        finally:
            server.stop()
        assert len(api.requests_to("POST", BINDING)) == 1, "the reconciliation read the pod; it bound nothing"

    assert len(left) == 1, "the killed worker left its intent"
    assert cycle.chosen_node == "node-2"
    assert cycle.error == ""
    assert SchedulingCycle.objects.filter(pod_uid=uid).count() == 1
    calls = VerbCall.objects.filter(cycle__pod_uid=uid).order_by("started_at")
    assert [c.verb for c in calls] == ["filter", "prioritize", "bind"], "one cycle, one bind call: not duplicated"
    bind = calls[2]
    assert stored_record(bind)["node"] == "node-2"
    assert stored_record(bind)["detail"].startswith("reconciled after schedlens stopped mid-bind")
    assert bind.server.rpartition(":")[2] == str(worker), "the call is the killed worker's"
