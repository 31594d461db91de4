"""Every kube-scheduler configuration we hand an operator sends every pod of ``schedlens-scheduler`` to schedlens
(no ``managedResources`` unless asked for), and elects its leader where the lease can exist and the scheduler may
hold it: the shipped files, the kustomize manifests, the Helm chart with its default values, and what ``make serve``
writes, each read by the kube-scheduler stand-in as kube-scheduler v1.28 reads it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler_core.scheduler_config import kubeconfig_for_scheduler, render, write
from tests.deploy.manifests import CHART, DEPLOY, KUBERNETES, expand_rules, kubernetes_documents, load_documents, named
from tests.kube.scheduler_standin import FRESH_CLUSTER_NAMESPACES, KubeSchedulerStandIn, WouldNotSchedule, interested

SHIPPED = sorted(DEPLOY.glob("scheduler-config-*.yaml"))
PLAIN_POD = {"metadata": {"name": "web"}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}
IN_CLUSTER_API = "https://10.96.0.1:443"
LEASES = ("coordination.k8s.io", "leases")
HELM_NAMESPACE = "team-scheduling"  # helm install --namespace: any namespace, which exists once installed into


# ----- the objects a deployment creates, with the default values -----


def kustomize_documents() -> list[dict[str, Any]]:
    return kubernetes_documents()


def helm_documents(namespace: str = HELM_NAMESPACE) -> list[dict[str, Any]]:
    """The chart's templates rendered with values.yaml as far as the lease, RBAC and the scheduler's configuration
    need: plain ``.Values`` references and ``if``/``with`` on them, ``.Release.Namespace``; any other action is left
    as a placeholder (``helm template`` itself is not installable here, test_helm_chart.py)."""
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))

    def value(path: str) -> Any:
        node = values
        for key in path.strip(".").split(".")[1:]:
            node = node[key]
        return node

    docs: list[dict[str, Any]] = []
    for template in sorted((CHART / "templates").glob("*.yaml")):
        lines: list[str] = []
        shown, opened = [True], [""]
        for line in template.read_text(encoding="utf-8").splitlines():
            action = re.fullmatch(r"\s*\{\{-?\s*(if|with|range|else|end)\b\s*(.*?)\s*-?\}\}\s*", line)
            if action and action[1] == "end":
                shown.pop()
                opened.pop()
            elif action and action[1] == "else":
                shown[-1] = not shown[-1] if re.fullmatch(r"\.Values[.\w]+", opened[-1]) else True
            elif action:
                # A condition other than a plain value keeps both branches: a superset of any rendering.
                simple = re.fullmatch(r"\.Values[.\w]+", action[2])
                shown.append(bool(value(action[2])) if simple else True)
                opened.append(action[2])
            elif all(shown) and not re.fullmatch(r"\s*\{\{.*\}\}\s*", line):
                line = line.replace("{{ .Release.Namespace }}", namespace)
                line = re.sub(r"\{\{ (\.Values[.\w]+) \}\}", lambda m: str(value(m[1])), line)
                lines.append(re.sub(r"\{\{-?.*?-?\}\}", "X", line))
        docs += [d for d in yaml.safe_load_all("\n".join(lines)) if d]
    return docs


def scheduler_setup(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the scheduler Deployment, the configuration its ConfigMap holds)."""
    [deployment] = [d for d in docs if d["kind"] == "Deployment" and "kube-scheduler" in str(d["spec"]["template"])]
    pod = deployment["spec"]["template"]["spec"]
    [volume] = [v for v in pod["volumes"] if v["name"] == "config"]
    config_map = named(docs, "ConfigMap", volume["configMap"]["name"])
    return deployment, yaml.safe_load(config_map["data"]["scheduler-config.yaml"])


def may_hold_lease(docs: list[dict[str, Any]], account: tuple[str, str], lease: tuple[str, str]) -> set[str]:
    """The verbs ``account`` (namespace, name) is granted on lease ``lease`` (namespace, name) by a Role there."""
    verbs: set[str] = set()
    for binding in (d for d in docs if d["kind"] == "RoleBinding" and d["metadata"]["namespace"] == lease[0]):
        subjects = {(s.get("namespace"), s["name"]) for s in binding["subjects"] if s["kind"] == "ServiceAccount"}
        if account not in subjects or binding["roleRef"]["kind"] != "Role":
            continue
        # A Role the cluster ships (kube-system's extension-apiserver-authentication-reader) grants no lease.
        roles = [
            d
            for d in docs
            if d["kind"] == "Role"
            and d["metadata"]["name"] == binding["roleRef"]["name"]
            and d["metadata"]["namespace"] == lease[0]
        ]
        for rule in (rule for role in roles for rule in role["rules"]):
            if "resourceNames" in rule and lease[1] not in rule["resourceNames"]:
                continue
            granted = expand_rules([rule])
            verbs |= {verb for group, resource, verb in granted if (group, resource) == LEASES}
    return verbs


