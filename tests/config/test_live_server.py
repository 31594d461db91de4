"""schedlens under gunicorn, as deployed: against the Kubernetes-shaped server, and behind mutual TLS."""

from __future__ import annotations

import http.client
import json
import re
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from scheduler_core.extender.filter_answer import UNKNOWN_NODE
from tests.support.fake_kube_api import FakeKubeAPI, RecordedRequest, Response, create_binding, write_kubeconfig
from tests.support.live_server import LiveServer
from tests.support.pki import Pki, client_context

JSON = "application/json"
POD = {
    "metadata": {"name": "web-1", "namespace": "shop", "uid": "uid-1", "resourceVersion": "7"},
    "spec": {"containers": [{"name": "web", "image": "nginx:1.25.4"}]},
}


def post(server: LiveServer, verb: str, body: bytes, *, context: ssl.SSLContext | None = None) -> tuple[int, bytes]:
    if context is None:
        conn: http.client.HTTPConnection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=15)
    else:
        conn = http.client.HTTPSConnection("127.0.0.1", server.port, timeout=15, context=context)
    try:
        conn.request("POST", f"/extender/default/{verb}", body=body, headers={"Content-Type": JSON})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def filter_args(names: list[str]) -> bytes:
    return msgspec.json.encode({"Pod": POD, "Nodes": None, "NodeNames": names})


# ----------------------------------------------------------------------------
# A slow binding never holds up another verb (gthread: each request has its own thread)
# ----------------------------------------------------------------------------


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        for name in ("node-1", "node-2", "node-3"):
            server.put_node(name)
        server.add_pod("web-1", namespace="shop", uid="uid-1", scheduler_name="schedlens-scheduler")
        yield server


@pytest.fixture
def in_cluster(api: FakeKubeAPI, tmp_path: Path) -> Iterator[LiveServer]:
    """One gunicorn worker (8 threads) whose node cache and binder talk to the fake API server."""
    env = {
        "KUBECONFIG": str(write_kubeconfig(api, tmp_path / "kubeconfig")),
        "SCHEDLENS_CLUSTER_SOURCE": "kubernetes",
        "SCHEDLENS_CLUSTER_FILE": "",
        "SCHEDLENS_BIND_MODE": "kubernetes",
        "SCHEDLENS_CONFIG": "",
        "SCHEDLENS_INGEST_IN_PROCESS": "false",
        "SCHEDLENS_SPOOL_DIR": str(tmp_path / "spool"),
    }
    server = LiveServer(env, workers=1)
    yield server
    server.stop()


def test_readiness_waits_for_the_node_cache_and_then_reports_it(in_cluster: LiveServer, api: FakeKubeAPI) -> None:
    import urllib.request

    with urllib.request.urlopen(f"{in_cluster.url}/readyz", timeout=5) as response:  # LiveServer waited for 200
        ready = json.loads(response.read())

    assert ready["cluster"]["synced"] is True
    assert ready["cluster"]["nodes"]["count"] == 3
    assert api.list_requests("nodes"), "the node list came from the API server"


def test_a_slow_binding_does_not_delay_a_concurrent_filter(in_cluster: LiveServer, api: FakeKubeAPI) -> None:
    arrived, release = threading.Event(), threading.Event()

    def slow_binding(server: FakeKubeAPI, request: RecordedRequest, match: re.Match[str]) -> Response:
        arrived.set()
        release.wait(20)  # held until the test has seen the filter answered
        return create_binding(server, request, match)

    api.add_route("POST", r"/api/v1/namespaces/(?P<namespace>[^/]+)/pods/(?P<name>[^/]+)/binding", slow_binding)
    bind_answer: list[tuple[int, bytes]] = []
    binding = b'{"PodName":"web-1","PodNamespace":"shop","PodUID":"uid-1","Node":"node-2"}'
    bind = threading.Thread(target=lambda: bind_answer.append(post(in_cluster, "bind", binding)))
    bind.start()
    try:
        assert arrived.wait(20), "the bind verb reached the API server"

        status, body = post(in_cluster, "filter", filter_args(["node-1", "ghost", "node-2"]))

        assert status == 200
        answer = json.loads(body)
        assert answer["NodeNames"] == ["node-1", "node-2"]
        assert answer["FailedNodes"] == {"ghost": UNKNOWN_NODE}
        assert bind.is_alive(), "the filter was answered while the binding was still waiting on the API server"
        assert not bind_answer
    finally:
        release.set()
        bind.join(20)
    assert bind_answer == [(200, b'{"Error":""}')]
    assert api.pod("web-1", "shop")["spec"]["nodeName"] == "node-2"


# ----------------------------------------------------------------------------
# TLS with client certificates (kube-scheduler's tlsConfig certFile/keyFile/caFile)
# ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mtls_server(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    env = {
        "SCHEDLENS_TLS_CERT": str(pki.server_cert),
        "SCHEDLENS_TLS_KEY": str(pki.server_key),
        "SCHEDLENS_TLS_CLIENT_CA": str(pki.ca),
        "SCHEDLENS_CLUSTER_SOURCE": "none",
        "SCHEDLENS_BIND_MODE": "simulated",
        "SCHEDLENS_CONFIG": "",
        "SCHEDLENS_INGEST_IN_PROCESS": "false",
        "SCHEDLENS_SPOOL_DIR": str(tmp_path_factory.mktemp("spool")),
    }
    server = LiveServer(env, ssl_context=client_context(pki, cert=pki.client_cert, key=pki.client_key))
    yield server
    server.stop()


def test_a_scheduler_presenting_its_client_certificate_is_answered_over_tls(mtls_server: LiveServer, pki: Pki) -> None:
    context = client_context(pki, cert=pki.client_cert, key=pki.client_key)

    status, body = post(mtls_server, "filter", filter_args(["node-1", "node-2"]), context=context)

    assert status == 200
    assert json.loads(body)["NodeNames"] == ["node-1", "node-2"]


@pytest.mark.parametrize("who", ["no certificate", "a certificate from another CA"])
def test_a_client_without_an_accepted_certificate_fails_the_handshake(
    mtls_server: LiveServer, pki: Pki, who: str
) -> None:
    cert, key = (None, None) if who == "no certificate" else (pki.stranger_cert, pki.stranger_key)
    context = client_context(pki, cert=cert, key=key)

    # TLS 1.3 finishes the client's side of the handshake before the server judges the certificate, so the
    # refusal (an alert) may surface on the first read instead of in connect(); either way no answer comes.
    with pytest.raises((ssl.SSLError, ConnectionError)):
        post(mtls_server, "filter", filter_args(["node-1"]), context=context)


def test_plain_http_to_the_tls_port_gets_no_answer(mtls_server: LiveServer) -> None:
    with pytest.raises((http.client.HTTPException, ConnectionError)):
        post(mtls_server, "filter", filter_args(["node-1"]))
