"""The observability kit: Grafana dashboard, Prometheus alert rules, PrometheusRule and ServiceMonitor.

- The rules file passes ``promtool check rules``; its copies (the Helm chart's ``files/``, the kustomize
  PrometheusRule) are the same rules.
- Every metric the dashboard and the rules name is one a real ``GET /metrics`` of the app exports: the module's
  scrape runs verbs (filter, prioritize on a ``fixed``-scale profile so an answer ties, a call to an unknown
  profile, a prioritize whose spool append fails) against Redis snapshots and statistics written the way the
  Celery workers write them, then scrapes.
- Every dashboard query and every alert expression is evaluated by a real Prometheus. Its series are the
  scrape's own families (names, types, label sets) turned into 80 minutes of OpenMetrics history for two
  installations told apart by ``namespace``: ``healthy`` and ``broken`` (verbs erroring and slow, snapshots
  stale, refreshes failing, Redis down, spool growing on one pod and unreadable on the other, ties frequent,
  records refused). Each dashboard query returns series; each alert returns series for ``broken`` over its whole
  ``for`` window and none for ``healthy``.
- The ServiceMonitor and PrometheusRule: the kustomize ones parse and point at what exists; the chart's render
  with ``helm template`` when helm is installed and, everywhere, through :func:`render_chart_template`, a stand-in
  for the few template actions those two templates use.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from dashboard.env import pod_host
from tests.deploy.manifests import CHART, DEPLOY, KUBERNETES, kubernetes_documents, load_documents, named
from tests.prometheus_server import (
    PrometheusServer,
    PrometheusUnavailable,
    _escape_label_value,
    _format_number,
    _format_timestamp,
    require_binaries,
)

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


# ----- the rules file and its copies -----


@pytest.mark.prometheus
@pytest.mark.parametrize("path", [RULES_PATH, CHART_RULES_PATH], ids=lambda p: str(p.relative_to(DEPLOY)))
def test_promtool_check_rules_passes(path: Path) -> None:
    try:
        _, promtool = require_binaries()
    except PrometheusUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    done = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)

    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in done.stdout


def test_every_alert_says_how_bad_it_is_and_what_to_check() -> None:
    names = [rule.get("alert") for rule in ALERTS]

    assert len(set(names)) == len(names), "alert names are unique"
    for rule in ALERTS:
        assert rule["alert"].startswith("Schedlens"), rule
        assert rule["labels"]["severity"] in SEVERITIES, rule["alert"]
        assert rule["annotations"]["summary"].strip(), rule["alert"]
        assert len(rule["annotations"]["description"]) > 120, f"{rule['alert']}: say what to check"
        assert metric_names(rule["expr"]), f"{rule['alert']} reads no schedlens metric"


def test_the_alerts_cover_what_an_operator_must_act_on() -> None:
    exprs = alert_exprs()
    expected = {
        "SchedlensSpoolNotDraining": ("schedlens_spool_depth", "deriv("),
        "SchedlensTrafficSnapshotStale": ("schedlens_traffic_snapshot_age_seconds", "> 120"),
        "SchedlensVerbErrors": ("schedlens_verb_responses_total", 'status=~"5.."'),
        "SchedlensVerbsSlow": ("schedlens_verb_duration_seconds_bucket", "histogram_quantile(0.99"),
        "SchedlensTrafficRefreshFailing": ("schedlens_traffic_refresh_failing",),
        "SchedlensTrafficRefreshErrorsFrequent": ("schedlens_traffic_refresh_errors_total",),
        "SchedlensRedisDown": ("schedlens_redis_up",),
        "SchedlensAnswerTiesFrequent": ("schedlens_answer_ties_total",),
        # The metric exists (dashboard/spool.py): alerted on; see the rule's comment for where it is exported.
        "SchedlensSpoolRecordsRejected": ("schedlens_spool_rejected_records_total",),
    }
    for alert, parts in expected.items():
        assert alert in exprs, alert
        for part in parts:
            assert part in exprs[alert], (alert, part)
    severity = {rule["alert"]: rule["labels"]["severity"] for rule in ALERTS}
    assert severity["SchedlensAnswerTiesFrequent"] == "info"
    assert severity["SchedlensVerbErrors"] == severity["SchedlensRedisDown"] == "critical"
    for_ = {rule["alert"]: rule.get("for", "0s") for rule in ALERTS}
    assert parse_duration(for_["SchedlensSpoolNotDraining"]) >= 600, "not falling for minutes, not a blip"
    assert parse_duration(for_["SchedlensTrafficSnapshotStale"]) >= 120


def test_the_chart_copy_of_the_rules_is_the_rules_file_byte_for_byte() -> None:
    assert CHART_RULES_PATH.read_bytes() == RULES_PATH.read_bytes(), (
        f"copy {RULES_PATH.relative_to(DEPLOY.parent)} to {CHART_RULES_PATH.relative_to(DEPLOY.parent)}"
    )


def test_the_kustomize_prometheus_rule_is_the_rules_file_under_spec() -> None:
    text = (MONITORING / "prometheusrule.yaml").read_text()
    [rule] = load_documents(MONITORING / "prometheusrule.yaml")
    body = text.split("\nspec:\n", 1)[1]

    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["kind"] == "PrometheusRule"
    assert rule["metadata"]["namespace"] == "schedlens-system"
    assert rule["spec"] == RULES
    assert body == indent_text(RULES_PATH.read_text(), 2), "the rules file's text, comments included, indented by two"


def indent_text(text: str, width: int) -> str:
    return "".join((" " * width + line) if line.strip() else line for line in text.splitlines(keepends=True))


# ----- the dashboard, statically -----


def test_the_dashboard_reads_a_datasource_variable_and_has_a_profile_variable() -> None:
    datasource = VARIABLES["DS_PROMETHEUS"]
    profile = VARIABLES["profile"]

    assert datasource["type"] == "datasource"
    assert datasource["query"] == "prometheus"
    assert profile["type"] == "query"
    assert profile["definition"].startswith("label_values(schedlens_verb_duration_seconds_count")
    assert profile["definition"].endswith(", profile)")
    assert DASHBOARD["id"] is None, "importable: Grafana assigns the id"
    assert DASHBOARD["uid"]
    for found in walk_datasources(DASHBOARD):
        if found.get("type") == "prometheus":
            assert found["uid"] == "${DS_PROMETHEUS}", found
    for panel in PANELS:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}, panel["title"]
        assert panel["targets"], panel["title"]
    verb_panels = [t for _, t in TARGETS if "schedlens_verb_" in t["expr"] or "schedlens_answer_ties" in t["expr"]]
    assert verb_panels
    assert all('profile=~"$profile"' in t["expr"] for t in verb_panels)


def walk_datasources(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if isinstance(node.get("datasource"), dict):
            yield node["datasource"]
        for child in node.values():
            yield from walk_datasources(child)
    elif isinstance(node, list):
        for child in node:
            yield from walk_datasources(child)


def test_the_dashboard_panels_are_laid_out_and_numbered_once() -> None:
    ids = [p["id"] for p in DASHBOARD["panels"]]

    assert len(set(ids)) == len(ids)
    for panel in DASHBOARD["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        assert grid["h"] > 0
    for panel in PANELS:
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"]), panel["title"]


def test_the_dashboard_shows_every_metric_the_operator_needs() -> None:
    shown = set().union(*(metric_names(t["expr"]) for _, t in TARGETS))

    assert {
        "schedlens_verb_duration_seconds_bucket",
        "schedlens_verb_responses_total",
        "schedlens_answer_ties_total",
        "schedlens_traffic_snapshot_age_seconds",
        "schedlens_traffic_refresh_errors_total",
        "schedlens_traffic_refresh_failing",
        "schedlens_spool_depth",
        "schedlens_traffic_nodes_without_metrics",
        "schedlens_traffic_unmatched_series",
        "schedlens_redis_up",
    } <= shown
    latency = next(t["expr"] for _, t in TARGETS if "histogram_quantile(0.5," in t["expr"])
    assert "by (verb, le)" in latency, "latency per verb"
    assert any("histogram_quantile(0.99," in t["expr"] for _, t in TARGETS)


# ----- kustomize: deploy/kubernetes/monitoring -----


def test_the_kustomize_monitoring_overlay_lists_its_files_and_stays_out_of_the_base() -> None:
    kustomization = yaml.safe_load((MONITORING / "kustomization.yaml").read_text())
    base = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())

    assert set(kustomization["resources"]) == {p.name for p in MONITORING.glob("*.yaml")} - {"kustomization.yaml"}
    assert not any("monitoring" in resource for resource in base["resources"]), "needs the operator's CRDs: opt-in"


def test_the_kustomize_service_monitor_scrapes_metrics_of_the_web_pods_once() -> None:
    [monitor] = load_documents(MONITORING / "servicemonitor.yaml")
    check_service_monitor(monitor, namespace="schedlens-system", port_names=service_ports(kubernetes_documents()))


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (with its built-in kustomize) is not installed")
def test_kustomize_renders_the_monitoring_overlay() -> None:
    rendered = subprocess.run(["kubectl", "kustomize", str(MONITORING)], capture_output=True, text=True, check=True)
    docs = {doc["kind"]: doc for doc in yaml.safe_load_all(rendered.stdout) if doc}

    assert set(docs) == {"ServiceMonitor", "PrometheusRule"}
    assert docs["PrometheusRule"]["spec"] == RULES


def service_ports(docs: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Service name -> its port names, and the labels each Service carries under the key ``labels:<name>``."""
    found: dict[str, set[str]] = {}
    for doc in docs:
        if doc.get("kind") == "Service":
            found[doc["metadata"]["name"]] = {p["name"] for p in doc["spec"]["ports"]}
            found[f"labels:{doc['metadata']['name']}"] = {f"{k}={v}" for k, v in doc["metadata"]["labels"].items()}
    return found


