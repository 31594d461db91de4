"""The history-replay pages through Django's test client: the start form (field errors beside their
field, never a 500), the list, the progress fragment htmx polls, and a finished replay's report with the numbers it
follows from and the links to each changed decision's what-if with the candidate's settings.

The cycles are recorded through the real verbs (``tests.support.recording``): node-1..3 pass the demo profile's filters
with 1.0 / 1.2 / 1.4 MB over 5 minutes (3.3 / 4.0 / 4.7 kB/s) and node-3 holds the pod's image, so the demo profile
prefers node-3; without ImageLocality, NetworkTraffic's preference for the quietest node-1 wins.
"""

from __future__ import annotations

import html
import json
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from dashboard.replays.models import HistoryReplay, ReplayStatus
from dashboard.replays.services import history_replay_run, history_replay_start
from dashboard.ui.middleware import POLICY
from dashboard.ui.replay_presenters import what_if_link
from dashboard.ui.replay_views import MAX_FORM_BYTES
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.history_replay.scenarios import candidate_description
from tests.support.recording import PROFILES, Recorder, make_pod

pytestmark = pytest.mark.django_db

FIVE = ["node-1", "node-2", "node-3", "node-4", "node-5"]
DEMO_YAML = PROFILES.read_text()
WITHOUT_IMAGE_LOCALITY = DEMO_YAML.replace(", {name: ImageLocality, weight: 1}", "")
"""The demo profiles with the default profile's ImageLocality removed."""
TIGHT_THRESHOLD = DEMO_YAML.replace("{maxBytesPerSecond: 125000000,", "{maxBytesPerSecond: 3500,")
"""The default profile's TrafficThreshold at 3.5 kB/s: node-2 (4.0 kB/s) and node-3 (4.7 kB/s) are rejected."""


def text(response) -> str:
    return response.content.decode()


def error_of(body: str, field: str) -> str:
    """The message drawn beside ``field`` (empty when there is none)."""
    found = re.search(rf'<(?:span|p) class="field-error" id="error-{field}"[^>]*>(.*?)</(?:span|p)>', body, re.S)
    return found.group(1) if found else ""


def error_general(body: str) -> str:
    found = re.search(r'<div class="error" role="alert" id="replay-form-errors">(.*?)</div>', body, re.S)
    return found.group(1) if found else ""


@pytest.fixture
def replays_settings(dashboard_settings):
    dashboard_settings.SCHEDLENS_REPLAY_RUNNER = "none"  # the tests run each replay themselves
    return dashboard_settings


@pytest.fixture
def six_cycles(replays_settings, recorder: Recorder) -> list:
    return [recorder.schedule(make_pod(f"web-{i}", "shop"), nodes=FIVE) for i in range(6)]


def start(client, **fields) -> object:
    data = {"candidate_source": "profile", "candidate_profile": "default", "last": "", **fields}
    return client.post(reverse("ui:replays"), data)


def finished(replay_id: int) -> HistoryReplay:
    return history_replay_run(replay_id)


# --- login and CSP ------------------------------------------------------------------------------------------------


def test_the_replay_pages_require_a_login(client, replays_settings):
    replay = history_replay_start(selection={"last": "5"}, candidate_profile="default")
    for url in (
        reverse("ui:replays"),
        reverse("ui:replays-list"),
        reverse("ui:replay", args=[replay.pk]),
        reverse("ui:replay-progress", args=[replay.pk]),
    ):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response.url.startswith("/accounts/login/?next="), url
    response = client.post(reverse("ui:replays"), {"candidate_profile": "default"})
    assert response.status_code == 302
    assert HistoryReplay.objects.count() == 1


def test_the_replay_pages_carry_the_policy_without_inline_script_or_style(signed_in, six_cycles):
    replay = finished(history_replay_start(selection={"last": "10"}, candidate_profile="gpu-aware").pk)
    for url in (reverse("ui:replays"), reverse("ui:replay", args=[replay.pk])):
        response = signed_in.get(url)
        assert response.status_code == 200, url
        assert response["Content-Security-Policy"] == POLICY
        body = text(response)
        assert not re.search(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)", body), f"inline script in {url}"
        assert " style=" not in body, url
        assert " on" + "click=" not in body, url


