"""What the observability tests share: the kit's files (Grafana dashboard, Prometheus rules) and reading them."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from tests.deploy.manifests import CHART, DEPLOY, KUBERNETES

DASHBOARD_PATH = DEPLOY / "grafana" / "schedlens-dashboard.json"
RULES_PATH = DEPLOY / "prometheus" / "schedlens-alerts.yaml"
CHART_RULES_PATH = CHART / "files" / "schedlens-alerts.yaml"
MONITORING = KUBERNETES / "monitoring"

DASHBOARD: dict[str, Any] = json.loads(DASHBOARD_PATH.read_text())
RULES: dict[str, Any] = yaml.safe_load(RULES_PATH.read_text())
ALERTS: list[dict[str, Any]] = [rule for group in RULES["groups"] for rule in group["rules"]]
PANELS: list[dict[str, Any]] = [p for p in DASHBOARD["panels"] if p["type"] != "row"]
TARGETS: list[tuple[str, dict[str, Any]]] = [(p["title"], t) for p in PANELS for t in p["targets"]]
VARIABLES: dict[str, dict[str, Any]] = {v["name"]: v for v in DASHBOARD["templating"]["list"]}

METRIC_NAME = re.compile(r"\bschedlens_[a-z0-9_]+")
SEVERITIES = {"critical", "warning", "info"}


def metric_names(expr: str) -> set[str]:
    return set(METRIC_NAME.findall(expr))


def alert_exprs() -> dict[str, str]:
    return {rule["alert"]: rule["expr"] for rule in ALERTS}


def dashboard_exprs() -> list[str]:
    exprs = [target["expr"] for _, target in TARGETS]
    exprs += [v["definition"] for v in VARIABLES.values() if v["type"] == "query"]
    return exprs


def parse_duration(text: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([smh])", text))
