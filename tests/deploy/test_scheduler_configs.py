"""Every kube-scheduler configuration we hand an operator sends every pod of ``schedlens-scheduler`` to schedlens
(no ``managedResources`` unless asked for), and elects its leader where the lease can exist, field by field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler_core.kube.scheduler_config import kubeconfig_path, render, write
from tests.support.paths import REPO
from tests.support.scheduler_standin import interested

SHIPPED = sorted((REPO / "deploy").glob("scheduler-config-*.yaml"))
PLAIN_POD = {"metadata": {"name": "web"}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def kustomize_scheduler_config() -> dict[str, Any]:
    (configmap,) = [
        d
        for d in documents(REPO / "deploy" / "kubernetes" / "configmaps.yaml")
        if d["metadata"]["name"] == "schedlens-scheduler-config"
    ]
    return yaml.safe_load(configmap["data"]["scheduler-config.yaml"])  # type: ignore[no-any-return]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_the_shipped_configurations_send_every_pod_of_the_scheduler(path: Path) -> None:
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    for extender in config["extenders"]:
        assert "managedResources" not in extender
        assert interested(extender, PLAIN_POD)


def test_kustomize_and_helm_send_every_pod_and_elect_in_the_namespace_they_create() -> None:
    config = kustomize_scheduler_config()
    assert all("managedResources" not in e for e in config["extenders"])
    namespace = documents(REPO / "deploy" / "kubernetes" / "namespace.yaml")[0]["metadata"]["name"]
    election = config["leaderElection"]
    assert (election["leaderElect"], election["resourceNamespace"]) == (True, namespace)
    roles = [d for d in documents(REPO / "deploy" / "kubernetes" / "rbac-kube-scheduler.yaml") if d["kind"] == "Role"]
    lease_rules = [
        rule
        for role in roles
        if role["metadata"]["namespace"] == namespace
        for rule in role["rules"]
        if rule["resources"] == ["leases"] and "update" in rule["verbs"]
    ]
    assert lease_rules[0]["resourceNames"] == [election["resourceName"]]
    values = yaml.safe_load((REPO / "deploy" / "helm" / "schedlens" / "values.yaml").read_text(encoding="utf-8"))
    assert values["extender"]["managedResources"] == []


def test_make_serve_writes_one_configuration_for_beside_it_and_one_for_inside_the_cluster(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "admin.kubeconfig"
    kubeconfig.write_text("{}")
    written = write(tmp_path / "out", url="http://10.1.2.3:8000/", kubeconfig=str(kubeconfig))
    beside = yaml.safe_load(written["nodecache"].read_text(encoding="utf-8"))
    assert beside["extenders"][0]["urlPrefix"] == "http://10.1.2.3:8000/extender/default"
    assert beside["clientConnection"] == {"kubeconfig": str(kubeconfig)}
    assert beside["leaderElection"] == {"leaderElect": False}
    assert beside["extenders"][0]["nodeCacheCapable"] is True
    fullnodes = yaml.safe_load(written["fullnodes"].read_text(encoding="utf-8"))
    assert fullnodes["extenders"][0]["nodeCacheCapable"] is False
    inside = yaml.safe_load(written["in-cluster"].read_text(encoding="utf-8"))
    assert "clientConnection" not in inside, "inside the cluster its service account is its identity"
    assert inside["leaderElection"] == kustomize_scheduler_config()["leaderElection"]
    assert inside["extenders"][0]["urlPrefix"] == "http://10.1.2.3:8000/extender/default"


def test_the_kubeconfig_is_the_first_file_of_kubeconfig_that_exists(tmp_path: Path) -> None:
    second = tmp_path / "second"
    second.write_text("{}")
    listed = f"{tmp_path / 'absent'}:{second}:{tmp_path / 'third'}"
    assert kubeconfig_path({"KUBECONFIG": listed, "HOME": str(tmp_path)}) == str(second)
    assert kubeconfig_path({"HOME": str(tmp_path)}) == "", "nothing found: in a cluster, its service account"
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text("{}")
    assert kubeconfig_path({"HOME": str(tmp_path)}) == str(tmp_path / ".kube" / "config")


def test_an_opt_in_list_narrows_what_reaches_schedlens() -> None:
    config = render(SHIPPED[0].read_text(encoding="utf-8"), url="http://x:8000", kubeconfig="")
    extender = {**config["extenders"][0], "managedResources": [{"name": "example.com/nic-bandwidth"}]}
    assert not interested(extender, PLAIN_POD)
    asking = {"spec": {"initContainers": [{"resources": {"limits": {"example.com/nic-bandwidth": "0"}}}]}}
    assert interested(extender, asking), "a limit in an init container counts, whatever its value"
