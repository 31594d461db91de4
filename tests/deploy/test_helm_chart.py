"""The Helm chart: same objects as deploy/kubernetes, every value used, every used value defined.

Helm is not installable from the registries this project builds from (no Debian package; the PyPI "helm"
packages are other software or Windows/macOS binaries), so templates are checked at the YAML level: with
every ``{{ ... }}`` action line removed and inline actions replaced by a placeholder, each template must parse
as Kubernetes objects. Both sides of an ``if`` survive that, so what is checked is a superset of any
rendering. When a ``helm`` binary is on PATH, ``helm lint`` and ``helm template`` run as well.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
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
)

TEMPLATES = sorted(p for p in (CHART / "templates").glob("*.yaml"))
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
ACTION_LINE = re.compile(r"^\s*\{\{.*\}\}\s*$")
INLINE_ACTION = re.compile(r"\{\{-?.*?-?\}\}")
VALUE_REFERENCE = re.compile(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


def strip_template(text: str) -> str:
    lines, in_comment = [], False
    for line in text.splitlines():
        stripped = line.strip()
        if in_comment:
            in_comment = "*/}}" not in stripped
            continue
        if stripped.startswith("{{/*") or stripped.startswith("{{- /*"):
            in_comment = "*/}}" not in stripped
            continue
        if ACTION_LINE.match(line):
            continue
        lines.append(INLINE_ACTION.sub("X", line))
    return "\n".join(lines)


def chart_documents() -> list[dict[str, Any]]:
    docs = []
    for path in TEMPLATES:
        docs.extend(d for d in yaml.safe_load_all(strip_template(path.read_text())) if d)
    return docs


def template_text() -> str:
    return "\n".join(p.read_text() for p in (CHART / "templates").iterdir())


def value_paths(node: Any, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Every key path in values.yaml, leaves and intermediate maps alike."""
    paths = {prefix} if prefix else set()
    if isinstance(node, dict):
        for key, child in node.items():
            paths |= value_paths(child, (*prefix, str(key)))
    return paths


def leaf_paths(node: Any, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    if isinstance(node, dict) and node:
        return set().union(*(leaf_paths(child, (*prefix, str(key))) for key, child in node.items()))
    return {prefix}


def referenced_paths() -> set[tuple[str, ...]]:
    return {tuple(match.split(".")[1:]) for match in VALUE_REFERENCE.findall(template_text())}


# ----- Chart.yaml and values.yaml -----


def test_chart_yaml_is_a_valid_v2_application_chart() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())

    assert chart["apiVersion"] == "v2"
    assert chart["name"] == "schedlens" == CHART.name
    assert chart["type"] == "application"
    assert re.fullmatch(r"\d+\.\d+\.\d+", chart["version"])
    assert chart["appVersion"]
    assert chart["kubeVersion"].startswith(">=1.25")


def test_every_value_is_used_by_a_template() -> None:
    used = referenced_paths()
    unused = [
        ".".join(leaf)
        for leaf in leaf_paths(VALUES)
        if not any(leaf[: len(ref)] == ref for ref in used)  # a map passed whole (toYaml) uses its leaves
    ]

    assert unused == []


def test_every_value_a_template_uses_is_defined() -> None:
    assert referenced_paths() - value_paths(VALUES) == set()


def test_the_values_cover_profiles_prometheus_image_replicas_and_tls() -> None:
    assert load_profiles(yaml.safe_dump(VALUES["profiles"]))  # a valid schedlens profiles file
    assert VALUES["prometheusUrl"].startswith("http")
    assert {"repository", "tag", "pullPolicy"} <= set(VALUES["image"])
    assert {"replicas"} <= set(VALUES["web"]) & set(VALUES["worker"]) & set(VALUES["scheduler"])
    assert {"enabled", "serverSecret", "clientSecret", "requireClientCert"} <= set(VALUES["tls"])


# ----- templates -----


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.name)
def test_each_template_parses_as_kubernetes_objects_once_actions_are_stripped(path) -> None:
    docs = [d for d in yaml.safe_load_all(strip_template(path.read_text())) if d]

    assert docs
    for doc in docs:
        assert {"apiVersion", "kind", "metadata"} <= set(doc), doc
        assert doc["metadata"]["name"]


def test_the_chart_creates_the_same_objects_as_the_plain_manifests() -> None:
    """The base manifests and the optional monitoring ones (deploy/kubernetes/monitoring) together."""
    monitoring = KUBERNETES / "monitoring"
    optional = [
        d for p in sorted(monitoring.glob("*.yaml")) if p.name != "kustomization.yaml" for d in load_documents(p)
    ]
    plain = Counter(
        d["kind"]
        for d in [*kubernetes_documents(), *optional]
        if d["kind"] not in ("Namespace", "CustomResourceDefinition")
    )

    assert Counter(d["kind"] for d in chart_documents()) == plain
    assert load_documents(CHART / "crds" / "crd-noderesources.yaml") == load_documents(
        DEPLOY / "crd-noderesources.yaml"
    )