def check_service_monitor(monitor: dict[str, Any], *, namespace: str, port_names: Mapping[str, set[str]]) -> None:
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["kind"] == "ServiceMonitor"
    assert monitor["metadata"]["namespace"] == namespace
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [namespace]}
    selector = {f"{k}={v}" for k, v in monitor["spec"]["selector"]["matchLabels"].items()}
    selected = [name for name in ("schedlens", "schedlens-web") if selector <= port_names[f"labels:{name}"]]
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["port"] in port_names["schedlens"], "a port of Service schedlens, by name"
    assert "schedlens" in selected
    if len(selected) > 1:  # both Services carry the labels: the relabelling must keep only one
        assert {
            "sourceLabels": ["__meta_kubernetes_service_name"],
            "regex": "schedlens",
            "action": "keep",
        } in endpoint["relabelings"]


# ----- Helm: metrics.serviceMonitor, metrics.prometheusRule -----

ACTION = re.compile(r"(\s*)\{\{(-?)\s*(.*?)\s*(-?)\}\}", re.S)


def render_chart_template(name: str, values: Mapping[str, Any], *, namespace: str = "schedlens-system") -> str:
    """Render ``templates/<name>`` as Helm would, for the actions the monitoring templates use, and no others.

    A stand-in where helm is not installed (see test_helm_chart.py): ``if``/``with``/``end``, ``.Values…``,
    ``.Release.Namespace``, ``include "schedlens.labels" .``, ``toYaml .``, ``.Files.Get``, ``ternary``, and the
    ``indent``/``nindent`` pipes, with Go templates' whitespace trimming. Anything else raises.
    """
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()

    def define(template: str) -> str:
        match = re.search(
            r'\{\{-? define "' + re.escape(template) + r'" (-?)\}\}(.*?)\{\{(-?) end -?\}\}', helpers, re.S
        )
        assert match, template
        body = match.group(2).lstrip() if match.group(1) else match.group(2)
        return body.rstrip() if match.group(3) else body

    def lookup(path: str, dot: Any) -> Any:
        if path == ".":
            return dot
        if path.startswith(".Values."):
            node: Any = values
            for key in path.removeprefix(".Values.").split("."):
                node = node.get(key) if isinstance(node, Mapping) else None
            return node
        fixed = {
            ".Release.Namespace": namespace,
            ".Release.Service": "Helm",
            ".Chart.Name": chart["name"],
            ".Chart.Version": chart["version"],
        }
        if path in fixed:
            return fixed[path]
        if match := re.fullmatch(r'\.Files\.Get "([^"]+)"', path):
            file = CHART / match.group(1)
            return file.read_text() if file.is_file() else ""  # helm answers "" for a missing file
        if match := re.fullmatch(r'ternary "([^"]*)" "([^"]*)" (\S+)', path):
            return match.group(1) if lookup(match.group(3), dot) else match.group(2)
        if match := re.fullmatch(r'include "([^"]+)" \.', path):
            return render(define(match.group(1)), dot)
        if path == "toYaml .":
            return yaml.safe_dump(dot, default_flow_style=False, sort_keys=False).rstrip("\n")
        raise AssertionError(f"render_chart_template does not know {{{{ {path} }}}}")

    def evaluate(expr: str, dot: Any) -> Any:
        head, *pipes = [part.strip() for part in expr.split("|")]
        value = lookup(head, dot)
        for pipe in pipes:
            match = re.fullmatch(r"(n?indent) (\d+)", pipe)
            assert match, f"unknown pipe {pipe!r}"
            pad = " " * int(match.group(2))
            value = pad + str(value).replace("\n", "\n" + pad)
            if match.group(1) == "nindent":
                value = "\n" + value
        return value

    def render(text: str, dot: Any) -> str:
        # Go's trim markers first: "{{-" eats the whitespace before the action, "-}}" the whitespace after.
        text = re.sub(r"\s*\{\{-\s", "{{ ", text)
        text = re.sub(r"\s-\}\}\s*", " }}", text)
        out: list[str] = []
        stack: list[tuple[bool, Any]] = [(True, dot)]
        position = 0
        for match in re.finditer(r"\{\{ ?(.*?) ?\}\}", text, re.S):
            if stack[-1][0]:
                out.append(text[position : match.start()])
            position = match.end()
            action = match.group(1).strip()
            active, current = stack[-1]
            if action.startswith("/*"):
                continue
            if action.startswith("if "):
                stack.append((active and bool(evaluate(action[3:], current)), current))
            elif action.startswith("with "):
                value = evaluate(action[5:], current) if active else None
                stack.append((active and bool(value), value))
            elif action == "end":
                stack.pop()
            elif active:
                out.append(str(evaluate(action, current)))
        assert len(stack) == 1, "unbalanced if/with/end"
        out.append(text[position:])
        return "".join(out)

    return render((CHART / "templates" / name).read_text(), None)