def test_the_navigation_links_the_replays_page(signed_in, replays_settings):
    body = text(signed_in.get(reverse("ui:history")))
    assert f'href="{reverse("ui:replays")}"' in body
    body = text(signed_in.get(reverse("ui:replays")))
    assert f'<a href="{reverse("ui:replays")}" aria-current="page">Replays</a>' in body


# --- the form ------------------------------------------------------------------------------------------------------


def test_the_form_offers_the_configured_profiles_and_the_history_filters(signed_in, replays_settings):
    body = text(signed_in.get(reverse("ui:replays")))
    for field in ("last", "since", "until", "namespace", "profile", "node", "candidate_yaml", "candidate_file"):
        assert f'name="{field}"' in body, field
    assert '<option value="default">default</option>' in body
    assert '<option value="gpu-aware">gpu-aware</option>' in body
    assert 'enctype="multipart/form-data"' in body
    assert "No replay yet" in body


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"last": "many"}, "last", "must be a whole number of cycles, got &#x27;many&#x27;"),
        ({"last": "0"}, "last", "must be at least 1"),
        ({"since": "2026-01-02T00:00", "until": "2026-01-01T00:00"}, "until", "must be after since"),
        ({"since": "yesterday"}, "since", "Enter a valid date/time."),
        ({"node": "Not A Node"}, "node", "must be a Kubernetes node name"),
        ({"candidate_profile": "nope"}, "candidate_profile", "no configured profile &#x27;nope&#x27;"),
        (
            {"candidate_source": "yaml", "candidate_yaml": DEMO_YAML.replace("weight: 3}", "weight: 0}")},
            "candidate_yaml",
            "profile &#x27;default&#x27;, plugin &#x27;NetworkTraffic&#x27;: field plugins.score.enabled.weight: "
            "must be 1..100, got 0",
        ),
        ({"candidate_source": "yaml", "candidate_yaml": "profiles: ["}, "candidate_yaml", ""),
        (
            {"candidate_source": "yaml", "candidate_yaml": DEMO_YAML},
            "candidate_yaml_profile",
            "candidate_yaml defines 2 profiles: name the one to replay",
        ),
        (
            {"candidate_source": "yaml", "candidate_yaml": DEMO_YAML, "candidate_yaml_profile": "fast"},
            "candidate_yaml_profile",
            "profile &#x27;fast&#x27; is not in candidate_yaml (it defines: default, gpu-aware)",
        ),
        ({"candidate_source": "yaml"}, "candidate_yaml", "paste profile YAML or upload a file"),
        ({"candidate_yaml": DEMO_YAML}, "candidate_source", "profile YAML was given"),
        ({"candidate_source": "somewhere"}, "candidate_source", "must be one of profile, yaml"),
    ],
)
def test_a_refused_replay_shows_the_message_beside_the_field_it_names(
    signed_in, replays_settings, fields, field, message
):
    response = start(signed_in, **fields)
    assert response.status_code == 200
    body = text(response)
    shown = error_of(body, field)
    assert shown, f"no message beside {field}: {re.findall(r'id=.error-[a-z_]+.', body)}"
    assert message in shown
    assert f'aria-describedby="error-{field}"' in body or field == "candidate_source"
    assert HistoryReplay.objects.count() == 0
    # What was typed is drawn again.
    for name, value in fields.items():
        if name in ("last", "namespace", "node", "candidate_yaml_profile"):
            assert f'value="{value}"' in body.replace("&#x27;", "'")


def test_several_refused_fields_are_each_named(signed_in, replays_settings):
    body = text(start(signed_in, last="x", node="Bad Node", candidate_profile="nope"))
    assert "whole number" in error_of(body, "last")
    assert "Kubernetes node name" in error_of(body, "node")
    assert "no configured profile" in error_of(body, "candidate_profile")


def test_an_uploaded_file_and_pasted_yaml_are_refused_together(signed_in, replays_settings):
    upload = SimpleUploadedFile("candidate.yaml", WITHOUT_IMAGE_LOCALITY.encode(), content_type="text/yaml")
    body = text(
        start(signed_in, candidate_source="yaml", candidate_yaml=DEMO_YAML, candidate_file=upload,
              candidate_yaml_profile="default")
    )  # fmt: skip
    assert "not both" in error_of(body, "candidate_file")
    assert HistoryReplay.objects.count() == 0


