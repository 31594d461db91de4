"""KubernetesBinder against a real HTTP server speaking Kubernetes JSON, through the real client."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler_core.extender.protocol.binding import BindOutcome
from scheduler_core.kube.api import KubeConfigError, KubernetesBinder, load_api_client
from tests.support.fake_kube_api import DROP, FakeKubeAPI, api_client_for, status_body, write_kubeconfig

BINDING = "/api/v1/namespaces/default/pods/web-1/binding"
POD = "/api/v1/namespaces/default/pods/web-1"
UID = "0b6c1f4e-5a4d-4c57-9d55-6d8f8e0a1c01"


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        yield server


@pytest.fixture
def binder(api: FakeKubeAPI) -> Iterator[KubernetesBinder]:
    b = KubernetesBinder(api_client_for(api), timeout_seconds=2.0)
    yield b
    b.close()


def bind_web_1(binder: KubernetesBinder, node: str = "node-a", uid: str = UID) -> BindOutcome:
    return binder.bind(namespace="default", name="web-1", uid=uid, node=node)


def node_of_web_1(api: FakeKubeAPI) -> str | None:
    pod = api.pod("web-1")
    assert pod is not None
    node: str | None = pod["spec"].get("nodeName")
    return node


def test_binding_creates_a_v1_binding_to_the_node_with_the_pod_uid_as_precondition(
    api: FakeKubeAPI, binder: KubernetesBinder
) -> None:
    api.add_pod("web-1", uid=UID)

    outcome = bind_web_1(binder)

    assert outcome.ok
    assert outcome.detail == "bound"
    assert outcome.status == 201
    [sent] = api.requests_to("POST", BINDING)
    assert sent.body["kind"] == "Binding"
    assert sent.body["apiVersion"] == "v1"
    assert sent.body["metadata"]["name"] == "web-1"
    assert sent.body["metadata"]["namespace"] == "default"
    assert sent.body["metadata"]["uid"] == UID
    assert sent.body["target"] == {"kind": "Node", "apiVersion": "v1", "name": "node-a"}
    assert node_of_web_1(api) == "node-a"


def test_a_conflict_because_the_pod_is_already_on_the_same_node_counts_as_success(
    api: FakeKubeAPI, binder: KubernetesBinder
) -> None:
    api.add_pod("web-1", uid=UID, node_name="node-a")

    outcome = bind_web_1(binder)

    assert outcome.ok
    assert outcome.detail == "409: already bound to the same node"
    assert outcome.status == 409
    assert len(api.requests_to("GET", POD)) == 1  # the pod was read back to check


def test_binding_twice_to_the_same_node_succeeds_both_times(api: FakeKubeAPI, binder: KubernetesBinder) -> None:
    api.add_pod("web-1", uid=UID)

    assert bind_web_1(binder).detail == "bound"
    assert bind_web_1(binder).detail == "409: already bound to the same node"


def test_a_conflict_because_the_pod_is_on_another_node_is_an_error_naming_that_node(
    api: FakeKubeAPI, binder: KubernetesBinder
) -> None:
    api.add_pod("web-1", uid=UID, node_name="node-b")

    outcome = bind_web_1(binder)

    assert not outcome.ok
    assert "pod is already bound to another node" in outcome.error
    assert "node-b" in outcome.error
    assert "node-b" in outcome.detail
    assert node_of_web_1(api) == "node-b"


def test_a_pod_recreated_under_the_same_name_fails_the_uid_precondition(
    api: FakeKubeAPI, binder: KubernetesBinder
) -> None:
    api.add_pod("web-1", uid="a-newer-uid")

    outcome = bind_web_1(binder)

    assert outcome.error == "pod UID does not match (the pod was recreated)"
    assert outcome.status == 409
    assert "UID in precondition" in outcome.detail
    assert node_of_web_1(api) is None


def test_a_pod_deleted_before_binding_is_reported_as_not_found(api: FakeKubeAPI, binder: KubernetesBinder) -> None:
    outcome = bind_web_1(binder)

    assert outcome.error == "pod not found (deleted before binding)"
    assert outcome.status == 404
    assert 'pods "web-1" not found' in outcome.detail


def test_throttling_is_retried_after_retry_after_and_then_binds(api: FakeKubeAPI, binder: KubernetesBinder) -> None:
    api.add_pod("web-1", uid=UID)
    api.inject("POST", BINDING, 429, headers={"Retry-After": "0"})

    outcome = bind_web_1(binder)

    assert outcome.ok
    assert outcome.detail == "bound"
    assert len(api.requests_to("POST", BINDING)) == 2


def test_throttling_that_does_not_stop_ends_in_an_error_after_bounded_attempts(
    api: FakeKubeAPI, binder: KubernetesBinder
) -> None:
    api.add_pod("web-1", uid=UID)
    api.inject("POST", BINDING, 429, headers={"Retry-After": "0"}, times=10)

    outcome = bind_web_1(binder)

    assert not outcome.ok
    assert "throttling" in outcome.error
    assert outcome.status == 429
    assert len(api.requests_to("POST", BINDING)) == 3


def test_a_long_retry_after_is_capped_so_the_bind_stays_inside_its_budget(
    api: FakeKubeAPI, binder: KubernetesBinder
) -> None:
    api.add_pod("web-1", uid=UID)
    api.inject("POST", BINDING, 429, headers={"Retry-After": "30"}, times=10)

    started = time.monotonic()
    outcome = bind_web_1(binder)

    assert "throttling" in outcome.error
    assert time.monotonic() - started < 1.8  # at most ~1 s of waiting in total, never 30 s


def test_a_server_error_is_an_error_naming_the_status(api: FakeKubeAPI, binder: KubernetesBinder) -> None:
    api.add_pod("web-1", uid=UID)
    api.inject("POST", BINDING, 500, status_body(500, "InternalError", "etcdserver: request timed out"))

    outcome = bind_web_1(binder)

    assert not outcome.ok
    assert "500" in outcome.error
    assert "etcdserver: request timed out" in outcome.error
    assert outcome.status == 500
    assert len(api.requests_to("POST", BINDING)) == 1


def test_error_text_never_contains_a_percent_sign(api: FakeKubeAPI, binder: KubernetesBinder) -> None:
    api.add_pod("web-1", uid=UID)
    api.inject("POST", BINDING, 503, status_body(503, "ServiceUnavailable", "100% busy, try %s later"))

    outcome = bind_web_1(binder)

    assert "503" in outcome.error
    assert "%" not in outcome.error


def test_a_server_slower_than_the_timeout_gives_an_error_within_bounded_time(api: FakeKubeAPI) -> None:
    api.add_pod("web-1", uid=UID)
    api.inject("POST", BINDING, None, delay=5.0)  # answers normally, but only after 5 s
    binder = KubernetesBinder(api_client_for(api), timeout_seconds=0.5)

    started = time.monotonic()
    outcome = bind_web_1(binder)
    elapsed = time.monotonic() - started

    assert "timed out" in outcome.error
    assert outcome.status is None
    assert elapsed < 1.5
    binder.close()


def test_a_slow_read_back_after_a_conflict_stays_inside_the_budget_and_trusts_the_conflict_message(
    api: FakeKubeAPI,
) -> None:
    api.add_pod("web-1", uid=UID, node_name="node-a")
    api.inject("GET", POD, None, delay=5.0)
    binder = KubernetesBinder(api_client_for(api), timeout_seconds=0.5)

    started = time.monotonic()
    outcome = bind_web_1(binder)

    assert time.monotonic() - started < 1.5
    assert len(api.requests_to("GET", POD)) == 1  # no hidden urllib3 retries of the read
    # The API server says "already assigned" only after the UID precondition passed: same node, success.
    assert outcome.ok
    assert outcome.detail.startswith("409: already bound to the same node")
    binder.close()


def test_a_connection_dropped_before_the_answer_is_retried_once(api: FakeKubeAPI, binder: KubernetesBinder) -> None:
    api.add_pod("web-1", uid=UID)
    api.inject("POST", BINDING, DROP)

    outcome = bind_web_1(binder)

    assert outcome.detail == "bound"
    assert len(api.requests_to("POST", BINDING)) == 2


def test_a_connection_that_keeps_dropping_is_an_error(api: FakeKubeAPI, binder: KubernetesBinder) -> None:
    api.add_pod("web-1", uid=UID)
    api.inject("POST", BINDING, DROP, times=5)

    outcome = bind_web_1(binder)

    assert "could not reach the API server" in outcome.error
    assert outcome.status is None
    assert len(api.requests_to("POST", BINDING)) == 2


def test_an_unreachable_api_server_is_an_error_without_status() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    binder = KubernetesBinder(api_client_for(f"http://127.0.0.1:{port}"), timeout_seconds=1.0)
    outcome = bind_web_1(binder)

    assert "could not reach the API server" in outcome.error
    assert "%" not in outcome.error
    assert outcome.status is None


def test_load_api_client_returns_none_without_any_configuration(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))

    assert load_api_client() is None


def test_load_api_client_ignores_kubeconfig_entries_that_do_not_exist(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing.yaml"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))

    assert load_api_client() is None


def test_load_api_client_uses_kubeconfig_from_the_environment(
    api: FakeKubeAPI, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(api, tmp_path / "config")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    api.add_pod("web-1", uid=UID)

    api_client = load_api_client()

    assert api_client is not None
    assert bind_web_1(KubernetesBinder(api_client)).detail == "bound"


def test_load_api_client_rejects_an_explicit_kubeconfig_that_does_not_exist(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError):
        load_api_client(kubeconfig=str(tmp_path / "nope.yaml"))


def test_load_api_client_rejects_a_kubeconfig_without_a_usable_context(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    broken = tmp_path / "config"
    broken.write_text(json.dumps({"apiVersion": "v1", "kind": "Config", "clusters": []}))
    monkeypatch.setenv("KUBECONFIG", str(broken))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)

    with pytest.raises(KubeConfigError):
        load_api_client()


def test_load_api_client_prefers_the_in_cluster_service_account(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text("t0ken")
    (sa / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "unused"))

    api_client = load_api_client(service_account_dir=Path(sa))

    assert api_client is not None
    assert api_client.configuration.host == "https://10.96.0.1:443"
    assert api_client.configuration.api_key["BearerToken"] == "bearer t0ken"