def chart_values(**overrides: Any) -> dict[str, Any]:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for dotted, value in overrides.items():
        *parents, leaf = dotted.split("__")
        node = values
        for key in parents:
            node = node[key]
        node[leaf] = value
    return values


def chart_services(tls: bool) -> dict[str, set[str]]:
    text = (CHART / "templates" / "web.yaml").read_text()
    services = [doc for doc in text.split("\n---\n") if re.search(r"^kind: Service$", doc, re.M)]
    found: dict[str, set[str]] = {}
    for doc in services:
        name = re.search(r"^  name: (\S+)$", doc, re.M).group(1)  # type: ignore[union-attr]
        ports = re.findall(r"\{name: (.+?), port:", doc)
        found[name] = {("https" if tls else "http") if "ternary" in p else p for p in ports}
        labels = set(re.findall(r"^    (app\.kubernetes\.io/(?:name|component)): (\S+)$", doc, re.M))
        found[f"labels:{name}"] = {f"{k}={v}" for k, v in labels}
    return found


def test_the_chart_values_leave_the_operator_objects_off_by_default() -> None:
    values = chart_values()

    assert values["metrics"]["serviceMonitor"]["enabled"] is False
    assert values["metrics"]["prometheusRule"]["enabled"] is False
    assert render_chart_template("servicemonitor.yaml", values).strip() == ""
    assert render_chart_template("prometheusrule.yaml", values).strip() == ""


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_the_chart_renders_a_service_monitor_of_the_service_port(tls: bool) -> None:
    values = chart_values(metrics__serviceMonitor__enabled=True, metrics__serviceMonitor__labels={"release": "kps"})
    values["tls"]["enabled"] = tls
    [monitor] = [d for d in yaml.safe_load_all(render_chart_template("servicemonitor.yaml", values)) if d]

    check_service_monitor(monitor, namespace="schedlens-system", port_names=chart_services(tls))
    assert monitor["metadata"]["labels"]["release"] == "kps"
    assert monitor["spec"]["endpoints"][0]["scheme"] == ("https" if tls else "http")
    assert monitor["spec"]["endpoints"][0]["interval"] == values["metrics"]["serviceMonitor"]["interval"]


