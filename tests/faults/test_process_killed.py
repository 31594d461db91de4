"""schedlens SIGKILLed between recording a call and answering it.

The record is spooled before the answer is written, so it survives the kill; but kube-scheduler never got that
answer. The answer is confirmed in the spool once written (``dashboard/extender/calls.py``); after the restart the
ingester stores the unconfirmed call as failed, and the cycle as an error.

To kill the process at exactly that point without a test hook, the answer is made far larger than the socket
buffers (a full-Nodes filter of ~30 MB, as at a thousand nodes) and the client does not read it: the worker is
then blocked writing the answer, its record already spooled.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import signal
import socket
from pathlib import Path

import msgspec
import pytest

from dashboard.ingest.spool_ingest import ANSWER_NOT_CONFIRMED
from dashboard.models import Outcome, VerbCall
from dashboard.spool import Spool
from scheduler_core.cli.simulator import make_node, make_pod
from tests.support.processes import Gunicorn, database_url, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

GRACE_SECONDS = 4.0
JSON = "application/json"


def big_filter_request(port: int, nodes: int = 2000) -> tuple[bytes, str]:
    rng = random.Random(5)
    pod = make_pod(rng)
    items = [make_node(f"node-{i:04d}", rng) for i in range(nodes)]
    body = msgspec.json.encode({"Pod": pod, "Nodes": {"metadata": {}, "items": items}, "NodeNames": None})
    head = (
        f"POST /extender/default/filter HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: Go-http-client/1.1\r\n"
        f"Content-Length: {len(body)}\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n"
    )
    return head.encode() + body, pod["metadata"]["uid"]


def test_a_call_whose_answer_was_never_written_is_recorded_as_failed_after_the_restart(
    settings, tmp_path: Path, production_env: dict[str, str]
) -> None:
    env = {
        **production_env,
        "DATABASE_URL": database_url(settings.DATABASES["default"]),
        "SCHEDLENS_INGEST_IN_PROCESS": "true",
        "SCHEDLENS_ANSWER_CONFIRM_SECONDS": str(GRACE_SECONDS),
    }
    server = Gunicorn(env, tmp_path / "gunicorn.log", workers=1)
    try:
        small = {"Pod": {"metadata": {"name": "ok", "namespace": "shop", "uid": "uid-ok"}}, "NodeNames": ["node-001"]}
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("POST", "/extender/default/filter", body=json.dumps(small), headers={"Content-Type": JSON})
        assert conn.getresponse().status == 200
        conn.close()

        request, uid = big_filter_request(server.port)
        spool = Spool(env["SCHEDLENS_SPOOL_DIR"])
        (worker,) = server.workers()
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # and never read: the answer cannot drain
        client.connect(("127.0.0.1", server.port))
        client.sendall(request)
        wait_for(
            lambda: any(not row.answered for row in spool.read_rows(10)),
            what="the big call to be recorded and its answer to be (stuck) on its way",
            timeout=60,
        )
        os.kill(worker, signal.SIGKILL)
        client.close()
        wait_for(lambda: [w for w in server.workers() if w != worker], what="gunicorn to start a new worker")

        failed = wait_for(
            lambda: VerbCall.objects.filter(cycle__pod_uid=uid).first(),
            what="the restarted worker's ingester to store the call",
            timeout=GRACE_SECONDS + 30,
        )
    finally:
        server.stop()
    assert failed.error.startswith(ANSWER_NOT_CONFIRMED)
    assert failed.http_status == 200, "what was about to be answered is kept"
    assert failed.cycle.outcome == Outcome.ERROR
    assert "answer not confirmed" in failed.cycle.error
    confirmed = VerbCall.objects.get(cycle__pod_uid="uid-ok")
    assert confirmed.error == ""
    assert confirmed.cycle.outcome != Outcome.ERROR
