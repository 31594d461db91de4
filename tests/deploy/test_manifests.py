"""deploy/: every manifest parses, names things that exist, and grants schedlens nothing beyond its needs."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest
import yaml

from scheduler_core.extender.scoring.profiles import load_profiles
from tests.deploy.manifests import (
    CHART,
    DEPLOY,
    KUBERNETES,
    SCHEDLENS_RULES,
    command_problems,
    expand_rules,
    extender_problems,
    https_problems,
    known_environment_variables,
    kubernetes_documents,
    load_documents,
    named,
    of_kind,
    pod_specs,
)

DOCS = kubernetes_documents()
NAMESPACE = "schedlens-system"
SCHEDULER_CONFIGS = sorted(DEPLOY.glob("scheduler-config-*.yaml"))


def embedded_scheduler_config() -> dict[str, Any]:
    data = named(DOCS, "ConfigMap", "schedlens-scheduler-config")["data"]
    return yaml.safe_load(data["scheduler-config.yaml"])


# ----- every file -----


PLAIN_YAML = [
    p for p in sorted([*DEPLOY.rglob("*.yaml"), *DEPLOY.rglob("*.yml")]) if CHART / "templates" not in p.parents
]  # Helm templates are not YAML until rendered: test_helm_chart.py checks them.


@pytest.mark.parametrize("path", PLAIN_YAML, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_yaml_file_in_deploy_parses(path) -> None:
    assert load_documents(path), f"{path} is empty"


def test_every_object_has_api_version_kind_and_name_and_namespaced_ones_our_namespace() -> None:
    cluster_scoped = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}
    for doc in DOCS:
        assert {"apiVersion", "kind", "metadata"} <= set(doc), doc
        assert doc["metadata"]["name"]
        if doc["kind"] not in cluster_scoped:
            expected = (
                "kube-system"
                if doc["kind"] == "RoleBinding" and "authentication-reader" in doc["metadata"]["name"]
                else NAMESPACE
            )
            assert doc["metadata"]["namespace"] == expected, doc["metadata"]


def test_the_kustomization_lists_every_manifest_in_its_directory() -> None:
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])

    assert listed == {p.name for p in KUBERNETES.glob("*.yaml")} - {"kustomization.yaml"}


@pytest.mark.parametrize(
    "copy", [KUBERNETES / "crd-noderesources.yaml", CHART / "crds" / "crd-noderesources.yaml"], ids=str
)
def test_the_crd_copies_are_the_crd(copy) -> None:
    assert load_documents(copy) == load_documents(DEPLOY / "crd-noderesources.yaml")


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (with its built-in kustomize) is not installed")
def test_kustomize_renders_the_directory() -> None:
    rendered = subprocess.run(["kubectl", "kustomize", str(KUBERNETES)], capture_output=True, text=True, check=True)

    kinds = sorted(doc["kind"] for doc in yaml.safe_load_all(rendered.stdout) if doc)
    assert kinds == sorted(doc["kind"] for doc in DOCS)


# ----- the scheduler configuration -----


@pytest.mark.parametrize("path", SCHEDULER_CONFIGS, ids=lambda p: p.name)
def test_scheduler_configs_use_only_fields_of_the_v1_extender(path) -> None:
    [config] = load_documents(path)

    assert extender_problems(config) == []
    assert len(config["extenders"]) == 1


def test_the_extender_field_check_catches_a_field_v1_does_not_have() -> None:
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "extenders": [{"urlPrefix": "http://x", "enableHttps": True, "tlsConfig": {"verify": False}}],
    }

    assert extender_problems(config) == [
        "extenders[0].enableHttps is not an Extender field",
        "extenders[0].tlsConfig.verify",
    ]


def test_the_deployed_scheduler_config_calls_the_service_and_a_profile_that_exists() -> None:
    config = embedded_scheduler_config()
    [extender] = config["extenders"]
    service = named(DOCS, "Service", "schedlens")
    profiles = load_profiles(named(DOCS, "ConfigMap", "schedlens-profiles")["data"]["profiles.yaml"])

    assert extender_problems(config) == []
    assert (
        extender["urlPrefix"]
        == f"http://schedlens.{NAMESPACE}.svc:{service['spec']['ports'][0]['port']}/extender/default"
    )
    assert extender["urlPrefix"].rsplit("/", 1)[1] in profiles
    assert extender["nodeCacheCapable"] is True
    assert extender["filterVerb"] == "filter"
    assert extender["bindVerb"] == "bind"
    assert config["profiles"] == [{"schedulerName": "schedlens-scheduler"}]
    env = named(DOCS, "ConfigMap", "schedlens-env")["data"]
    assert env["SCHEDLENS_SCHEDULER_NAMES"] == "schedlens-scheduler", "the watcher follows the scheduler's pods"


def test_the_deployed_scheduler_config_matches_the_documented_nodecache_one_but_for_the_comments() -> None:
    [documented] = load_documents(DEPLOY / "scheduler-config-nodecache.yaml")
    deployed = embedded_scheduler_config()
    documented_extender = {k: v for k, v in documented["extenders"][0].items() if k != "managedResources"}

    assert deployed["extenders"][0] == documented_extender
    assert deployed["leaderElection"] == documented["leaderElection"]


def test_the_scheduler_runs_the_official_image_with_that_config_and_may_renew_its_own_lease() -> None:
    deployment = named(DOCS, "Deployment", "schedlens-scheduler")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    [config_arg] = [a for a in container["command"] if a.startswith("--config=")]
    [mount] = [m for m in container["volumeMounts"] if m["name"] == "config"]
    [volume] = [v for v in pod["volumes"] if v["name"] == "config"]
    lease = embedded_scheduler_config()["leaderElection"]
    role = named(DOCS, "Role", "schedlens-scheduler-leader-election")

    assert container["image"] == "registry.k8s.io/kube-scheduler:v1.28.7"
    assert config_arg == f"--config={mount['mountPath']}/scheduler-config.yaml"
    assert volume["configMap"]["name"] == "schedlens-scheduler-config"
    assert deployment["spec"]["replicas"] >= 2, "leader election makes a second replica a warm standby"
    assert role["metadata"]["namespace"] == lease["resourceNamespace"]
    assert {("coordination.k8s.io", "leases", "get"), ("coordination.k8s.io", "leases", "update")} <= expand_rules(
        [r for r in role["rules"] if lease["resourceName"] in r.get("resourceNames", [])]
    )


def test_the_scheduler_has_the_upstream_second_scheduler_roles() -> None:
    account = named(DOCS, "Deployment", "schedlens-scheduler")["spec"]["template"]["spec"]["serviceAccountName"]
    roles = {
        (b["roleRef"]["kind"], b["roleRef"]["name"])
        for b in of_kind(DOCS, "ClusterRoleBinding") + of_kind(DOCS, "RoleBinding")
        if any(s["name"] == account for s in b["subjects"])
    }

    assert roles == {
        ("ClusterRole", "system:kube-scheduler"),
        ("ClusterRole", "system:volume-scheduler"),
        ("Role", "extension-apiserver-authentication-reader"),
        ("Role", "schedlens-scheduler-leader-election"),
    }


# ----- RBAC: least privilege -----


def test_schedlens_is_granted_exactly_read_of_nodes_pods_events_and_its_crs_and_create_of_bindings_and_events() -> None:
    role = named(DOCS, "ClusterRole", "schedlens")

    assert expand_rules(role["rules"]) == SCHEDLENS_RULES
    assert all("*" not in str(rule) for rule in role["rules"])
    assert all("resourceNames" not in rule and "nonResourceURLs" not in rule for rule in role["rules"])


def test_schedlens_service_accounts_are_bound_to_nothing_else() -> None:
    bindings = of_kind(DOCS, "ClusterRoleBinding") + of_kind(DOCS, "RoleBinding")
    for account, allowed in (("schedlens", {("ClusterRole", "schedlens")}), ("schedlens-no-api", set())):
        refs = {
            (b["roleRef"]["kind"], b["roleRef"]["name"])
            for b in bindings
            if any(s.get("kind") == "ServiceAccount" and s["name"] == account for s in b["subjects"])
        }
        assert refs == allowed, account
    assert named(DOCS, "ServiceAccount", "schedlens-no-api")["automountServiceAccountToken"] is False


def test_only_the_web_and_watcher_pods_carry_an_api_token() -> None:
    with_token = {
        workload["metadata"]["name"]
        for workload, pod in pod_specs(DOCS)
        if pod.get("serviceAccountName") == "schedlens" and pod.get("automountServiceAccountToken", True)
    }

    assert with_token == {"schedlens-web", "schedlens-watcher"}


# ----- workloads -----


def test_every_container_command_names_something_that_exists() -> None:
    for workload, pod in pod_specs(DOCS):
        for container in pod["containers"]:
            if workload["metadata"]["name"] == "schedlens-scheduler":
                continue
            assert command_problems(container["command"]) == [], (workload["metadata"]["name"], container["name"])


def test_every_container_has_requests_limits_and_a_restricted_security_context() -> None:
    for workload, pod in pod_specs(DOCS):
        name = workload["metadata"]["name"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for container in pod["containers"]:
            resources = container["resources"]
            assert {"cpu", "memory"} <= set(resources["requests"]), (name, container["name"])
            assert {"cpu", "memory"} <= set(resources["limits"]), (name, container["name"])
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False
            assert security["readOnlyRootFilesystem"] is True
            assert security["capabilities"] == {"drop": ["ALL"]}
            mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
            assert "/tmp" in mounts, f"{name}/{container['name']}: a read-only root needs a writable /tmp"


def test_every_mount_envfrom_and_volume_refers_to_something_defined() -> None:
    config_maps = {d["metadata"]["name"] for d in of_kind(DOCS, "ConfigMap")}
    for workload, pod in pod_specs(DOCS):
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        claims = {c["metadata"]["name"] for c in workload["spec"].get("volumeClaimTemplates", [])}
        for volume in volumes.values():
            if "configMap" in volume:
                assert volume["configMap"]["name"] in config_maps
        for container in pod["containers"]:
            for mount in container.get("volumeMounts", []):
                assert mount["name"] in volumes or mount["name"] in claims, (workload["metadata"]["name"], mount)
            for source in container.get("envFrom", []):
                if "configMapRef" in source:
                    assert source["configMapRef"]["name"] in config_maps
                else:
                    assert source["secretRef"]["name"] == "schedlens-secrets", (
                        "the one Secret the README has you create"
                    )


def test_the_environment_sets_only_variables_schedlens_reads() -> None:
    env = named(DOCS, "ConfigMap", "schedlens-env")["data"]

    assert set(env) - known_environment_variables() == set()
    assert env["SCHEDLENS_CLUSTER_SOURCE"] == "kubernetes"
    assert env["SCHEDLENS_BIND_MODE"] == "kubernetes"
    assert f"schedlens.{NAMESPACE}.svc" in env["DJANGO_ALLOWED_HOSTS"].split(",")
    assert "localhost" in env["DJANGO_ALLOWED_HOSTS"].split(","), "the probes send Host: localhost"


def environments(docs: list[dict]) -> list[tuple[str, dict[str, str]]]:
    """Every ConfigMap's data and every container's own env, by where they are."""
    found = [(f"ConfigMap/{d['metadata']['name']}", d.get("data") or {}) for d in of_kind(docs, "ConfigMap")]
    for workload, spec in pod_specs(docs):
        for container in spec.get("containers", []) + spec.get("initContainers", []):
            env = {e["name"]: e.get("value", "") for e in container.get("env", [])}
            found.append((f"{workload['metadata']['name']}/{container['name']}", env))
    return found


def test_every_environment_serving_tls_also_sets_schedlens_https() -> None:
    assert [(where, p) for where, env in environments(DOCS) for p in https_problems(env)] == []


def test_the_https_check_catches_tls_without_schedlens_https() -> None:
    tls = {"SCHEDLENS_TLS_CERT": "/etc/schedlens-tls/tls.crt", "SCHEDLENS_TLS_KEY": "/etc/schedlens-tls/tls.key"}

    assert https_problems(tls) == ["SCHEDLENS_TLS_CERT, SCHEDLENS_TLS_KEY set without SCHEDLENS_HTTPS=true"]
    assert https_problems({**tls, "SCHEDLENS_HTTPS": "false"}) != []
    assert https_problems({**tls, "SCHEDLENS_HTTPS": "true"}) == []
    assert https_problems({"SCHEDLENS_HTTPS": "false"}) == []


def test_the_profiles_config_map_loads_as_schedlens_profiles() -> None:
    profiles = load_profiles(named(DOCS, "ConfigMap", "schedlens-profiles")["data"]["profiles.yaml"])

    assert {"default", "gpu-aware"} <= set(profiles)


def test_web_probes_liveness_on_healthz_and_readiness_on_readyz_with_an_allowed_host() -> None:
    web = named(DOCS, "StatefulSet", "schedlens-web")
    [container] = [c for c in web["spec"]["template"]["spec"]["containers"] if c["name"] == "web"]

    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert {"name": "Host", "value": "localhost"} in container[probe]["httpGet"]["httpHeaders"]


def test_each_web_replica_keeps_its_spool_on_its_own_persistent_volume_shared_with_its_ingester() -> None:
    web = named(DOCS, "StatefulSet", "schedlens-web")
    spool_dir = named(DOCS, "ConfigMap", "schedlens-env")["data"]["SCHEDLENS_SPOOL_DIR"]
    [claim] = web["spec"]["volumeClaimTemplates"]
    containers = {c["name"]: c for c in web["spec"]["template"]["spec"]["containers"]}

    assert claim["metadata"]["name"] == "spool"
    for name in ("web", "ingest"):
        assert {"name": "spool", "mountPath": spool_dir} in containers[name]["volumeMounts"]
    assert containers["ingest"]["command"][-2:] == ["ingest_spool", "--follow"]
    assert named(DOCS, "ConfigMap", "schedlens-env")["data"]["SCHEDLENS_INGEST_IN_PROCESS"] == "false"


def test_services_and_disruption_budgets_select_pods_that_exist() -> None:
    pod_labels = [w["spec"]["template"]["metadata"]["labels"] for w, _ in pod_specs(DOCS)]

    def selects(selector: dict[str, str]) -> bool:
        return any(selector.items() <= labels.items() for labels in pod_labels)

    for service in of_kind(DOCS, "Service"):
        assert selects(service["spec"]["selector"]), service["metadata"]["name"]
    budgets = of_kind(DOCS, "PodDisruptionBudget")
    assert {b["metadata"]["name"] for b in budgets} == {"schedlens-web", "schedlens-scheduler"}
    for budget in budgets:
        assert selects(budget["spec"]["selector"]["matchLabels"]), budget["metadata"]["name"]


def test_exactly_one_beat_even_during_a_rollout() -> None:
    beat = named(DOCS, "Deployment", "schedlens-beat")

    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"] == {"type": "Recreate"}
