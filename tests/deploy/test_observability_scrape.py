"""The observability kit against the app's real metrics and a real Prometheus.

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
- A scrape as a ServiceMonitor sends it (by pod IP) is answered, and the server starts its workers' metrics afresh.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from config.env import pod_host
from dashboard.placements.selectors import WaitingCount
from tests.deploy.manifests import kubernetes_documents, named
from tests.deploy.observability import (
    ALERTS,
    TARGETS,
    VARIABLES,
    alert_exprs,
    dashboard_exprs,
    metric_names,
    parse_duration,
)
from tests.support.prometheus_server import (
    PrometheusServer,
    PrometheusUnavailable,
    _escape_label_value,
    _format_number,
    _format_timestamp,
    require_binaries,
)

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


STUCK = WaitingCount("schedlens-scheduler", "", "kube-scheduler", "Insufficient cpu", pods=1)
STUCK_SINCE = datetime.now(tz=UTC) - timedelta(minutes=3)


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
    """``GET /metrics`` of the app in redis mode after verb calls, with snapshots and refresh statistics in Redis, and
    a pod waiting for a node (the live pending list as the database answers it: this module has no database;
    tests/dashboard/test_metrics.py scrapes the list the placement watcher wrote)."""
    import redis
    from django.conf import settings
    from django.test import Client, override_settings
    from prometheus_client.parser import text_string_to_metric_families

    from dashboard import metrics as metrics_module
    from dashboard import runtime as runtime_module
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
            with pytest.MonkeyPatch.context() as waiting:
                waiting.setattr(metrics_module, "pending_by_reason", lambda: [STUCK])
                waiting.setattr(metrics_module, "pending_longest", lambda: {STUCK.scheduler: STUCK_SINCE})
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
    waiting = next(f for f in scrape.families if f.name == "schedlens_pods_waiting")
    assert waiting.samples == (
        (
            "schedlens_pods_waiting",
            (
                ("profile", ""),
                ("reason", "Insufficient cpu"),
                ("scheduler", "schedlens-scheduler"),
                ("source", "kube-scheduler"),
            ),
        ),
    )


# ----- the scrape's families as history in a real Prometheus -----

STEP_SECONDS = 30
HISTORY_SECONDS = 80 * 60
FUTURE_SECONDS = 10 * 60
SCENARIOS = ("healthy", "broken")
PODS = ("schedlens-web-0", "schedlens-web-1")
JOB = "schedlens"
STALE_PROFILE_VERSION = "0123456789ab"
"""The version one replica of the broken installation still serves: replicas disagree on a profile's rules."""
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
        "schedlens_bind_intents_reconciled_total": lambda: 0.001 if broken else 0.0,  # no alert: recorded anyway
        "schedlens_bind_intent_reconcile_failures_total": lambda: 0.1 if broken else 0.0,
        "schedlens_pod_events_dropped_total": lambda: 0.1 if broken else 0.0,  # no alert: Events are a courtesy
        "schedlens_pod_events_written_total": lambda: VERB_RATE / 3.0,
        "schedlens_pod_events_folded_total": lambda: VERB_RATE / 6.0,  # a burst's pods after its first
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
        "schedlens_profile_version_info": 1.0,  # the broken installation's second pod: another version (below)
        "schedlens_pods_waiting": 3.0 if broken else 0.0,
        "schedlens_pods_waiting_longest_seconds": 1200.0 + elapsed if broken else 30.0 + refreshes % 1 * 15.0,
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
                    if family.name == "schedlens_profile_version_info" and scenario == "broken" and pod == PODS[1]:
                        every["version"] = STALE_PROFILE_VERSION  # a replica still on the profile file before
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
    from dashboard import runtime as runtime_module

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
    from config import gunicorn_conf

    stale = tmp_path / "counter_4242.db"
    stale.write_bytes(b"old counts")
    (tmp_path / "keep.txt").write_text("not ours", encoding="utf-8")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    gunicorn_conf.on_starting(None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
    web = named(kubernetes_documents(), "StatefulSet", "schedlens-web")["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "PROMETHEUS_MULTIPROC_DIR", "value": "/tmp/prometheus-multiproc"} in web["env"]
