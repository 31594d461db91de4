"""Profile versions as recorded facts (issue 31): which exact configuration made each decision.

Each scenario runs a real runtime (``dashboard.runtime.Runtime``, which notes the versions it loads in its spool),
calls the verbs over HTTP as kube-scheduler does, and drains the spool with the real ingester; the profiles file is
then changed (a "rollout": a new runtime), or taken away, and the old cycles must still be read by their own version.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
import socket
from pathlib import Path

import msgspec
import pytest
from django.core.management import call_command
from django.urls import reverse

from dashboard import runtime as runtime_module
from dashboard.audit.chain import audit_chain_verify
from dashboard.models import ProfileVersion, SchedulingCycle, VerbCall
from dashboard.selectors.cycles import cycle_explanations_recomputed
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.traffic import TrafficSnapshot
from tests.support.ingest import ingest_everything
from tests.support.recording import CLUSTER, TRAFFIC, make_pod

pytestmark = pytest.mark.django_db

V1 = """
profiles:
- name: web
  pluginConfig:
  - {name: TrafficThreshold, args: {timeRangeInMinutes: 5}}
  - {name: NetworkTraffic, args: {timeRangeInMinutes: 5}}
"""
V2 = """
profiles:
- name: web
  pluginConfig:
  - {name: TrafficThreshold, args: {timeRangeInMinutes: 10, maxBytesPerSecond: 2000}}
  - {name: NetworkTraffic, args: {timeRangeInMinutes: 10}}
"""
"""The rollout: a 10-minute window, and a threshold (2 kB/s) that node-3's 1.4 MB over 10 minutes exceeds."""
NODES = ["node-1", "node-2", "node-3", "node-4"]
JSON = "application/json"
V1_DIGEST = load_profiles(V1)["web"].version()
V2_DIGEST = load_profiles(V2)["web"].version()


class Served:
    """A replica serving one profiles file: its own runtime (as after a restart), driven over HTTP."""

    def __init__(self, client, settings, monkeypatch, tmp_path: Path, text: str) -> None:
        path = tmp_path / "profiles.yaml"
        path.write_text(text, encoding="utf-8")
        settings.SCHEDLENS_CONFIG = str(path)
        settings.SCHEDLENS_SPOOL_DIR = tmp_path / "spool"
        settings.SCHEDLENS_INGEST_IN_PROCESS = False
        settings.SCHEDLENS_BIND_MODE = "simulated"
        settings.SCHEDLENS_CLUSTER_FILE = ""
        self.client = client
        self.runtime = runtime_module.Runtime()  # notes the versions it loaded in its spool
        self.runtime.extender.cluster = CLUSTER
        for profile in self.runtime.profiles.values():
            for query in profile.traffic_queries():
                self.runtime.traffic.put(TrafficSnapshot(query, dict(TRAFFIC), 1e12, "test"))
        monkeypatch.setattr(runtime_module, "_runtime", self.runtime)

    def schedule(self, name: str) -> dict[str, object]:
        pod = make_pod(name)
        args = {"Pod": pod, "Nodes": None, "NodeNames": NODES}
        filtered = self.client.post("/extender/web/filter", data=msgspec.json.encode(args), content_type=JSON)
        assert filtered.status_code == 200
        passed = filtered.json()["NodeNames"]
        scored = self.client.post(
            "/extender/web/prioritize", data=msgspec.json.encode({**args, "NodeNames": passed}), content_type=JSON
        )
        best = max(scored.json(), key=lambda h: h["Score"])["Host"]
        meta = pod["metadata"]
        binding = {"PodName": name, "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": best}
        bound = self.client.post("/extender/web/bind", data=msgspec.json.encode(binding), content_type=JSON)
        assert bound.status_code == 200
        return {"passed": passed, "node": best}

    def ingest(self) -> None:
        ingest_everything(self.runtime.spool)
        self.runtime.spool.close()


def streamed(response) -> str:
    return b"".join(response.streaming_content).decode()


def cycle_of(name: str) -> SchedulingCycle:
    return SchedulingCycle.objects.get(pod_name=name)


def rolled_out(client, settings, monkeypatch, tmp_path: Path) -> None:
    """Two pods under V1, then the rollout of V2 (a new runtime) and two pods under it, all ingested."""
    first = Served(client, settings, monkeypatch, tmp_path, V1)
    assert first.schedule("old-1")["passed"] == ["node-1", "node-2", "node-3"]
    first.schedule("old-2")
    first.ingest()
    second = Served(client, settings, monkeypatch, tmp_path, V2)
    assert second.schedule("new-1")["passed"] == ["node-1", "node-2"]
    second.schedule("new-2")
    second.ingest()


