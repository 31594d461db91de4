"""Shared readers for the deploy tests: YAML documents, containers, commands, the kubescheduler v1 schema."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
CHART = DEPLOY / "helm" / "schedlens"

Doc = dict[str, Any]

EXTENDER_FIELDS = frozenset(
    {
        "urlPrefix",
        "filterVerb",
        "prioritizeVerb",
        "preemptVerb",
        "bindVerb",
        "weight",
        "enableHTTPS",
        "tlsConfig",
        "httpTimeout",
        "nodeCacheCapable",
        "managedResources",
        "ignorable",
    }
)
"""kubescheduler.config.k8s.io/v1 Extender (extender-protocol.md §3.7): nothing else is accepted."""
TLS_CONFIG_FIELDS = frozenset(
    {"insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData", "caData"}
)
MANAGED_RESOURCE_FIELDS = frozenset({"name", "ignoredByScheduler"})

SCHEDLENS_RULES = frozenset(
    {("", resource, verb) for resource in ("nodes", "pods", "events") for verb in ("get", "list", "watch")}
    | {("", "pods/binding", "create")}
    | {("events.k8s.io", "events", "create")}
    | {("schedlens.io", "noderesources", verb) for verb in ("get", "list", "watch")}
)
"""Everything schedlens may do in the API: read nodes, pods, events and its CRs; create bindings; create
events.k8s.io Events (the ``Explained`` Event on each bound pod)."""


def load_documents(path: Path) -> list[Doc]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def kubernetes_documents() -> list[Doc]:
    docs: list[Doc] = []
    for path in sorted(KUBERNETES.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs.extend(load_documents(path))
    return docs


def of_kind(docs: list[Doc], kind: str) -> list[Doc]:
    return [d for d in docs if d.get("kind") == kind]


def named(docs: list[Doc], kind: str, name: str) -> Doc:
    [doc] = [d for d in of_kind(docs, kind) if d["metadata"]["name"] == name]
    return doc


def pod_specs(docs: list[Doc]) -> Iterator[tuple[Doc, Doc]]:
    """(workload, pod spec) for every Deployment, StatefulSet and Job."""
    for doc in docs:
        if doc.get("kind") in ("Deployment", "StatefulSet", "Job"):
            yield doc, doc["spec"]["template"]["spec"]


def expand_rules(rules: list[Doc]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        for verb in rule.get("verbs", [])
    }


def module_exists(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def management_command_exists(name: str) -> bool:
    from django.core.management import get_commands

    return name in get_commands()


def command_problems(command: list[str]) -> list[str]:
    """What a container command names that does not exist in this repository."""
    problems: list[str] = []
    if "manage.py" in command:
        position = command.index("manage.py")
        name = command[position + 1] if position + 1 < len(command) else ""
        if not management_command_exists(name):
            problems.append(f"manage.py {name!r} is not a management command")
    if command and command[0] == "celery":
        app = command[command.index("-A") + 1]
        if not (REPO / app.replace(".", "/") / "celery.py").is_file():
            problems.append(f"celery app {app!r} has no {app}/celery.py")
    if command and command[0] == "gunicorn":
        config = command[command.index("--config") + 1]
        if config.startswith("python:") and not module_exists(config.removeprefix("python:")):
            problems.append(f"gunicorn config {config} does not exist")
        wsgi = command[-1].split(":")[0]
        if not module_exists(wsgi):
            problems.append(f"WSGI module {wsgi} does not exist")
    return problems


def extender_problems(config: Doc) -> list[str]:
    problems: list[str] = []
    if (
        config.get("apiVersion") != "kubescheduler.config.k8s.io/v1"
        or config.get("kind") != "KubeSchedulerConfiguration"
    ):
        problems.append("not a kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration")
    for i, extender in enumerate(config.get("extenders") or []):
        problems += [f"extenders[{i}].{k} is not an Extender field" for k in set(extender) - EXTENDER_FIELDS]
        problems += [f"extenders[{i}].tlsConfig.{k}" for k in set(extender.get("tlsConfig") or {}) - TLS_CONFIG_FIELDS]
        for j, item in enumerate(extender.get("managedResources") or []):
            problems += [f"extenders[{i}].managedResources[{j}].{k}" for k in set(item) - MANAGED_RESOURCE_FIELDS]
    return problems


SETTING = re.compile(r"\b((?:SCHEDLENS|DJANGO|WEB|DATABASE|REDIS|PROMETHEUS)_[A-Z_]+|HOST|PORT)\b")


TLS_SERVING_VARIABLES = ("SCHEDLENS_TLS_CERT", "SCHEDLENS_TLS_KEY", "SCHEDLENS_TLS_CLIENT_CA")


def https_problems(env: dict[str, str]) -> list[str]:
    """An environment that serves TLS must also say so to Django (SCHEDLENS_HTTPS: secure cookies, HSTS)."""
    serving = [name for name in TLS_SERVING_VARIABLES if env.get(name)]
    if serving and str(env.get("SCHEDLENS_HTTPS", "")).lower() != "true":
        return [f"{', '.join(serving)} set without SCHEDLENS_HTTPS=true"]
    return []


def known_environment_variables() -> set[str]:
    """Variables schedlens reads (settings, gunicorn config): a deployment setting anything else has a typo."""
    names: set[str] = set()
    for path in (REPO / "config" / "settings.py", REPO / "config" / "gunicorn_conf.py"):
        names.update(re.findall(r"""(?:env_\w+|os\.environ\.get)\(\s*["']([A-Z_]+)["']""", path.read_text()))
    return names
