"""``/api/v1/replays/``: start a replay, read its progress and report; refused input names the field."""

from __future__ import annotations

from unittest import mock

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from dashboard.replays.models import HistoryReplay, ReplayStatus
from dashboard.replays.services import REPLAY_TASK, history_replay_run

pytestmark = pytest.mark.django_db

BAD_YAML = """
profiles:
- name: candidate
  plugins:
    score: {enabled: [{name: NetworkTraffic, weight: 2}]}
  pluginConfig:
  - name: NetworkTraffic
    args: {timeRangeInMinutes: soon}
"""


def test_a_replay_started_through_the_api_is_read_back_with_its_report(api, recorded):
    response = api.post(
        "/api/v1/replays/",
        {"selection": {"last": 20, "profile": "default"}, "candidate_profile": "gpu-aware"},
        format="json",
    )
    assert response.status_code == 202, response.content
    started = response.json()
    assert started["status"] == "queued"
    assert started["progress"] == {"done": 0, "total": None}
    assert response["Location"] == started["url"]
    assert started["created_by"] == "ada-auditor"
    assert started["candidate_scenario"]["label"] == "gpu-aware"

    history_replay_run(started["id"])  # what the runner does

    detail = api.get(f"/api/v1/replays/{started['id']}/").json()
    assert detail["status"] == "done"
    assert detail["error"] == ""
    assert detail["progress"] == {"done": 20, "total": 20}
    report = detail["report"]
    assert report["cycles_replayed"] == 20
    assert report["decisions_changed"]["n"] >= report["decisions_changed"]["k"] > 0
    assert report["figures"]["decisions_changed"]
    assert report["caveats"]
    change = report["sample"][0]
    assert change["what_if"].startswith(f"http://testserver/cycles/{change['cycle_id']}/what-if/?mode=custom")
    assert "w_NodeResourceFitByCR=4" in change["what_if"]
    assert change["cycle"] == f"http://testserver/api/v1/cycles/{change['cycle_id']}/"
    listed = api.get("/api/v1/replays/").json()
    assert [r["id"] for r in listed["results"]] == [started["id"]]
    assert "report" not in listed["results"][0]


def test_a_replay_started_through_the_api_can_name_a_recorded_profile_version(api, recorded):
    from dashboard.models import ProfileVersion

    version = ProfileVersion.objects.filter(profile="default").order_by("-noted_at").first()
    assert version is not None, "the recorded cycles stored their profile's version"

    response = api.post(
        "/api/v1/replays/",
        {"selection": {"last": 5, "profile": "default"}, "candidate_version": version.digest},
        format="json",
    )

    assert response.status_code == 202, response.content
    assert HistoryReplay.objects.get(pk=response.json()["id"]).candidate_version == version.digest
    refused = api.post("/api/v1/replays/", {"candidate_version": "0123456789ab"}, format="json")
    assert refused.status_code == 400
    assert "candidate_version" in refused.json()["field"], refused.json()


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (
            {"candidate_yaml": BAD_YAML},
            "candidate_yaml",
            ["profile 'candidate'", "plugin 'NetworkTraffic'", "field args.timeRangeInMinutes"],
        ),
        ({"candidate_profile": "nope"}, "candidate_profile", ["no configured profile 'nope'"]),
        ({}, "candidate_profile", ["name a configured profile"]),
        ({"candidate_profile": "default", "selection": {"until": "then"}}, "selection.until", ["date"]),
        ({"candidate_profile": "default", "selection": {"last": -3}}, "selection.last", ["greater than or equal"]),
        ({"candidate_profile": "default", "selection": {"node": "UPPER"}}, "selection.node", ["node name"]),
    ],
)
def test_a_replay_that_cannot_start_is_a_400_naming_the_field(api, body, field, words):
    response = api.post("/api/v1/replays/", body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()
    assert error["field"] == field
    for word in words:
        assert word in error["error"]
    assert not HistoryReplay.objects.exists()


def test_only_auditors_start_or_read_replays(recorded):
    outsider = APIClient()
    outsider.force_authenticate(User.objects.create_user("oscar"))
    assert outsider.post("/api/v1/replays/", {"candidate_profile": "default"}, format="json").status_code == 403
    assert outsider.get("/api/v1/replays/").status_code == 403
    assert APIClient().post("/api/v1/replays/", {"candidate_profile": "default"}, format="json").status_code == 401


def test_starting_has_its_own_budget(api, settings, recorded):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "replay-start": "1/hour"},
    }
    body = {"candidate_profile": "default", "selection": {"last": 1}}
    assert [api.post("/api/v1/replays/", body, format="json").status_code for _ in range(2)] == [202, 429]
    assert api.get("/api/v1/replays/").status_code == 200, "reading keeps the user budget"


def test_the_celery_runner_queues_the_task_once_the_row_is_committed(
    api, settings, recorded, django_capture_on_commit_callbacks
):
    settings.SCHEDLENS_REPLAY_RUNNER = "celery"
    with mock.patch("celery.current_app.send_task") as send, django_capture_on_commit_callbacks(execute=True):
        response = api.post("/api/v1/replays/", {"candidate_profile": "default"}, format="json")
        assert not send.called  # not before the commit
    assert response.status_code == 202
    send.assert_called_once_with(REPLAY_TASK, args=[response.json()["id"]], queue=settings.SCHEDLENS_REPLAY_QUEUE)


def test_a_broker_that_refuses_leaves_the_replay_failed_saying_why(
    api, settings, recorded, django_capture_on_commit_callbacks
):
    settings.SCHEDLENS_REPLAY_RUNNER = "celery"
    with (
        mock.patch("celery.current_app.send_task", side_effect=ConnectionError("redis down")),
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = api.post("/api/v1/replays/", {"candidate_profile": "default"}, format="json")
    replay = HistoryReplay.objects.get(pk=response.json()["id"])
    assert replay.status == ReplayStatus.FAILED
    assert "redis down" in replay.error