def test_a_file_that_is_not_text_is_refused_beside_the_file_field(signed_in, replays_settings):
    upload = SimpleUploadedFile("candidate.yaml", b"\xff\xfe\x00binary", content_type="application/octet-stream")
    body = text(start(signed_in, candidate_source="yaml", candidate_file=upload))
    assert "UTF-8" in error_of(body, "candidate_file")


def test_a_form_larger_than_the_page_reads_is_refused_unread(signed_in, replays_settings):
    response = start(signed_in, candidate_source="yaml", candidate_yaml="#" * (MAX_FORM_BYTES + 1))
    assert response.status_code == 413
    assert "at most 576 KiB are read (profile YAML: at most 256 KiB)" in error_general(text(response))
    assert HistoryReplay.objects.count() == 0
    # Within the bound, the service's own limit names the field.
    body = text(start(signed_in, candidate_source="yaml", candidate_yaml="#" * (256 * 1024 + 1)))
    assert "at most 256 KiB of YAML" in error_of(body, "candidate_yaml")


def test_an_uploaded_profile_starts_a_replay_of_that_yaml(signed_in, operator, replays_settings):
    upload = SimpleUploadedFile("candidate.yaml", WITHOUT_IMAGE_LOCALITY.encode(), content_type="text/yaml")
    response = start(signed_in, candidate_source="yaml", candidate_file=upload, candidate_yaml_profile="default")
    replay = HistoryReplay.objects.get()
    assert response.status_code == 303
    assert response.url == reverse("ui:replay", args=[replay.pk])
    assert replay.candidate_source == "yaml"
    assert replay.candidate_yaml == WITHOUT_IMAGE_LOCALITY
    assert replay.created_by == operator.username


def test_the_selection_is_kept_as_given(signed_in, replays_settings):
    start(signed_in, last="25", namespace="shop", profile="default", node="node-3",
          since="2026-01-01T00:00:00", until="2026-02-01T00:00:00", candidate_profile="gpu-aware")  # fmt: skip
    replay = HistoryReplay.objects.get()
    assert replay.selection == {
        "since": "2026-01-01T00:00:00+00:00",
        "until": "2026-02-01T00:00:00+00:00",
        "last": 25,
        "namespace": "shop",
        "profile": "default",
        "node": "node-3",
    }
    assert replay.candidate_profile == "gpu-aware"
    assert replay.status == ReplayStatus.QUEUED


# --- progress -------------------------------------------------------------------------------------------------------


def test_the_page_polls_its_progress_until_the_replay_is_finished(signed_in, six_cycles):
    response = start(signed_in, last="10", candidate_source="yaml", candidate_yaml=WITHOUT_IMAGE_LOCALITY,
                     candidate_yaml_profile="default")  # fmt: skip
    replay = HistoryReplay.objects.get()
    page = text(signed_in.get(response.url))
    poll = reverse("ui:replay-progress", args=[replay.pk])
    assert f'hx-get="{poll}" hx-trigger="every 2s"' in page
    assert "Queued" in page
    assert "SCHEDLENS_REPLAY_RUNNER=none" in page

    HistoryReplay.objects.filter(pk=replay.pk).update(status=ReplayStatus.RUNNING, progress_done=2, progress_total=6)
    fragment = text(signed_in.get(poll))
    assert fragment.startswith('<div id="replay-body" data-status="running"')
    assert 'hx-trigger="every 2s"' in fragment
    assert "2 of 6 cycles (33 %)" in fragment
    assert '<progress value="2" max="6">' in fragment

    finished(replay.pk)
    fragment = text(signed_in.get(poll))
    assert 'data-status="done"' in fragment
    assert "hx-trigger" not in fragment  # the poller is gone: htmx stops asking
    assert "6 of 6 cycles (100 %)" in fragment
    assert 'id="placements-chart" data-chart="' in fragment