def test_the_chart_grants_schedlens_exactly_what_the_plain_manifests_do() -> None:
    [role] = [d for d in chart_documents() if d["kind"] == "ClusterRole"]

    assert expand_rules(role["rules"]) == SCHEDLENS_RULES


def test_the_chart_scheduler_config_uses_only_v1_extender_fields() -> None:
    [config_map] = [d for d in chart_documents() if d["kind"] == "ConfigMap" and "scheduler-config.yaml" in d["data"]]
    config = yaml.safe_load(config_map["data"]["scheduler-config.yaml"])

    assert extender_problems(config) == []
    assert set(config["extenders"][0]) >= {
        "urlPrefix",
        "filterVerb",
        "prioritizeVerb",
        "bindVerb",
        "preemptVerb",
        "tlsConfig",
    }


def test_the_chart_environment_sets_only_variables_schedlens_reads() -> None:
    [env] = [d for d in chart_documents() if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "schedlens-env"]

    assert set(env["data"]) - known_environment_variables() == set()
    assert {"SCHEDLENS_TLS_CERT", "SCHEDLENS_TLS_KEY", "SCHEDLENS_TLS_CLIENT_CA"} <= set(env["data"])


def conditions_of_env_keys(template: str) -> dict[str, tuple[str, ...]]:
    """Each key of the schedlens-env ConfigMap template -> the ``if`` conditions it is rendered under."""
    stack: list[str] = []
    keys: dict[str, tuple[str, ...]] = {}
    document = template.split("\n---")[0]
    for line in document.splitlines():
        if match := re.fullmatch(r"\s*\{\{-?\s*if\s+(.+?)\s*-?\}\}\s*", line):
            stack.append(match.group(1))
        elif re.fullmatch(r"\s*\{\{-?\s*else\s*-?\}\}\s*", line):
            stack.append(f"not {stack.pop()}")
        elif re.fullmatch(r"\s*\{\{-?\s*end\s*-?\}\}\s*", line):
            stack.pop()
        elif match := re.fullmatch(r"  ([A-Z][A-Z0-9_]*):.*", line):
            keys[match.group(1)] = tuple(stack)
    return keys


def test_the_chart_sets_schedlens_https_exactly_when_it_serves_tls() -> None:
    template = (CHART / "templates" / "configmaps.yaml").read_text()
    keys = conditions_of_env_keys(template)

    assert keys["SCHEDLENS_TLS_CERT"] == (".Values.tls.enabled",)
    assert keys["SCHEDLENS_HTTPS"] == (".Values.tls.enabled",), "set with the TLS variables, and only with them"
    assert keys["SCHEDLENS_TLS_CLIENT_CA"] == (".Values.tls.enabled", ".Values.tls.requireClientCert")
    assert keys["PORT"] == ()
    [env] = [d for d in chart_documents() if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "schedlens-env"]
    assert env["data"]["SCHEDLENS_HTTPS"] == "true"  # a string: a YAML boolean is no valid ConfigMap value
    assert https_problems(env["data"]) == []


def test_the_chart_commands_exist() -> None:
    for doc in chart_documents():
        if doc["kind"] in ("Deployment", "StatefulSet", "Job"):
            for container in doc["spec"]["template"]["spec"]["containers"]:
                if container["name"] != "kube-scheduler":
                    assert command_problems(container["command"]) == [], container["name"]


def test_the_migrations_run_as_a_hook_before_install_and_upgrade() -> None:
    [job] = [d for d in chart_documents() if d["kind"] == "Job"]

    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"


@pytest.mark.skipif(shutil.which("helm") is None, reason="helm is not installed (not available from Debian or PyPI)")
@pytest.mark.parametrize("tls", ["false", "true"])
def test_helm_lints_and_renders_the_chart(tls: str) -> None:
    subprocess.run(["helm", "lint", str(CHART)], check=True, capture_output=True)
    rendered = subprocess.run(
        ["helm", "template", "schedlens", str(CHART), "--namespace", "schedlens-system", "--set", f"tls.enabled={tls}"],
        check=True,
        capture_output=True,
        text=True,
    )
    docs = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    [config_map] = [d for d in docs if d["kind"] == "ConfigMap" and "scheduler-config.yaml" in d.get("data", {})]
    assert extender_problems(yaml.safe_load(config_map["data"]["scheduler-config.yaml"])) == []
    [env] = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "schedlens-env"]
    assert https_problems(env["data"]) == []
    assert env["data"].get("SCHEDLENS_HTTPS") == ("true" if tls == "true" else None)