def test_the_chart_renders_the_rules_file_as_a_prometheus_rule() -> None:
    values = chart_values(metrics__prometheusRule__enabled=True)
    [rule] = [d for d in yaml.safe_load_all(render_chart_template("prometheusrule.yaml", values)) if d]

    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["kind"] == "PrometheusRule"
    assert rule["metadata"]["namespace"] == "schedlens-system"
    assert rule["spec"] == RULES, "files/schedlens-alerts.yaml, included whole under spec"


@pytest.mark.skipif(shutil.which("helm") is None, reason="helm is not installed (not available from Debian or PyPI)")
def test_helm_renders_the_service_monitor_and_the_prometheus_rule() -> None:
    def template(*sets: str) -> list[dict[str, Any]]:
        command = ["helm", "template", "schedlens", str(CHART), "--namespace", "schedlens-system"]
        for one in sets:
            command += ["--set", one]
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        return [d for d in yaml.safe_load_all(done.stdout) if d]

    default = template()
    enabled = template("metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true")

    assert not {"ServiceMonitor", "PrometheusRule"} & {d["kind"] for d in default}
    [monitor] = [d for d in enabled if d["kind"] == "ServiceMonitor"]
    [rule] = [d for d in enabled if d["kind"] == "PrometheusRule"]
    check_service_monitor(monitor, namespace="schedlens-system", port_names=service_ports(enabled))
    assert rule["spec"] == RULES