def test_two_versions_of_one_profile_are_recorded_over_time_each_once(client, settings, monkeypatch, tmp_path):
    rolled_out(client, settings, monkeypatch, tmp_path)

    versions = list(ProfileVersion.objects.filter(profile="web").order_by("noted_at", "id"))
    assert [v.digest for v in versions] == [V1_DIGEST, V2_DIGEST]
    assert versions[0].normalized == load_profiles(V1)["web"].describe()
    assert versions[1].normalized["pluginConfig"]["TrafficThreshold"]["maxBytesPerSecond"] == 2000.0
    assert "maxBytesPerSecond: 2000" in versions[1].yaml, "the YAML as loaded"
    assert all(v.servers == [socket.gethostname()] for v in versions), "the replica that served it"

    assert {c.pod_name: c.profile_version for c in SchedulingCycle.objects.all()} == {
        "old-1": V1_DIGEST,
        "old-2": V1_DIGEST,
        "new-1": V2_DIGEST,
        "new-2": V2_DIGEST,
    }
    calls = VerbCall.objects.filter(cycle__pod_name="old-1")
    assert sorted(c.verb for c in calls) == ["bind", "filter", "prioritize"]
    assert {c.profile_version for c in calls} == {V1_DIGEST}, "every call names the version that answered it"


def test_a_call_s_version_is_sealed_by_the_audit_chain(client, settings, monkeypatch, tmp_path):
    rolled_out(client, settings, monkeypatch, tmp_path)
    assert audit_chain_verify().ok

    call = VerbCall.objects.filter(cycle__pod_name="old-2").order_by("id").first()
    VerbCall.objects.filter(pk=call.pk).update(profile_version=V2_DIGEST)  # "it was decided under the new rules"
    report = audit_chain_verify()
    assert not report.ok
    assert report.first_broken_id == call.pk


def test_an_old_cycle_is_explained_by_its_own_version_after_the_file_changed(
    client, api, auditor, settings, monkeypatch, tmp_path
):
    rolled_out(client, settings, monkeypatch, tmp_path)  # the file now says V2
    old, new = cycle_of("old-1"), cycle_of("new-1")

    why = api.get("/api/v1/why/", {"namespace": "shop", "name": "old-1"}).json()
    assert why["cycle"]["profile_version"] == V1_DIGEST
    terms = why["explanation"]["traffic_terms"]
    assert (terms["window_minutes"], terms["version"], terms["source"]) == (5, V1_DIGEST, "recorded")
    assert (
        api.get("/api/v1/why/", {"namespace": "shop", "name": "new-1"}).json()["explanation"]["traffic_terms"][
            "window_minutes"
        ]
        == 10
    )

    client.force_login(auditor)
    page = html.unescape(client.get(reverse("ui:decision", args=[old.id])).content.decode())
    assert re.search(rf'id="profile-version">.*?{V1_DIGEST}', page, re.S)
    assert f"5 min (profile 'web' version {V1_DIGEST}, as recorded)" in page
    assert "as configured now" not in page

    what_if = html.unescape(client.get(reverse("ui:what-if", args=[old.id])).content.decode())
    # The "before" is V1's threshold (125 MB/s), under which node-3 passed, as recorded: not today's 2 kB/s.
    assert re.search(r'name="threshold_mbps"[^>]*value="125(\.0)?"', what_if)

    rows = list(csv.DictReader(io.StringIO(streamed(api.get("/api/v1/cycles/export.csv")))))
    assert {r["pod_name"]: r["profile_version"] for r in rows} == {
        "old-1": V1_DIGEST,
        "old-2": V1_DIGEST,
        "new-1": V2_DIGEST,
        "new-2": V2_DIGEST,
    }
    exported = [json.loads(line) for line in streamed(api.get("/api/v1/cycles/export.ndjson")).splitlines()]
    old_row = next(r for r in exported if r["id"] == old.id)
    assert old_row["profile_version"] == V1_DIGEST

    recomputed = {cycle.pk: mismatches for cycle, mismatches in cycle_explanations_recomputed()}
    assert recomputed == {c.pk: [] for c in SchedulingCycle.objects.all()}
    out = io.StringIO()
    call_command("verify_explanations", stdout=out)
    assert out.getvalue().startswith("ok: 4 cycles recomputed")
    assert new.profile_version == V2_DIGEST


def test_a_replay_under_the_unchanged_candidate_reproduces_the_record_from_a_process_without_a_profile_file(
    client, settings, monkeypatch, tmp_path
):
    served = Served(client, settings, monkeypatch, tmp_path, V1)
    for k in range(6):
        served.schedule(f"web-{k}")
    served.ingest()
    settings.SCHEDLENS_CONFIG = ""  # no profiles file at all: the built-in default would be another profile

    out, err = io.StringIO(), io.StringIO()
    call_command("replay_history", "--profile", "web", "-o", "json", "--no-progress", stdout=out, stderr=err)
    assert f"replaying its newest recorded version {V1_DIGEST}" in err.getvalue()
    report = json.loads(out.getvalue())["report"]
    assert report["candidate"]["version"] == V1_DIGEST
    assert report["cycles_replayed"] == 6
    assert report["cycles_skipped"] == 0
    assert report["decisions_changed"]["k"] == 0
    assert report["recorded_preferred_differs"] == 0, "every cycle's baseline matches its record"


