"""/readyz stays 503 while the Kubernetes node cache has not synced; the runtime picks its cluster view."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from dashboard import runtime as runtime_module
from scheduler_core.extender.protocol.cluster import FileCluster, StaticCluster
from scheduler_core.kube.node_cache import KubernetesCluster
from tests.support.fake_kube_api import FakeKubeAPI, api_client_for, write_kubeconfig


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        server.put_node("node-1")
        yield server


@pytest.fixture
def no_kube_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))


@pytest.fixture
def runtime(settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> runtime_module.Runtime:
    settings.SCHEDLENS_SPOOL_DIR = tmp_path / "spool"
    settings.SCHEDLENS_INGEST_IN_PROCESS = False
    settings.SCHEDLENS_BIND_MODE = "simulated"
    settings.SCHEDLENS_CONFIG = ""
    settings.SCHEDLENS_CLUSTER_SOURCE = "none"
    runtime = runtime_module.Runtime()
    monkeypatch.setattr(runtime_module, "_runtime", runtime)
    return runtime


def test_readyz_is_503_until_the_node_cache_has_listed_and_ready_after(client, runtime, api: FakeKubeAPI) -> None:
    cache = KubernetesCluster.from_api_client(api_client_for(api))
    runtime.cluster = runtime.extender.cluster = cache

    unready = client.get("/readyz")
    assert unready.status_code == 503
    assert json.loads(unready.content)["reason"] == "node cache not synced yet"

    cache.start()
    try:
        assert cache.wait_synced(10)
        ready = client.get("/readyz")
    finally:
        cache.stop()
    assert ready.status_code == 200
    assert json.loads(ready.content)["cluster"]["nodes"]["count"] == 1


def test_readyz_without_a_node_cache_does_not_mention_one(client, runtime) -> None:
    response = client.get("/readyz")

    assert response.status_code == 200
    assert "cluster" not in json.loads(response.content)


def test_the_cluster_file_wins_in_auto_mode(settings, tmp_path: Path) -> None:
    settings.SCHEDLENS_CLUSTER_SOURCE = "auto"
    settings.SCHEDLENS_CLUSTER_FILE = str(tmp_path / "cluster.json")

    assert isinstance(runtime_module.cluster_from_settings(), FileCluster)


def test_auto_mode_watches_the_cluster_a_kubeconfig_names(
    settings, api: FakeKubeAPI, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(api, tmp_path / "kubeconfig")))
    settings.SCHEDLENS_CLUSTER_SOURCE = "auto"
    settings.SCHEDLENS_CLUSTER_FILE = ""

    view = runtime_module.cluster_from_settings()
    try:
        assert isinstance(view, KubernetesCluster)
        assert view.wait_synced(10)
        assert view.node_names() == ["node-1"]
    finally:
        view.stop()  # type: ignore[union-attr]


def test_auto_mode_without_any_kubernetes_configuration_has_no_node_view(settings, no_kube_config) -> None:
    settings.SCHEDLENS_CLUSTER_SOURCE = "auto"
    settings.SCHEDLENS_CLUSTER_FILE = ""

    view = runtime_module.cluster_from_settings()

    assert isinstance(view, StaticCluster)
    assert view.node_names() == []


def test_kubernetes_mode_without_a_configuration_stops_the_process_with_a_message(settings, no_kube_config) -> None:
    settings.SCHEDLENS_CLUSTER_SOURCE = "kubernetes"
    settings.SCHEDLENS_CLUSTER_FILE = ""

    with pytest.raises(ImproperlyConfigured, match="no Kubernetes configuration"):
        runtime_module.cluster_from_settings()