# ----- a real scrape of the app -----

PROFILES_YAML = """\
profiles:
- name: default
- name: fixed
  answer: {scale: fixed}
"""
NODES = ("node-1", "node-2", "node-3", "node-4")
TRAFFIC = {"node-1": 1.00e9, "node-2": 1.01e9, "node-3": 3.0e9}
"""node-4 has no value (nodes without metrics); node-1 and node-2 close enough to tie on the fixed scale."""


@dataclass(frozen=True)
class Family:
    name: str
    type: str
    samples: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]
    """(sample name, sorted labels) as scraped."""


@dataclass(frozen=True)
class Scrape:
    text: str
    families: tuple[Family, ...]

    @property
    def sample_names(self) -> set[str]:
        return {name for family in self.families for name, _ in family.samples}


def verb_body(names: tuple[str, ...]) -> bytes:
    pod = {"metadata": {"name": "web-1", "namespace": "shop", "uid": str(uuid.uuid4())}, "spec": {"containers": []}}
    return json.dumps({"Pod": pod, "Nodes": None, "NodeNames": list(names)}).encode()


@pytest.fixture(scope="module")
def scrape(tmp_path_factory: pytest.TempPathFactory) -> Scrape:
    """``GET /metrics`` of the app in redis mode after verb calls, with snapshots and refresh statistics in Redis."""
    import redis
    from django.conf import settings
    from django.test import Client, override_settings
    from prometheus_client.parser import text_string_to_metric_families

    from dashboard.extender import runtime as runtime_module
    from dashboard.traffic.snapshots import Keys, SnapshotStore
    from scheduler_core.traffic import TrafficSnapshot

    workdir = tmp_path_factory.mktemp("scrape")
    (workdir / "cluster.json").write_text(json.dumps({"nodes": [{"metadata": {"name": n}} for n in NODES]}))
    (workdir / "profiles.yaml").write_text(PROFILES_YAML)
    prefix = f"schedlens-test:{uuid.uuid4().hex[:12]}:"
    overrides = override_settings(
        SCHEDLENS_SPOOL_DIR=workdir / "spool",
        SCHEDLENS_INGEST_IN_PROCESS=False,
        SCHEDLENS_BIND_MODE="simulated",
        SCHEDLENS_CONFIG=str(workdir / "profiles.yaml"),
        SCHEDLENS_CLUSTER_SOURCE="file",
        SCHEDLENS_CLUSTER_FILE=str(workdir / "cluster.json"),
        SCHEDLENS_TRAFFIC_BACKEND="redis",
        SCHEDLENS_REDIS_PREFIX=prefix,
        PROMETHEUS_URL="",
    )
    with overrides, pytest.MonkeyPatch.context() as patch:
        runtime = runtime_module.Runtime()
        patch.setattr(runtime_module, "_runtime", runtime)
        client = redis.Redis.from_url(settings.REDIS_URL)
        try:
            store = SnapshotStore(client, Keys(prefix))
            now = time.time()
            for query in {q for p in runtime.profiles.values() for q in p.traffic_queries()}:
                # What a worker leaves: a snapshot (one series named no node), one good and one failed refresh.
                store.save(TrafficSnapshot(query, TRAFFIC, now - 20, "test", unmatched_series=("10.0.0.9:9100",)))
                store.record_stats(query, duration_seconds=0.05, ok=True, at=now - 20)
                store.record_stats(query, duration_seconds=3.0, ok=False, at=now - 5)
            web = Client()
            for profile in ("default", "fixed"):
                for verb in ("filter", "prioritize"):
                    response = web.post(
                        f"/extender/{profile}/{verb}", verb_body(NODES), content_type="application/json"
                    )
                    assert response.status_code == 200, response.content
            assert (
                web.post("/extender/nope/filter", verb_body(NODES), content_type="application/json").status_code == 404
            )

            def refuse(*args: object, **kwargs: object) -> int:
                raise OSError("no space left on device (test)")

            with pytest.MonkeyPatch.context() as full_disk:
                full_disk.setattr(runtime.spool, "append", refuse)
                refused = web.post("/extender/default/prioritize", verb_body(NODES), content_type="application/json")
            assert refused.status_code == 503
            response = web.get("/metrics")
            assert response.status_code == 200
            text = response.content.decode()
        finally:
            keys = list(client.scan_iter(match=f"{prefix}*", count=500))
            if keys:
                client.delete(*keys)
            client.close()
            runtime.spool.close()
    families = [
        Family(
            family.name,
            family.type,
            tuple(
                (s.name, tuple(sorted(s.labels.items())))
                for s in family.samples
                if not s.name.endswith("_created")  # prometheus-client's creation times: not schedlens's metrics
            ),
        )
        for family in text_string_to_metric_families(text)
        if family.name.startswith("schedlens_")
    ]
    return Scrape(text, tuple(f for f in families if f.samples))