def test_the_list_shows_each_replay_and_polls_only_while_one_is_unfinished(signed_in, operator, six_cycles):
    done = finished(history_replay_start(selection={"last": "10", "namespace": "shop"}, candidate_profile="gpu-aware",
                                         created_by="olga").pk)  # fmt: skip
    body = text(signed_in.get(reverse("ui:replays")))
    row = re.search(rf'<tr data-id="{done.pk}" data-status="done">(.*?)</tr>', body, re.S).group(1)
    assert f'href="{reverse("ui:replay", args=[done.pk])}"' in row
    assert "Done" in row
    assert "6 of 6 cycles (100 %)" in row
    assert "gpu-aware" in row
    assert "configured" in row
    assert "the last 10 cycles, namespace shop" in row
    assert "olga" in row
    assert "hx-trigger" not in body

    queued = history_replay_start(selection={"last": "3"}, candidate_profile="default", candidate_yaml="")
    body = text(signed_in.get(reverse("ui:replays")))
    assert f'hx-get="{reverse("ui:replays-list")}" hx-trigger="every 2s"' in body
    assert body.index(f'data-id="{queued.pk}"') < body.index(f'data-id="{done.pk}"')  # newest first
    fragment = text(signed_in.get(reverse("ui:replays-list")))
    assert fragment.startswith('<section id="replay-list"')
    assert "hx-trigger" in fragment


def test_a_failed_replay_says_why(signed_in, replays_settings):
    replay = history_replay_start(selection={"last": "3"}, candidate_profile="default")
    HistoryReplay.objects.filter(pk=replay.pk).update(status=ReplayStatus.FAILED, error="SelectionTooLarge: narrow it")
    body = text(signed_in.get(reverse("ui:replay", args=[replay.pk])))
    assert "The replay failed: SelectionTooLarge: narrow it" in body
    assert "hx-trigger" not in body


def test_an_unknown_replay_is_a_404_and_an_unreadable_report_is_said_not_raised(signed_in, replays_settings):
    assert signed_in.get(reverse("ui:replay", args=[999999])).status_code == 404
    assert signed_in.get(reverse("ui:replay-progress", args=[999999])).status_code == 404
    replay = history_replay_start(selection={"last": "3"}, candidate_profile="default")
    HistoryReplay.objects.filter(pk=replay.pk).update(status=ReplayStatus.DONE, report={"cycles_replayed": "many"})
    response = signed_in.get(reverse("ui:replay", args=[replay.pk]))
    assert response.status_code == 200
    assert "the stored report cannot be read" in text(response)


# --- the report -------------------------------------------------------------------------------------------------------


def figure(body: str, key: str) -> str:
    found = re.search(rf'<div data-figure="{key}">(.*?)</div>', body, re.S)
    assert found, key
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", found.group(1))).strip()


def test_a_finished_replay_shows_the_numbers_of_its_report(signed_in, six_cycles):
    replay = finished(
        history_replay_start(selection={"last": "10"}, candidate_profile="default",
                             candidate_yaml=WITHOUT_IMAGE_LOCALITY).pk
    )  # fmt: skip
    report = replay.report
    assert report["decisions_changed"]["k"] == 6  # what the page must show
    body = text(signed_in.get(reverse("ui:replay", args=[replay.pk])))

    assert "<strong>6</strong> of the 6 decisions replayed would have preferred another node." in body
    changed = figure(body, "decisions_changed")
    assert "6 of 6 (100.0 %)" in changed
    assert "6 = 6 moved to another node + 0 left without a feasible node + 0 given one" in changed
    assert "n = 6 replayed − 0 with no preferred node before or after" in changed
    assert report["decisions_changed"]["basis"] in changed.replace("&#x27;", "'")
    assert "6 replayed + 0 skipped = 6 selected" in figure(body, "cycles_replayed")
    assert "tied after = tied before + created − removed: 0 = 0 + 0 − 0" in figure(body, "ties")

    # Placements: node-3 before, node-1 after, and the totals they add up to.
    rows = dict(re.findall(r'<tr data-node="(node-\d)"[^>]*>(.*?)</tr>', body, re.S))
    assert set(rows) == {"node-1", "node-3"}
    assert re.search(r'class="num before">0<.*class="num after">6<.*class="num delta">\+6<', rows["node-1"], re.S)
    assert re.search(r'class="num before">6<.*class="num after">0<.*class="num delta">-6<', rows["node-3"], re.S)
    assert "3.3 kB/s" in rows["node-1"]
    assert "20.0 kB/s summed over 6 placements / 6" in rows["node-1"]
    assert "4.7 kB/s" in rows["node-3"]
    assert "28.0 kB/s summed over 6 placements / 6" in rows["node-3"]
    assert '<td class="num" id="placements-before-total">6</td>' in body
    assert '<td class="num" id="placements-after-total">6</td>' in body
    assert "Σ before − Σ after = 6 − 6 = 0 = 0 left without a feasible node − 0 given one" in body

    chart = json.loads(html.unescape(re.search(r'<canvas id="placements-chart" data-chart="([^"]*)"', body).group(1)))
    assert chart["labels"] == ["node-1", "node-3"]
    assert chart["before"] == [0, 6]
    assert chart["after"] == [6, 0]
    assert chart["after_label"] == "after (default)"

    # Traffic balance, with what it follows from.
    assert (
        "Placements with a traffic figure went to one node before (node-3, 4.7 kB/s on average) and one after "
        "(node-1, 3.3 kB/s): there is no spread across nodes to compare." in body
    )
    balance = dict(re.findall(r'<tr data-figure="([a-z_]+)"><th scope="row">.*?</th>(.*?)</tr>', body, re.S))
    assert "4.7 kB/s (node-3)" in balance["max"]
    assert "3.3 kB/s (node-1)" in balance["max"]
    assert '<td class="num" id="quietest-before">0 of 6 (0.0 %)</td>' in body
    assert '<td class="num" id="quietest-after">6 of 6 (100.0 %)</td>' in body
    assert report["balance"]["quietest_chosen_after"]["basis"] in body.replace("&#x27;", "'")

    # No new rejection, the caveats, the candidate as replayed.
    assert 'id="replay-no-rejections"' in body
    for caveat in report["caveats"]:
        assert caveat in body.replace("&#x27;", "'").replace("&quot;", '"')
    assert "NetworkTraffic × 3, NodeResourceFitByCR × 1" in body
    assert "profile YAML given with the replay" in body