def test_a_replay_of_both_versions_takes_each_cycle_s_own_version_as_its_baseline(
    client, settings, monkeypatch, tmp_path
):
    rolled_out(client, settings, monkeypatch, tmp_path)
    settings.SCHEDLENS_CONFIG = ""
    out = io.StringIO()
    call_command("replay_history", "--profile-version", V2_DIGEST, "-o", "json", "--no-progress", stdout=out)
    report = json.loads(out.getvalue())["report"]
    assert report["cycles_replayed"] == 4
    assert report["recorded_preferred_differs"] == 0
    # V2's 2 kB/s over a V1 cycle's bytes (over its 5 minutes: 3.3 to 4.7 kB/s) fails the three nodes it passed; the
    # V2 cycles' baseline is V2 itself, so they change nothing.
    assert (report["feasible_to_infeasible"], report["became_unschedulable"]) == (6, 2)


def test_a_cycle_recorded_before_versions_is_skipped_by_a_replay_saying_why(client, settings, monkeypatch, tmp_path):
    served = Served(client, settings, monkeypatch, tmp_path, V1)
    served.schedule("web-0")
    served.ingest()
    SchedulingCycle.objects.update(profile_version="")
    out = io.StringIO()
    call_command("replay_history", "--profile-version", V1_DIGEST, "-o", "json", "--no-progress", stdout=out)
    report = json.loads(out.getvalue())["report"]
    assert report["cycles_replayed"] == 0
    assert report["skipped"] == [{"reason": "recorded before profile versions were kept", "cycles": 1}]


def test_the_profiles_page_lists_each_version_with_the_arg_that_changed(
    client, auditor, settings, monkeypatch, tmp_path
):
    rolled_out(client, settings, monkeypatch, tmp_path)
    client.force_login(auditor)
    page = html.unescape(client.get(reverse("ui:profiles")).content.decode())
    row = re.search(rf'<tr id="version-{V2_DIGEST}">(.*?)</tr>', page, re.S)
    assert row is not None
    lines = re.findall(r"<li[^>]*>(.*?)</li>", row.group(1))
    assert "TrafficThreshold arg maxBytesPerSecond 125000000.0 → 2000.0" in lines, "one line each, as recorded"
    assert "NetworkTraffic arg timeRangeInMinutes 5 → 10" in lines
    assert re.search(r'<td class="num">2</td>', row.group(1)), "the cycles it decided"
    assert f'<tr id="version-{V1_DIGEST}">' in page


def test_the_why_api_names_the_version_with_a_link_to_it(client, api, settings, monkeypatch, tmp_path):
    rolled_out(client, settings, monkeypatch, tmp_path)
    named = api.get("/api/v1/why/", {"namespace": "shop", "name": "old-2"}).json()["profile_version"]
    assert named["digest"] == V1_DIGEST
    assert named["missing"] == ""
    assert named["first_served"] == cycle_of("old-1").started_at.isoformat().replace("+00:00", "Z")
    version = api.get(named["url"]).json()
    assert (version["digest"], version["profile"], version["cycles"]) == (V1_DIGEST, "web", 2)

    after = api.get(f"/api/v1/profile-versions/{V2_DIGEST}/").json()
    assert after["previous"] == V1_DIGEST
    assert {c["path"]: (c["before"], c["after"]) for c in after["changes"]} == {
        "pluginConfig.TrafficThreshold.timeRangeInMinutes": (5, 10),
        "pluginConfig.TrafficThreshold.maxBytesPerSecond": (125000000.0, 2000.0),
        "pluginConfig.NetworkTraffic.timeRangeInMinutes": (5, 10),
    }
    assert api.get("/api/v1/profile-versions/", {"profile": "web"}).json()[0]["digest"] == V1_DIGEST
    assert api.get("/api/v1/profile-versions/0123456789ab/").status_code == 404


def test_the_history_and_the_api_filter_by_version(client, api, auditor, settings, monkeypatch, tmp_path):
    rolled_out(client, settings, monkeypatch, tmp_path)
    listed = api.get("/api/v1/cycles/", {"profile_version": V2_DIGEST}).json()["results"]
    assert sorted(c["pod_name"] for c in listed) == ["new-1", "new-2"]
    SchedulingCycle.objects.filter(pod_name="old-1").update(profile_version="")
    unversioned = api.get("/api/v1/cycles/", {"profile_version": "none"}).json()["results"]
    assert [c["pod_name"] for c in unversioned] == ["old-1"]
    refused = api.get("/api/v1/cycles/", {"profile_version": "v2; drop"})
    assert refused.status_code == 400
    assert "profile_version" in refused.content.decode()

    client.force_login(auditor)
    page = html.unescape(client.get(reverse("ui:history"), {"profile_version": V1_DIGEST}).content.decode())
    assert "old-2" in page
    assert "new-1" not in page