# ----- the shipped configurations -----


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_the_shipped_configurations_send_every_pod_of_the_scheduler(path: Path) -> None:
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert [p["schedulerName"] for p in config["profiles"]] == ["schedlens-scheduler"]
    for extender in config["extenders"]:
        assert "managedResources" not in extender
        assert interested(extender, PLAIN_POD)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_the_shipped_configurations_lead_in_the_namespace_the_manifests_create(path: Path) -> None:
    namespace = load_documents(KUBERNETES / "namespace.yaml")[0]["metadata"]["name"]

    KubeSchedulerStandIn.start(
        path, in_cluster=IN_CLUSTER_API, namespaces={*FRESH_CLUSTER_NAMESPACES, namespace}
    )  # raises WouldNotSchedule otherwise
    with pytest.raises(WouldNotSchedule, match=f"namespace {namespace} does not exist"):
        KubeSchedulerStandIn.start(path, in_cluster=IN_CLUSTER_API)  # a fresh cluster: what make serve rewrites


@pytest.mark.parametrize("deployment", ["kustomize", "helm"])
def test_kustomize_and_helm_send_every_pod_and_may_renew_their_lease_where_they_create_it(
    deployment: str, tmp_path: Path
) -> None:
    docs = kustomize_documents() if deployment == "kustomize" else helm_documents()
    scheduler, config = scheduler_setup(docs)
    namespace = scheduler["metadata"]["namespace"]
    assert all("managedResources" not in extender for extender in config["extenders"])
    assert all(interested(extender, PLAIN_POD) for extender in config["extenders"])

    # The lease is in the scheduler's own namespace (kustomize creates it; helm installs into it), under the name
    # its Role lets its service account renew; the stock system:kube-scheduler role covers kube-scheduler only.
    election = config["leaderElection"]
    lease = (election["resourceNamespace"], election["resourceName"])
    assert (election["leaderElect"], lease[0]) == (True, namespace)
    if deployment == "kustomize":
        assert named(docs, "Namespace", namespace)
    account = (namespace, scheduler["spec"]["template"]["spec"]["serviceAccountName"])
    assert {"get", "update", "create"} <= may_hold_lease(docs, account, lease)
    assert may_hold_lease(docs, account, ("kube-system", "kube-scheduler")) == set(), "never the cluster's lease"
    path = tmp_path / "scheduler-config.yaml"
    path.write_text(yaml.safe_dump(config))
    KubeSchedulerStandIn.start(path, in_cluster=IN_CLUSTER_API, namespaces={*FRESH_CLUSTER_NAMESPACES, namespace})


def test_helm_writes_managed_resources_only_when_the_values_list_some() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    template = (CHART / "templates" / "configmaps.yaml").read_text(encoding="utf-8").splitlines()
    [line] = [i for i, text in enumerate(template) if text.strip() == "managedResources:"]

    assert values["extender"]["managedResources"] == []
    assert template[line - 1].strip() == "{{- with .Values.extender.managedResources }}"


# ----- what make serve writes -----