def test_the_traffic_balance_is_the_spread_of_the_nodes_means_it_lists(signed_in, replays_settings, recorder):
    for i in range(3):
        recorder.schedule(make_pod(f"web-{i}", "shop"), nodes=FIVE)  # node-3 (its image) before, node-1 after
    for i in range(2):
        recorder.schedule(make_pod(f"api-{i}", "shop"), nodes=["node-1", "node-2"])  # node-1 both ways
    replay = finished(
        history_replay_start(selection={"last": "10"}, candidate_profile="default",
                             candidate_yaml=WITHOUT_IMAGE_LOCALITY).pk
    )  # fmt: skip
    before = replay.report["balance"]["before"]
    assert before["nodes"] == 2
    assert round(before["stdev"]) == 667
    body = text(signed_in.get(reverse("ui:replay", args=[replay.pk])))
    assert (
        "The spread of traffic at placement across nodes would be narrower: 0 B/s after against 667 B/s before "
        "(population standard deviation of the mean rate at placement of the 1 node after and the 2 nodes before"
        in body
    )
    balance = dict(re.findall(r'<tr data-figure="([a-z_]+)"><th scope="row">.*?</th>(.*?)</tr>', body, re.S))
    assert re.search(r">4\.0 kB/s<.*>3\.3 kB/s<", balance["mean"], re.S)
    assert "1.40 = 4.7 kB/s / 3.3 kB/s" in balance["max_over_min"]
    assert '<td class="num" id="quietest-before">2 of 5 (40.0 %)</td>' in body
    assert '<td class="num" id="quietest-after">5 of 5 (100.0 %)</td>' in body
    assert "3 = 3 moved to another node" in figure(body, "decisions_changed")


def test_new_rejections_are_listed_by_reason_with_their_counts(signed_in, six_cycles):
    replay = finished(
        history_replay_start(selection={"last": "10"}, candidate_profile="default", candidate_yaml=TIGHT_THRESHOLD).pk
    )
    body = text(signed_in.get(reverse("ui:replay", args=[replay.pk])))
    table = re.search(r'<table class="rejections">(.*?)</table>', body, re.S).group(1)
    row = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", re.search(r"<tbody>(.*?)</tbody>", table, re.S).group(1)))
    assert row.strip() == "TrafficThreshold receive rate above 3.5 kB/s 12 6"  # node-2 and node-3 in 6 cycles
    assert "Nodes feasible → infeasible 12 node-cycles; 0 infeasible → feasible; net -12" in figure(
        body, "feasible_to_infeasible"
    )
    assert "receive rate above 3.5 kB/s" in body  # the sample's why