def test_the_kit_names_only_metrics_the_app_exports(scrape: Scrape) -> None:
    named_by_kit = set().union(*(metric_names(e) for e in [*dashboard_exprs(), *alert_exprs().values()]))

    assert named_by_kit - scrape.sample_names == set()
    types = {f.name: f.type for f in scrape.families}
    assert types["schedlens_verb_duration_seconds"] == "histogram"
    assert types["schedlens_verb_responses"] == types["schedlens_answer_ties"] == "counter"
    assert types["schedlens_traffic_refresh_errors"] == "counter"
    assert types["schedlens_spool_depth"] == types["schedlens_traffic_snapshot_age_seconds"] == "gauge"


# ----- the scrape's families as history in a real Prometheus -----

STEP_SECONDS = 30
HISTORY_SECONDS = 80 * 60
FUTURE_SECONDS = 10 * 60
SCENARIOS = ("healthy", "broken")
PODS = ("schedlens-web-0", "schedlens-web-1")
JOB = "schedlens"
VERB_RATE = 10.0
"""Answers per second of every verb, profile and status 200 series."""


def scenario_value(sample: str, labels: Mapping[str, str], scenario: str, pod: str, elapsed: float) -> float:
    """The value at ``elapsed`` seconds into the history of one scraped sample, on one pod of one installation.

    ``healthy`` never crosses an alert threshold; ``broken`` crosses every one of them for the whole history (the
    spool grows on schedlens-web-0 and is unreadable, NaN, on schedlens-web-1). A sample this does not know fails
    the test: a new metric needs a place in the scenarios.
    """
    broken = scenario == "broken"
    refreshes = elapsed / 15.0
    if sample.startswith("schedlens_verb_duration_seconds_"):
        count = VERB_RATE * elapsed
        if sample.endswith("_count"):
            return count
        if sample.endswith("_sum"):
            return count * (1.2 if broken else 0.002)
        slowest = 2.0 if broken else 0.004  # latencies spread evenly up to this
        return count * min(1.0, float(labels["le"]) / slowest)
    counters: dict[str, Callable[[], float]] = {
        "schedlens_verb_responses_total": lambda: (
            {"200": VERB_RATE, "503": 5.0, "404": 1.0}.get(labels["status"], 0.0)
            if broken
            else (VERB_RATE if labels["status"] == "200" else 0.0)
        ),
        "schedlens_answer_ties_total": lambda: 5.0 if broken else 0.01,
        "schedlens_spool_append_failures_total": lambda: 0.5 if broken else 0.0,
        "schedlens_spool_rejected_records_total": lambda: 0.01 if broken else 0.0,
        "schedlens_pod_events_dropped_total": lambda: 0.1 if broken else 0.0,  # no alert: Events are a courtesy
        "schedlens_pod_events_written_total": lambda: VERB_RATE / 3.0,
        "schedlens_traffic_refresh_errors_total": lambda: 0.5 / 15.0 if broken else 0.0,
        "schedlens_traffic_refresh_duration_seconds_count": lambda: 1.0 / 15.0,
        "schedlens_traffic_refresh_duration_seconds_sum": lambda: (9.0 if broken else 0.05) / 15.0,
    }
    if sample in counters:
        return 1.0 + counters[sample]() * elapsed
    gauges: dict[str, float] = {
        "schedlens_traffic_snapshot_age_seconds": 300.0 + elapsed if broken else 5.0 + refreshes % 1 * 15.0,
        "schedlens_traffic_snapshot_nodes": 3.0,
        "schedlens_traffic_nodes_without_metrics": 2.0 if broken else 0.0,
        "schedlens_traffic_unmatched_series": 1.0 if broken else 0.0,
        "schedlens_traffic_refresh_failing": 1.0 if broken else 0.0,
        "schedlens_traffic_refresh_last_duration_seconds": 9.0 if broken else 0.05,
        "schedlens_redis_up": 0.0 if broken else 1.0,
        "schedlens_spool_depth": (
            (2000.0 + 5.0 * elapsed if pod == PODS[0] else math.nan)
            if broken
            else 20.0 + 10.0 * math.sin(elapsed / 60.0)
        ),
    }
    if sample in gauges:
        return gauges[sample]
    raise AssertionError(f"{sample} has no place in the test's scenarios: add one in scenario_value")


