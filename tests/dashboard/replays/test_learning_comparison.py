"""The history replay compares traffic learned per workload with the constant on recorded history (issue 32, item 3):
cycles recorded from the verbs, their outcomes read from a real Prometheus by the outcome job, the replay run by its
command.

Prometheus holds seven pods of the Deployment ``shop/api``, each receiving 4 kB/s and sending 2 kB/s: 6 kB/s, 1.8 MB
over the 5-minute query window, where the constant ``assumedBytesPerPod`` is 300 MB. Five of them bind 19 to 17
minutes before the anchor (their 5-minute outcome windows end 14 to 12 minutes before it), one 16 minutes before (no
outcome had ended yet: nothing learned), one 10 minutes before (six outcomes had ended: learned).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from django.core.management import call_command
from django.urls import reverse

from dashboard.outcomes.services import outcomes_refresh
from dashboard.replays.models import HistoryReplay
from dashboard.replays.services import history_replay_run
from scheduler_core.extender.scoring.workload_traffic import MIN_SAMPLES
from tests.support.kube_scheduler import KubeScheduler
from tests.support.outcome_data import deployment_series
from tests.support.prometheus_server import PrometheusServer, Series, start_prometheus

pytestmark = [pytest.mark.prometheus]

LEARNERS = [f"api-6b5c9-{i}" for i in range(MIN_SAMPLES)]
EARLY = "api-6b5c9-early"
LATE = "api-6b5c9-late"
RECEIVE, TRANSMIT = 4_000.0, 2_000.0
CONSTANT = 300e6
LEARNED = (RECEIVE + TRANSMIT) * 300


def api_pod_series(anchor: int) -> tuple[Series, ...]:
    return deployment_series(anchor, [*LEARNERS, EARLY, LATE], receive=RECEIVE, transmit=TRANSMIT)


@pytest.fixture(scope="module")
def anchor() -> int:
    return int(datetime.now(UTC).timestamp())


@pytest.fixture(scope="module")
def api_pods_prometheus(anchor: int, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    server = start_prometheus(api_pod_series(anchor), tmp_path_factory.mktemp("learning-comparison"))
    yield server
    server.stop()


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


@pytest.fixture
def measured(db, settings, api_settings, api_pods_prometheus, kube_scheduler: KubeScheduler, anchor) -> dict[str, int]:
    """The seven pods bound and their outcomes measured; cycle id by pod."""
    settings.PROMETHEUS_URL = api_pods_prometheus.url
    settings.SCHEDLENS_OUTCOME_WINDOWS_MINUTES = [1, 5]
    settings.SCHEDLENS_OUTCOME_GRACE_SECONDS = 30.0
    settings.SCHEDLENS_PROMETHEUS_RETRIES = 0
    cycles: dict[str, int] = {}
    for i, name in enumerate(LEARNERS):
        cycles[name] = kube_scheduler.schedule(at=at(anchor - 19 * 60 + 30 * i), name=name).id
    cycles[EARLY] = kube_scheduler.schedule(at=at(anchor - 16 * 60), name=EARLY).id
    cycles[LATE] = kube_scheduler.schedule(at=at(anchor - 10 * 60), name=LATE).id
    assert outcomes_refresh(now=anchor).updated == len(cycles)
    return cycles


def compare(mode: str, anchor: int) -> dict:
    out = io.StringIO()
    call_command(
        "replay_history",
        "--profile",
        "default",
        "--since",
        at(anchor - 30 * 60).isoformat(),
        "--compare-learning",
        mode,
        "-o",
        "json",
        "--no-progress",
        stdout=out,
    )
    learning = json.loads(out.getvalue())["report"]["learning"]
    assert learning is not None
    return learning


def by_cycle(learning: dict) -> dict[int, dict]:
    return {c["cycle_id"]: c for c in learning["cycles"]}


def test_a_workload_far_from_the_constant_is_estimated_closer_once_learned(measured, anchor):
    learning = compare("on", anchor)

    assert (learning["before"], learning["after"]) == ("constant", "learned")
    assert learning["cycles_compared"] == len(measured)
    late = by_cycle(learning)[measured[LATE]]
    assert late["workload"] == "deployment shop/api"
    assert late["before_assumed"] == {"bytes": CONSTANT, "workload": "deployment shop/api"}  # the constant
    assert late["after_assumed"]["source"] == "learned"
    assert late["after_assumed"]["bytes"] == pytest.approx(LEARNED)
    assert late["after_assumed"]["pods"] == MIN_SAMPLES + 1  # the five and the early pod: their windows had ended
    assert late["measured_pod_bytes"] == pytest.approx(LEARNED)  # 6 kB/s over its 5-minute window
    assert late["before_error"] == pytest.approx((LEARNED - CONSTANT) / CONSTANT)
    assert late["after_error"] == pytest.approx(0.0, abs=1e-6)
    # Only the late pod is assumed learned traffic: the others bound before five outcomes had ended.
    assert learning["before_side"]["sources"] == {"constant": len(measured)}
    assert learning["after_side"]["sources"] == {"constant": len(measured) - 1, "learned": 1}
    before, after = learning["before_side"]["error"], learning["after_side"]["error"]
    assert before["pods"] == after["pods"] == len(measured)
    assert after["mean_abs"] < before["mean_abs"]
    assert before["mean_abs"] - after["mean_abs"] == pytest.approx(abs(late["before_error"]) / len(measured))
    assert set(learning["figures"]) == {"assumed", "herd", "changed", "error", "quietest"}


def test_no_outcome_counts_before_its_window_ended(measured, anchor):
    """The early pod's cycle comes after the five learners' binds but before their windows ended: nothing is learned
    for it, though their outcomes are in the database when the replay runs."""
    learning = compare("on", anchor)

    early = by_cycle(learning)[measured[EARLY]]
    assert early["after_assumed"] == {"bytes": CONSTANT, "workload": "deployment shop/api"}  # source: the constant
    assert early["after_error"] == early["before_error"]


def test_the_reverse_compares_learned_traffic_back_to_the_constant_and_prints_every_figure(measured, anchor):
    learning = compare("off", anchor)
    assert (learning["before"], learning["after"]) == ("learned", "constant")
    late = by_cycle(learning)[measured[LATE]]
    assert late["before_assumed"]["source"] == "learned"
    assert late["after_assumed"] == {"bytes": CONSTANT, "workload": "deployment shop/api"}

    out = io.StringIO()
    call_command(
        "replay_history",
        "--profile",
        "default",
        "--since",
        at(anchor - 30 * 60).isoformat(),
        "--compare-learning",
        "off",
        "--no-progress",
        stdout=out,
    )
    text = out.getvalue()
    assert "Learned traffic against the constant (learned → constant)" in text
    assert "learned from 6 pods of deployment shop/api, p90 over the last 7 days" in text
    assert "fallback: the constant assumedBytesPerPod" in text


def test_an_unknown_comparison_is_refused_naming_the_flag(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--compare-learning"):
        call_command("replay_history", "--profile", "default", "--compare-learning", "maybe", "--no-progress")


def test_the_replay_page_starts_the_comparison_and_shows_each_pods_assumed_bytes_and_error(
    measured, anchor, client, django_user_model
):
    client.force_login(django_user_model.objects.create_user("olga-operator"))
    form = {
        "candidate_source": "profile",
        "candidate_profile": "default",
        "since": at(anchor - 30 * 60).strftime("%Y-%m-%dT%H:%M:%S"),
        "compare_learning": "on",
    }
    started = client.post(reverse("ui:replays"), form)
    assert started.status_code == 303
    replay = HistoryReplay.objects.get()
    assert replay.compare_learning == "on"
    history_replay_run(replay.pk)

    page = client.get(reverse("ui:replay", args=[replay.pk])).content.decode()

    section = page[page.index('id="replay-learning"') :]
    assert "Learned traffic against the constant: constant → learned" in section
    late = section[section.index(f'data-cycle="{measured[LATE]}"') :]
    late = late[: late.index("</tr>")]
    assert "learned from 6 pods of deployment shop/api, p90 over the last 7 days" in late
    assert "fallback: the constant assumedBytesPerPod" in late
    assert "−99.4 %" in late or "-99.4 %" in late  # (1.8 MB − 300 MB) / 300 MB
    assert "+0.0 %" in late


def test_the_replay_page_refuses_an_unknown_comparison_beside_its_field(db, client, django_user_model):
    client.force_login(django_user_model.objects.create_user("olga-operator"))
    form = {"candidate_source": "profile", "candidate_profile": "default", "compare_learning": "maybe"}

    page = client.post(reverse("ui:replays"), form)

    assert page.status_code == 200
    assert "is not one of: on, off" in page.content.decode().split('id="error-compare_learning"')[1][:200]


def signed_in(client, django_user_model):  # type: ignore[no-untyped-def]
    client.force_login(django_user_model.objects.create_user("olga-operator"))
    return client


def what_if(client, cycle_id: int, learning: str) -> str:  # type: ignore[no-untyped-def]
    page = client.get(reverse("ui:what-if", args=[cycle_id]), {"learning": learning})
    assert page.status_code == 200
    return page.content.decode()


def test_the_what_if_toggles_learning_for_one_decision_and_shows_where_the_assumed_bytes_come_from(
    measured, anchor, client, django_user_model
):
    client = signed_in(client, django_user_model)

    page = what_if(client, measured[LATE], "on")

    figures = page[page.index('id="whatif-learning-figures"') :]
    learned = figures[figures.index('data-assumed="learned"') :]
    assert "learned from 6 pods of deployment shop/api, p90 over the last 7 days" in learned[: learned.index("</div>")]
    constant = figures[figures.index('data-assumed="constant"') :]
    assert "fallback: the constant assumedBytesPerPod" in constant[: constant.index("</div>")]


def test_learning_moves_a_decision_the_constants_herd_bytes_pushed_off_the_quietest_node(
    measured, anchor, client, django_user_model, kube_scheduler, settings
):
    """Binds weigh for 120 s. A pod decided 110 s after the late pod's bind to node-2 sees that bind at 1/12 of its
    assumed bytes: 300 MB / 12 ≈ 25 MB on node-2 under the constant (node-3, 1.2 MB measured, is then the quietest),
    1.8 MB / 12 = 150 kB learned (node-2, 1.0 MB measured, stays the quietest)."""
    settings.SCHEDLENS_TRAFFIC_REFRESH_SECONDS = 120.0
    probe = kube_scheduler.schedule(at=at(anchor - 10 * 60 + 110), name="probe-1", bind=False)
    assert probe.preferred_node == "node-2"  # recorded without any herd (a fresh extender per cycle)
    client = signed_in(client, django_user_model)

    constant = what_if(client, probe.id, "off")
    assert "Our highest score would move from <strong>node-2</strong> to <strong>node-3</strong>" in constant
    learned = what_if(client, probe.id, "on")
    assert "Our highest score would stay on <strong>node-2</strong>" in learned

    row = learned[learned.index('<tr data-node="node-2">') :]
    row = row[: row.index("</tr>")]
    assert "25.0 MB" in row  # the constant's herd bytes
    assert "150.2 kB" in row  # learned: 1.8 MB × (1 − 109.99 s / 120 s), the bind 10 ms after its cycle


def test_the_comparison_counts_the_decision_learning_moves_back_to_the_quietest_node(
    measured, anchor, kube_scheduler, settings
):
    settings.SCHEDLENS_TRAFFIC_REFRESH_SECONDS = 120.0  # as above: binds weigh for 120 s
    probe = kube_scheduler.schedule(at=at(anchor - 10 * 60 + 110), name="probe-1", bind=False)

    learning = compare("on", anchor)

    assert learning["changed"]["k"] == 1
    assert learning["changed"]["n"] == len(measured) + 1
    moved = learning["cycles"][0]  # changed cycles are listed first
    assert (moved["cycle_id"], moved["before_node"], moved["after_node"]) == (probe.id, "node-3", "node-2")
    node_2 = next(n for n in moved["nodes"] if n["node"] == "node-2")
    assert node_2["binds"] == 1
    # The bind ends its cycle about 10 ms after it started: 110 s less that, of 120.
    assert node_2["herd_before"] == pytest.approx(300e6 * (1 - 109.99 / 120), rel=1e-4)
    assert node_2["herd_after"] == pytest.approx(LEARNED * (1 - 109.99 / 120), rel=1e-4)
    assert moved["measured_pod_bytes"] is None  # not bound: no outcome, no error
    assert moved["before_error"] is moved["after_error"] is None


def test_the_what_if_refuses_an_unknown_learning_choice_naming_it(measured, client, django_user_model):
    client = signed_in(client, django_user_model)

    page = what_if(client, measured[LATE], "maybe")

    assert "learning: must be on (learned traffic) or off (the constant), got &#x27;maybe&#x27;" in page
    assert 'id="whatif-learning-figures"' not in page


def test_the_api_starts_the_comparison_and_serves_it_with_the_source_of_each_assumed_figure(measured, anchor, api):
    started = api.post(
        reverse("api:replay-list"),
        {
            "selection": {"since": at(anchor - 30 * 60).isoformat()},
            "candidate_profile": "default",
            "compare_learning": "on",
        },
        format="json",
    )
    assert started.status_code == 202, started.content
    assert started.json()["compare_learning"] == "on"
    history_replay_run(started.json()["id"])

    learning = api.get(started.json()["url"]).json()["report"]["learning"]

    late = next(c for c in learning["cycles"] if c["cycle_id"] == measured[LATE])
    assert late["after_assumed"]["text"] == "learned from 6 pods of deployment shop/api, p90 over the last 7 days"
    assert late["after_assumed"]["bytes_per_second"] == pytest.approx(RECEIVE + TRANSMIT)
    assert late["before_assumed"]["source"] == "constant"
    assert late["before_assumed"]["text"] == "fallback: the constant assumedBytesPerPod"
    assert learning["after_side"]["error"]["pods"] == len(measured)


def test_the_api_refuses_an_unknown_comparison_naming_the_field(db, api):
    refused = api.post(
        reverse("api:replay-list"), {"candidate_profile": "default", "compare_learning": "maybe"}, format="json"
    )
    assert refused.status_code == 400
    assert refused.json()["field"] == "compare_learning"