def test_the_sample_links_carry_the_yaml_candidates_settings_and_the_what_if_agrees(signed_in, six_cycles):
    replay = finished(
        history_replay_start(selection={"last": "10"}, candidate_profile="default",
                             candidate_yaml=WITHOUT_IMAGE_LOCALITY).pk
    )  # fmt: skip
    body = text(signed_in.get(reverse("ui:replay", args=[replay.pk])))
    links = re.findall(r'<tr data-cycle="(\d+)">.*?<a class="what-if" href="([^"]+)"', body, re.S)
    assert [int(c) for c, _ in links] == [c.id for c in six_cycles]
    cycle_id, href = links[0]
    url = urlsplit(href.replace("&amp;", "&"))
    assert url.path == reverse("ui:what-if", args=[int(cycle_id)])
    params = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert params == {
        "mode": "custom",
        "scale": "spread",
        "w_ImageLocality": "0",
        "w_NetworkTraffic": "3",
        "w_NodeResourceFitByCR": "1",
        "f_NodeResourceFitByCR": "on",
        "f_TrafficThreshold": "on",
        "threshold_mbps": "125",
    }
    assert params == replay.report["candidate"]["what_if_params"]
    # The what-if those settings open finds what the replay found.
    what_if = text(signed_in.get(href.replace("&amp;", "&")))
    assert "Our highest score would move from <strong>node-3</strong> to <strong>node-1</strong>." in what_if
    assert f'href="{reverse("ui:decision", args=[int(cycle_id)])}"' in body


def test_the_sample_links_name_a_configured_candidate_by_profile(signed_in, six_cycles):
    replay = finished(history_replay_start(selection={"last": "10"}, candidate_profile="gpu-aware").pk)
    body = text(signed_in.get(reverse("ui:replay", args=[replay.pk])))
    hrefs = re.findall(r'<a class="what-if" href="([^"]+)"', body)
    assert len(hrefs) == replay.report["decisions_changed"]["k"] > 0
    first = replay.report["sample"][0]
    assert hrefs[0] == f"{reverse('ui:what-if', args=[first['cycle_id']])}?mode=profile&amp;profile=gpu-aware"
    what_if = text(signed_in.get(hrefs[0].replace("&amp;", "&")))
    assert (
        f"Our highest score would move from <strong>{first['before_node']}</strong> to "
        f"<strong>{first['after_node']}</strong>." in what_if
    )


def test_a_configured_candidate_changed_since_the_replay_links_its_replayed_settings():
    profiles = load_profiles(DEMO_YAML)
    replayed = candidate_description(profiles["gpu-aware"].describe(), source="profile")
    same = what_if_link(replayed, configured={"gpu-aware": profiles["gpu-aware"].describe()})
    assert same.mode == "profile"
    assert same.params == {"mode": "profile", "profile": "gpu-aware"}
    changed = load_profiles(
        DEMO_YAML.replace("{name: NodeResourceFitByCR, weight: 4}", "{name: NodeResourceFitByCR, weight: 2}")
    )
    link = what_if_link(replayed, configured={"gpu-aware": changed["gpu-aware"].describe()})
    assert link.mode == "custom"
    assert link.params == replayed.what_if_params
    assert "has changed since this replay" in link.note
    gone = what_if_link(replayed, configured={})
    assert gone.mode == "custom"


def test_a_recorded_version_is_a_candidate_the_form_offers(signed_in, six_cycles, replays_settings):
    version = six_cycles[0].profile_version
    assert version, "the recorder's cycles carry their version"
    body = text(signed_in.get(reverse("ui:replays")))
    assert f'<option value="{version}">default {version} (6 cycles)</option>' in body

    refused = start(signed_in, candidate_source="version", candidate_version="")
    assert "choose a recorded profile version" in error_of(text(refused), "candidate_version")

    response = start(signed_in, candidate_source="version", candidate_version=version, last="10")
    assert response.status_code == 303
    replay = finished(HistoryReplay.objects.get().pk)
    assert (replay.candidate_source, replay.candidate_version, replay.candidate_profile) == (
        "version",
        version,
        "default",
    )
    assert replay.report["decisions_changed"]["k"] == 0
    assert replay.report["recorded_preferred_differs"] == 0