def history_openmetrics(families: tuple[Family, ...], anchor: int) -> str:
    """OpenMetrics text of every scraped sample on every pod of both installations, every STEP_SECONDS."""
    start = anchor - HISTORY_SECONDS
    stamps = range(start, anchor + FUTURE_SECONDS + 1, STEP_SECONDS)
    lines: list[str] = []
    for family in families:
        lines.append(f"# TYPE {family.name} {family.type}")
        for scenario in SCENARIOS:
            for pod in PODS:
                target = {"job": JOB, "namespace": scenario, "pod": pod, "instance": f"{pod}.{scenario}:8000"}
                for sample, labels in family.samples:
                    every = {**dict(labels), **target}
                    text = ",".join(f'{k}="{_escape_label_value(v)}"' for k, v in sorted(every.items()))
                    for ts in stamps:
                        value = scenario_value(sample, dict(labels), scenario, pod, float(ts - start))
                        lines.append(f"{sample}{{{text}}} {_format_number(value)} {_format_timestamp(ts)}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class KitPrometheus:
    url: str
    anchor: int
    profiles: tuple[str, ...]

    def get(self, path: str, **params: str) -> Any:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                body = json.load(response)
        except urllib.error.HTTPError as exc:  # a query that does not parse: Prometheus answers 400 and says why
            raise AssertionError(f"{params}: {exc.read().decode(errors='replace')}") from None
        assert body["status"] == "success", body
        return body["data"]

    def instant(self, expr: str) -> list[dict[str, Any]]:
        data = self.get("/api/v1/query", query=expr, time=str(self.anchor))
        assert data["resultType"] == "vector", data
        return list(data["result"])

    def range(self, expr: str, seconds: int) -> list[dict[str, Any]]:
        data = self.get(
            "/api/v1/query_range",
            query=expr,
            start=str(self.anchor - seconds),
            end=str(self.anchor),
            step=str(STEP_SECONDS),
        )
        return list(data["result"])


@pytest.fixture(scope="module")
def kit_prometheus(scrape: Scrape, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KitPrometheus]:
    try:
        _, promtool = require_binaries()
    except PrometheusUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    workdir = tmp_path_factory.mktemp("kit-prometheus")
    anchor = int(time.time())
    source = workdir / "series.om"
    source.write_text(history_openmetrics(scrape.families, anchor))
    done = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(workdir / "tsdb")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    server = PrometheusServer(workdir)
    try:
        server.start()
    except PrometheusUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    profiles = tuple(
        sorted({v for f in scrape.families for _, labels in f.samples for k, v in labels if k == "profile"})
    )
    yield KitPrometheus(server.url, anchor, profiles)
    server.stop()


def concrete(expr: str, kit: KitPrometheus) -> str:
    """A dashboard query as Grafana sends it: variables replaced (a multi-value regex for ``$profile``)."""
    replaced = (
        expr.replace("$__rate_interval", "2m")
        .replace("$profile", "(" + "|".join(kit.profiles) + ")")
        .replace("$job", JOB)
    )
    assert "$" not in replaced, f"a variable the test does not replace: {replaced}"
    return replaced


def parse_duration(text: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([smh])", text))


@pytest.mark.prometheus
@pytest.mark.parametrize(("title", "target"), TARGETS, ids=[f"{title}-{t['refId']}" for title, t in TARGETS])
def test_every_dashboard_query_returns_series(kit_prometheus: KitPrometheus, title: str, target: dict) -> None:
    result = kit_prometheus.instant(concrete(target["expr"], kit_prometheus))

    assert result, f"{title}: {target['expr']} returned nothing"


@pytest.mark.prometheus
def test_the_dashboard_variables_find_their_values(kit_prometheus: KitPrometheus) -> None:
    for name in ("job", "profile"):
        definition = VARIABLES[name]["definition"]
        match = re.fullmatch(r"label_values\((.+), (\w+)\)", definition)
        assert match, definition
        selector, label = concrete(match.group(1), kit_prometheus), match.group(2)
        values = kit_prometheus.get(f"/api/v1/label/{label}/values", **{"match[]": selector})
        assert values, definition
        assert JOB in values if name == "job" else {"default", "fixed"} <= set(values)


@pytest.mark.prometheus
@pytest.mark.parametrize("rule", ALERTS, ids=[rule["alert"] for rule in ALERTS])
def test_every_alert_fires_on_the_broken_installation_only(kit_prometheus: KitPrometheus, rule: dict) -> None:
    expr = rule["expr"]
    now = kit_prometheus.instant(expr)

    assert {s["metric"].get("namespace") for s in now} == {"broken"}, f"{rule['alert']} at the anchor: {now}"
    hold = parse_duration(rule.get("for", "0s"))
    if hold:
        series = kit_prometheus.range(expr, hold)
        assert all(s["metric"].get("namespace") == "broken" for s in series), "never for the healthy installation"
        firing = {int(float(ts)) for s in series for ts, _ in s["values"]}
        steps = set(range(kit_prometheus.anchor - hold, kit_prometheus.anchor + 1, STEP_SECONDS))
        assert steps <= firing, f"{rule['alert']} would not stay pending for {rule['for']}: {sorted(steps - firing)}"


# ----- what a ServiceMonitor's scrape looks like to Django -----


def test_a_scrape_by_pod_ip_as_a_service_monitor_sends_it_is_answered(client, settings, tmp_path, monkeypatch) -> None:
    from dashboard.extender import runtime as runtime_module

    env = named(kubernetes_documents(), "ConfigMap", "schedlens-env")["data"]
    [web] = [
        c
        for c in named(kubernetes_documents(), "StatefulSet", "schedlens-web")["spec"]["template"]["spec"]["containers"]
        if c["name"] == "web"
    ]
    pod_ip = {e["name"]: e for e in web["env"]}["POD_IP"]
    assert pod_ip["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}, "the pod's own address, from the API"
    settings.ALLOWED_HOSTS = env["DJANGO_ALLOWED_HOSTS"].split(",") + pod_host("10.244.1.7")
    settings.SCHEDLENS_SPOOL_DIR = tmp_path / "spool"
    settings.SCHEDLENS_INGEST_IN_PROCESS = False
    settings.SCHEDLENS_CONFIG = ""
    settings.SCHEDLENS_CLUSTER_FILE = ""
    settings.SCHEDLENS_CLUSTER_SOURCE = "none"
    settings.SCHEDLENS_TRAFFIC_BACKEND = "inprocess"
    runtime = runtime_module.Runtime()
    monkeypatch.setattr(runtime_module, "_runtime", runtime)
    try:
        response = client.get("/metrics", HTTP_HOST="10.244.1.7:8000")
    finally:
        runtime.spool.close()

    assert response.status_code == 200


def test_the_server_starts_its_workers_metrics_afresh(tmp_path, monkeypatch) -> None:
    """A container restarted in its pod finds its last run's files in the emptyDir: gunicorn empties it at start."""
    from dashboard import gunicorn_conf

    stale = tmp_path / "counter_4242.db"
    stale.write_bytes(b"old counts")
    (tmp_path / "keep.txt").write_text("not ours", encoding="utf-8")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    gunicorn_conf.on_starting(None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
    web = named(kubernetes_documents(), "StatefulSet", "schedlens-web")["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "PROMETHEUS_MULTIPROC_DIR", "value": "/tmp/prometheus-multiproc"} in web["env"]
