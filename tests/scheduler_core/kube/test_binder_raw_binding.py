"""The Binding as the binder posts it: JSON bytes through the client's own pool, with what the generated client sent.

``KubernetesBinder`` no longer goes through ``create_namespaced_pod_binding`` (its model objects and
validation cost a fifth of the bind verb). What the generated method did for the request is done here instead, and
checked against the Kubernetes-shaped server: the authorization (asked for on every request, so a refreshed token is
used), the client's default headers, the body, and errors read from the answer as before. The outcomes of every
answer the API server gives are ``test_binder.py``'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from scheduler_core.kube.api import KubernetesBinder
from tests.support.fake_kube_api import FakeKubeAPI, api_client_for, status_body

BINDING = "/api/v1/namespaces/shop/pods/web-1/binding"


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        server.add_pod("web-1", namespace="shop", uid="uid-1")
        yield server


def headers_of(api: FakeKubeAPI) -> dict[str, str]:
    (sent,) = api.requests_to("POST", BINDING)
    return {k.lower(): v for k, v in sent.headers.items()}


def test_the_token_is_sent_and_asked_for_again_on_every_bind(api: FakeKubeAPI) -> None:
    api_client = api_client_for(api)
    tokens = iter(["first", "second"])

    def refresh(configuration: Any) -> None:  # what the kubeconfig loader installs for expiring credentials
        configuration.api_key["BearerToken"] = next(tokens)

    api_client.configuration.api_key["BearerToken"] = "expired"
    api_client.configuration.api_key_prefix["BearerToken"] = "Bearer"
    api_client.configuration.refresh_api_key_hook = refresh
    binder = KubernetesBinder(api_client)
    api.add_pod("web-2", namespace="shop", uid="uid-2")

    assert binder.bind(namespace="shop", name="web-1", uid="uid-1", node="node-a").ok
    assert binder.bind(namespace="shop", name="web-2", uid="uid-2", node="node-a").ok

    sent = [r.headers.get("authorization") for r in api.requests if r.method == "POST"]
    assert sent == ["Bearer first", "Bearer second"]
    binder.close()


def test_the_request_carries_the_clients_headers_and_the_v1_binding(api: FakeKubeAPI) -> None:
    api_client = api_client_for(api)
    api_client.user_agent = "schedlens-test/1"
    binder = KubernetesBinder(api_client)

    assert binder.bind(namespace="shop", name="web-1", uid="", node="node-a").detail == "bound"

    headers = headers_of(api)
    assert headers["user-agent"] == "schedlens-test/1"
    assert headers["accept"] == "application/json"
    assert headers["content-type"] == "application/json"
    assert "authorization" not in headers  # no credentials configured: none invented
    (sent,) = api.requests_to("POST", BINDING)
    assert sent.body == {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "web-1", "namespace": "shop"},  # no UID given: no precondition, as before
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"},
    }
    binder.close()


def test_an_unauthorized_answer_is_read_from_its_status(api: FakeKubeAPI) -> None:
    api.inject("POST", BINDING, 401, status_body(401, "Unauthorized", "Unauthorized"))
    binder = KubernetesBinder(api_client_for(api))

    outcome = binder.bind(namespace="shop", name="web-1", uid="uid-1", node="node-a")

    assert outcome.error == "API server refused the binding (401 Unauthorized): Unauthorized"
    assert outcome.status == 401
    binder.close()


def test_an_error_answer_that_is_not_json_is_reported_by_its_first_line(api: FakeKubeAPI) -> None:
    api.inject("POST", BINDING, 502, b"<html>Bad Gateway</html>\nfrom a proxy", headers={"Content-Type": "text/html"})
    binder = KubernetesBinder(api_client_for(api))

    outcome = binder.bind(namespace="shop", name="web-1", uid="uid-1", node="node-a")

    assert outcome.status == 502
    assert "502" in outcome.error
    assert "<html>Bad Gateway</html>" in outcome.error
    assert "from a proxy" not in outcome.error
    binder.close()


def test_the_pool_keeps_its_connection_between_binds(api: FakeKubeAPI) -> None:
    binder = KubernetesBinder(api_client_for(api))
    for number in range(2, 6):
        api.add_pod(f"web-{number}", namespace="shop", uid=f"uid-{number}")

    for number in range(1, 6):
        assert binder.bind(namespace="shop", name=f"web-{number}", uid=f"uid-{number}", node="node-a").ok

    peers = {request.peer for request in api.requests if request.path.endswith("/binding")}
    assert len(peers) == 1, "every bind after the first reused the kept-alive connection"
    binder.close()


def test_an_api_server_behind_a_path_prefix_gets_the_binding_under_it(api: FakeKubeAPI) -> None:
    """A kubeconfig's server may carry a path (a proxy in front of the API server): the Binding goes below it,
    through the pool of the server's origin, looked up once."""
    api_client = api_client_for(api)
    api_client.configuration.host = f"{api.url}/k8s/clusters/c-1"
    binder = KubernetesBinder(api_client)

    binder.bind(namespace="shop", name="web-1", uid="uid-1", node="node-a")  # the fake knows no such path: 404

    assert [r.path for r in api.requests if r.method == "POST"] == [f"/k8s/clusters/c-1{BINDING}"]
    binder.close()
