"""The observability kit's Prometheus alert rules and their copies.

- The rules file passes ``promtool check rules``; its copies (the Helm chart's ``files/``, the kustomize
  PrometheusRule) are the same rules.
- Every alert says how bad it is and what to check, and the alerts cover what an operator must act on.

The other parts of the kit: ``test_observability_dashboard.py`` (the Grafana dashboard),
``test_observability_monitors.py`` (ServiceMonitor and PrometheusRule objects, kustomize and Helm) and
``test_observability_scrape.py`` (the metrics a real scrape exports, every query and alert run by Prometheus).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.deploy.manifests import DEPLOY, load_documents
from tests.deploy.observability import (
    ALERTS,
    CHART_RULES_PATH,
    MONITORING,
    RULES,
    RULES_PATH,
    SEVERITIES,
    alert_exprs,
    metric_names,
    parse_duration,
)
from tests.support.prometheus_server import PrometheusUnavailable, require_binaries

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
