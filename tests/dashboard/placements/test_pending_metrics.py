"""``/metrics`` counts the waiting pods the placement watcher wrote, per reason, and the longest wait."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dashboard import runtime as runtime_module
from tests.support.fake_kube_api import FakeKubeAPI
from tests.support.pending_pods import OURS, leave_waiting_pods, watch_into_the_list
from tests.support.recording import use_demo_profiles

pytestmark = pytest.mark.django_db


def test_the_scrape_counts_pods_per_reason_with_the_profile_and_the_longest_wait(
    client, settings, tmp_path, monkeypatch
) -> None:
    use_demo_profiles(settings, tmp_path / "spool")
    settings.SCHEDLENS_CLUSTER_SOURCE = "none"
    with FakeKubeAPI() as api:
        leave_waiting_pods(api)
        watch_into_the_list(api)
    runtime = runtime_module.Runtime()
    monkeypatch.setattr(runtime_module, "_runtime", runtime)
    try:
        text = client.get("/metrics").content.decode()
    finally:
        runtime.spool.close()

    waiting = {
        (s.labels["profile"], s.labels["source"], s.labels["reason"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "schedlens_pods_waiting"
    }
    assert waiting[("", "kube-scheduler", "Insufficient cpu")] == 1  # big-cpu: our filter never asked
    assert waiting[("default", "kube-scheduler", "Insufficient memory")] == 1  # web-busy
    assert ("gpu-aware", "kube-scheduler", "Insufficient memory") not in waiting  # gpu-job: ours refused every node
    assert waiting[("default", "schedlens", "receive rate above 125.0 MB/s")] == 1
    assert waiting[("gpu-aware", "schedlens", "node does not enable example.com/gpu")] == 1
    longest = [
        s
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "schedlens_pods_waiting_longest_seconds"
    ]
    assert [s.labels for s in longest] == [{"scheduler": OURS}]
    assert 0 <= longest[0].value < 120