def test_make_serve_writes_one_configuration_for_beside_it_and_one_for_inside_the_cluster(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "admin.kubeconfig"
    kubeconfig.write_text("{}")
    written = write(tmp_path / "out", url="http://10.1.2.3:8000/", kubeconfig=str(kubeconfig))

    beside = yaml.safe_load(written["nodecache"].read_text(encoding="utf-8"))
    assert list(beside)[:3] == ["apiVersion", "kind", "clientConnection"]
    assert beside["clientConnection"] == {"kubeconfig": str(kubeconfig)}
    assert beside["leaderElection"] == {"leaderElect": False}, "one scheduler started by hand: no lease to hold"
    [extender] = beside["extenders"]
    assert "managedResources" not in extender
    assert (extender["urlPrefix"], extender["nodeCacheCapable"]) == ("http://10.1.2.3:8000/extender/default", True)
    fullnodes = yaml.safe_load(written["fullnodes"].read_text(encoding="utf-8"))
    assert fullnodes["extenders"][0]["nodeCacheCapable"] is False
    assert {k: v for k, v in fullnodes.items() if k != "extenders"} == {
        k: v for k, v in beside.items() if k != "extenders"
    }

    inside = yaml.safe_load(written["in-cluster"].read_text(encoding="utf-8"))
    assert "clientConnection" not in inside, "inside the cluster its service account is its identity"
    _, deployed = scheduler_setup(kustomize_documents())
    assert inside["leaderElection"] == deployed["leaderElection"]
    assert inside["extenders"][0]["urlPrefix"] == "http://10.1.2.3:8000/extender/default"


def test_make_serve_prints_the_command_and_writes_to_the_var_dir(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({"current-context": "a", "contexts": [{"name": "a", "context": {}}]}))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": str(kubeconfig)}
    env["SCHEDLENS_VAR_DIR"] = str(tmp_path / "var dir" / "cluster")
    done = subprocess.run(
        [sys.executable, "-m", "scheduler_core.scheduler_config", "--url", "http://10.0.0.5:8000"],
        cwd=DEPLOY.parent,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )

    written = tmp_path / "var dir" / "cluster" / "scheduler-config-nodecache.yaml"
    assert done.stdout == f"kube-scheduler --config '{written}'\n", "one command, to paste as printed"
    assert yaml.safe_load(written.read_text())["clientConnection"]["kubeconfig"] == str(kubeconfig)
    assert {p.name for p in written.parent.iterdir()} == {
        "scheduler-config-nodecache.yaml",
        "scheduler-config-fullnodes.yaml",
        "scheduler-config-in-cluster.yaml",
    }


# ----- which kubeconfig file -----


def kubeconfig_file(path: Path, *, current: str = "", contexts: tuple[str, ...] = (), users: bool = True) -> str:
    config: dict[str, Any] = {
        "contexts": [{"name": c, "context": {"cluster": c, "user": c}} for c in contexts],
        "clusters": [{"name": c, "cluster": {"server": f"https://{c}:6443"}} for c in contexts],
        "users": [{"name": c, "user": {"token": c}} for c in contexts] if users else [],
    }
    if current:
        config["current-context"] = current
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_the_kubeconfig_is_the_one_file_of_kubeconfig_that_holds_its_current_context(tmp_path: Path) -> None:
    home = {"HOME": str(tmp_path)}
    kind = kubeconfig_file(tmp_path / "kind", current="kind", contexts=("kind",))
    other = kubeconfig_file(tmp_path / "other", current="prod", contexts=("prod",))
    absent = str(tmp_path / "absent")

    assert kubeconfig_for_scheduler({**home, "KUBECONFIG": f"{absent}:{kind}"}) == (kind, ""), "missing: ignored"
    assert kubeconfig_for_scheduler({**home, "KUBECONFIG": f"{kind}:{other}"}) == (kind, ""), "the first current wins"
    assert kubeconfig_for_scheduler({**home, "KUBECONFIG": f"{other}:{kind}"}) == (other, "")
    # kubectl use-context writes current-context into the first file; the context is defined in the second.
    pointer = kubeconfig_file(tmp_path / "config", current="kind")
    assert kubeconfig_for_scheduler({**home, "KUBECONFIG": f"{pointer}:{kind}"}) == (kind, "")
    # Defined across two files, current in neither alone: no single file goes to the same place.
    split = kubeconfig_file(tmp_path / "split", current="split", contexts=("split",), users=False)
    users = tmp_path / "users"
    users.write_text(yaml.safe_dump({"users": [{"name": "split", "user": {"token": "t"}}]}))
    path, problem = kubeconfig_for_scheduler({**home, "KUBECONFIG": f"{split}:{users}"})
    assert path == ""
    assert "kubectl config view --minify --flatten" in problem


def test_without_kubeconfig_it_is_the_home_config_and_in_a_cluster_none(tmp_path: Path) -> None:
    assert kubeconfig_for_scheduler({"HOME": str(tmp_path)}) == ("", ""), "nothing found"
    (tmp_path / ".kube").mkdir()
    home_config = kubeconfig_file(tmp_path / ".kube" / "config", current="a", contexts=("a",))
    assert kubeconfig_for_scheduler({"HOME": str(tmp_path)}) == (home_config, "")
    accounts = tmp_path / "serviceaccount"
    accounts.mkdir()
    (accounts / "token").write_text("t")
    (accounts / "ca.crt").write_text("c")
    in_cluster = {"HOME": str(tmp_path), "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert kubeconfig_for_scheduler(in_cluster, service_account_dir=accounts) == ("", ""), "its service account"


# ----- the opt-in variant -----


def test_an_opt_in_list_narrows_what_reaches_schedlens() -> None:
    config = render(SHIPPED[0].read_text(encoding="utf-8"), url="http://x:8000", kubeconfig="")
    extender = {**config["extenders"][0], "managedResources": [{"name": "example.com/nic-bandwidth"}]}
    assert not interested(extender, PLAIN_POD)
    asking = {"spec": {"initContainers": [{"resources": {"limits": {"example.com/nic-bandwidth": "0"}}}]}}
    assert interested(extender, asking), "a limit in an init container counts, whatever its value"
