"""Every dashboard page, as an operator sees it, from cycles recorded through the real verbs."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import timedelta

import pytest
from django.urls import reverse

from dashboard.models import Outcome, SchedulingCycle
from dashboard.ui.middleware import POLICY
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from tests.support.inputs import traffic_store
from tests.support.recording import CLUSTER, PROFILES, Recorder, make_pod

pytestmark = pytest.mark.django_db

PAGES = ["ui:history", "ui:pending", "ui:nodes", "ui:health", "ui:balance"]


def text(response) -> str:
    return response.content.decode()


@pytest.mark.parametrize("name", PAGES)
def test_every_page_sends_an_anonymous_visitor_to_the_login_page(client, name):
    response = client.get(reverse(name))
    assert response.status_code == 302
    assert response.url.startswith("/accounts/login/?next=")


def test_cycle_pages_also_require_a_login(client, recorder):
    cycle = recorder.schedule()
    for name in ("ui:decision", "ui:why-not", "ui:what-if"):
        response = client.get(reverse(name, args=[cycle.id]))
        assert response.status_code == 302, name
        assert "/accounts/login/" in response.url


def test_the_login_page_logs_an_operator_in_and_lands_on_the_history(client, operator):
    page = client.get("/accounts/login/")
    assert page.status_code == 200
    assert "Log in to schedlens" in text(page)
    response = client.post(
        "/accounts/login/", {"username": "olga", "password": "correct horse battery staple", "next": "/"}
    )
    assert response.status_code == 302
    assert client.get(response.url).status_code == 200


@pytest.mark.parametrize("name", PAGES)
def test_pages_carry_a_content_security_policy_without_inline_script(signed_in, recorder, name):
    recorder.schedule()
    response = signed_in.get(reverse(name))
    assert response.status_code == 200
    assert response["Content-Security-Policy"] == POLICY
    assert "script-src 'self';" in POLICY
    assert "unsafe-inline" not in POLICY
    body = text(response)
    assert not re.search(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)", body), "inline script found"
    assert " style=" not in body
    assert " on" + "click=" not in body


def test_the_history_lists_the_newest_cycle_first_with_its_outcome_and_node(signed_in, recorder):
    older = recorder.schedule(make_pod("api-1"))
    newer = recorder.schedule(make_pod("web-2"))
    body = text(signed_in.get("/"))
    assert body.index("web-2") < body.index("api-1")
    assert f'href="/cycles/{newer.id}/"' in body
    assert f'data-id="{older.id}"' in body
    assert "Bound" in body
    assert newer.chosen_node in body


def test_the_history_filters_by_namespace_pod_search_outcome_profile_and_node(signed_in, recorder):
    recorder.schedule(make_pod("web-a", "shop"))
    recorder.schedule(make_pod("web-b", "payments"), profile="gpu-aware")
    recorder.schedule(make_pod("train-c", "ml", gpu=True), nodes=["node-3", "node-4", "node-5"])
    recorder.schedule(make_pod("api-d", "shop"), nodes=["node-1", "node-2"])

    def rows(**params) -> set[str]:
        response = signed_in.get("/", params)
        assert response.status_code == 200
        return set(re.findall(r'<span class="name">([^<]+)</span>', text(response)))

    assert rows(namespace="shop") == {"web-a", "api-d"}
    assert rows(pod="web") == {"web-a", "web-b"}
    assert rows(outcome=Outcome.UNSCHEDULABLE) == {"train-c"}
    assert rows(profile="gpu-aware") == {"web-b"}
    assert rows(chosen_node="node-1") == {"api-d", "web-b"}  # gpu-aware fails node-6: no series
    assert rows(namespace="shop", pod="api") == {"api-d"}
    assert rows(node_considered="node-5") == {"web-a", "web-b", "train-c"}


def test_the_history_filters_by_time_range(signed_in, recorder):
    old = recorder.schedule(make_pod("old-1"))
    SchedulingCycle.objects.filter(pk=old.pk).update(started_at=old.started_at - timedelta(days=2))
    recorder.schedule(make_pod("new-1"))
    day_ago = (old.started_at - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S")
    assert "old-1" not in text(signed_in.get("/", {"started_after": day_ago}))
    assert "new-1" in text(signed_in.get("/", {"started_after": day_ago}))
    only_old = text(signed_in.get("/", {"started_before": day_ago}))
    assert "old-1" in only_old
    assert "new-1" not in only_old


def recorder_with(traffic: dict[str, float], *, answer_scale: str = "") -> Recorder:
    profiles = load_profiles(PROFILES.read_text())
    if answer_scale:
        profiles = {name: dataclasses.replace(p, answer_scale=answer_scale) for name, p in profiles.items()}
    return Recorder(
        Extender(
            profiles,
            cluster=CLUSTER,
            traffic=traffic_store(traffic),
            binder=SimulatedBinder(),
        )
    )


def test_the_history_filters_and_marks_answer_ties(signed_in, dashboard_settings):
    # On the fixed scale (the spread one keeps 10 for the best node alone): no image on these nodes; finals 54 and
    # 53.25 both answer 5, 56.25 and 37.5 answer 6 and 4.
    nodes = ["node-1", "node-2", "node-6"]
    tied = recorder_with({"node-1": 4.0e6, "node-2": 1.12e6, "node-6": 1.16e6}, answer_scale="fixed").schedule(
        make_pod("tied-a"), nodes=nodes
    )
    clear = recorder_with({"node-1": 4.0e6, "node-2": 1.0e6, "node-6": 2.0e6}, answer_scale="fixed").schedule(
        make_pod("clear-b"), nodes=nodes
    )
    assert (tied.answer_tie, clear.answer_tie) == (True, False)

    def rows(**params) -> dict[str, str]:
        response = signed_in.get("/", params)
        assert response.status_code == 200
        found = re.findall(r'<tr data-id="\d+".*?<span class="name">([^<]+)</span>(.*?)</tr>', text(response), re.S)
        return {name: rest for name, rest in found}

    everything = rows()
    assert set(everything) == {"tied-a", "clear-b"}
    assert re.search(r'<span class="tag tie" title="[^"]*0\.\.10[^"]*">tie</span>', everything["tied-a"])
    assert "tie</span>" not in everything["clear-b"]
    assert set(rows(answer_tie="true")) == {"tied-a"}
    assert set(rows(answer_tie="false")) == {"clear-b"}
    form = text(signed_in.get("/", {"answer_tie": "true"}))
    assert '<select name="answer_tie">' in form
    assert '<option value="true" selected>tied</option>' in form
    assert "answer_tie:" in text(signed_in.get("/", {"answer_tie": "maybe"})), "a bad value is named"


def test_a_bad_filter_value_is_named_instead_of_failing(signed_in, recorder):
    recorder.schedule()
    response = signed_in.get("/", {"outcome": "exploded"})
    assert response.status_code == 200
    assert "outcome:" in text(response)
    assert "No scheduling cycle matches" in text(response)


def test_the_history_pages_by_keyset_without_counting_the_table(signed_in, recorder, django_assert_max_num_queries):
    for index in range(53):
        recorder.schedule(make_pod(f"pod-{index:02d}"), nodes=["node-1"], bind=False)
    with django_assert_max_num_queries(6) as captured:
        first = signed_in.get("/")
    assert not any("COUNT(" in q["sql"].upper() for q in captured.captured_queries)
    body = text(first)
    assert body.count("<tr data-id=") == 50
    match = re.search(r'href="/\?before=([0-9_]+)"', body)
    assert match, "an Older link to the next page"
    second = text(signed_in.get("/", {"before": match.group(1)}))
    assert second.count("<tr data-id=") == 3
    assert "pod-00" in second
    assert "pod-52" not in second
    assert 'rel="next"' not in second


def test_a_forged_cursor_is_refused_with_a_400(signed_in):
    response = signed_in.get("/", {"before": "drop table"})
    assert response.status_code == 400


def test_polling_returns_only_rows_recorded_after_the_newest_seen(signed_in, recorder):
    seen = recorder.schedule(make_pod("seen-1"))
    assert signed_in.get(reverse("ui:history-new"), {"after": seen.id}).status_code == 204
    recorder.schedule(make_pod("fresh-1", "payments"))
    recorder.schedule(make_pod("fresh-2", "shop"))
    response = signed_in.get(reverse("ui:history-new"), {"after": seen.id})
    assert response.status_code == 200
    body = text(response)
    assert "fresh-1" in body
    assert "fresh-2" in body
    assert "seen-1" not in body
    filtered = text(signed_in.get(reverse("ui:history-new"), {"after": seen.id, "namespace": "shop"}))
    assert "fresh-2" in filtered
    assert "fresh-1" not in filtered


def test_the_first_history_page_polls_for_new_cycles(signed_in, recorder):
    cycle = recorder.schedule()
    body = text(signed_in.get("/", {"namespace": "shop"}))
    assert 'hx-get="/history/new/?namespace=shop"' in body
    assert f'data-after="{cycle.id}"' in body


def test_the_decision_shows_every_candidate_with_the_chosen_node_first(signed_in, recorder):
    cycle = recorder.schedule()
    assert cycle.chosen_node == "node-6"  # no traffic series: the neutral 50 beats every measured node
    response = signed_in.get(reverse("ui:decision", args=[cycle.id]))
    assert response.status_code == 200
    body = text(response)
    order = re.findall(r'<tr class="([^"]*)" data-node="([^"]+)">', body)
    assert order[0][1] == "node-6"
    assert "chosen" in order[0][0]
    assert {node for _, node in order} == {f"node-{i}" for i in range(1, 7)}
    assert "receive rate above 125.0 MB/s" in body  # node-4's TrafficThreshold verdict
    assert "166.7 MB/s over the last 5 min" in body  # its recorded detail
    assert "no NodeResources object for node" in body  # node-5
    assert "1.0 MB" in body
    assert "3.3 kB/s" in body  # 1.0 MB over the 5-minute window
    assert "1.4 MB" in body
    assert "28.6 × 3" in body  # node-1's NetworkTraffic normalized score × weight
    assert "= 21.4 pts" in body
    assert "no series" in body
    assert "Full Nodes" not in body
    assert "NodeNames (nodeCacheCapable)" in body


def test_the_decision_explains_in_plain_language(signed_in, recorder):
    cycle = recorder.schedule(nodes=["node-1", "node-2", "node-4", "node-5"])
    body = text(signed_in.get(reverse("ui:decision", args=[cycle.id])))
    assert (
        "Placed on node-1: lowest traffic (1.0 MB in 5 min), 12.5 points ahead of node-2 (answers 10 against 0 on the"
        " 0..10 scale)." in body
    )
    assert "2 nodes excluded: node-4: receive rate above 125.0 MB/s (166.7 MB/s over the last 5 min);" in body
    assert "node-5: no NodeResources object for node." in body
    version = recorder.extender.profiles["default"].version()
    assert (
        "Traffic was measured 0 s before the decision, within maxStalenessSeconds"
        f" (120 s, profile &#x27;default&#x27; version {version}, as recorded)." in body
    )


def test_the_decision_shows_the_exact_answers_collapsed(signed_in, recorder):
    cycle = recorder.schedule(nodes=["node-1", "node-2"])
    body = text(signed_in.get(reverse("ui:decision", args=[cycle.id])))
    assert body.count('<details class="answer">') == 3
    assert "&quot;Host&quot;: &quot;node-1&quot;" in body
    assert "&quot;NodeNames&quot;" in body


def test_the_decision_carries_its_chart_data_as_json_not_script(signed_in, recorder):
    cycle = recorder.schedule()
    body = text(signed_in.get(reverse("ui:decision", args=[cycle.id])))
    match = re.search(r'<script id="score-chart-data" type="application/json">(.*?)</script>', body, re.S)
    assert match
    chart = json.loads(match.group(1))
    assert chart["labels"][0] == "node-6"
    assert [d["label"] for d in chart["datasets"]] == ["NetworkTraffic ×3", "ImageLocality ×1"]
    assert chart["traffic"][chart["labels"].index("node-1")] == 1.0


def test_why_not_compares_a_scored_node_term_by_term(signed_in, recorder):
    cycle = recorder.schedule(nodes=["node-1", "node-2", "node-3"])
    assert cycle.chosen_node == "node-3"  # its image is present: (0·3 + 100)/4 = 25 beats node-1's 21.4
    body = text(signed_in.get(reverse("ui:decision", args=[cycle.id]), {"why_not": "node-1"}))
    assert "node-1 scored 3.6 points less than node-3; most of it from ImageLocality." in body
    assert "+25.0" in body  # ImageLocality: 100 × 1 / 4
    assert "-21.4" in body  # NetworkTraffic: node-1 leads by 28.57 × 3 / 4
    assert "On the 0..10 scale" not in body


def test_why_not_an_excluded_node_names_the_filter_that_excluded_it(signed_in, recorder):
    cycle = recorder.schedule()
    response = signed_in.get(reverse("ui:why-not", args=[cycle.id]), {"why_not": "node-5"})
    assert response.status_code == 200
    body = text(response)
    assert "node-5 was excluded before scoring" in body
    assert "NodeResourceFitByCR: no NodeResources object for node" in body
    assert "Preemption cannot help" in body
    assert response["HX-Push-Url"] == f"/cycles/{cycle.id}/?why_not=node-5"
    assert "<html" not in body, "the htmx partial is a fragment"


def test_why_not_an_unknown_node_says_so(signed_in, recorder):
    cycle = recorder.schedule()
    body = text(signed_in.get(reverse("ui:decision", args=[cycle.id]), {"why_not": "node-99"}))
    assert "node-99 was not a candidate in this cycle." in body


def test_an_unknown_cycle_is_a_404(signed_in):
    assert signed_in.get(reverse("ui:decision", args=[999999])).status_code == 404
    assert signed_in.get(reverse("ui:what-if", args=[999999])).status_code == 404


def test_a_refused_call_renders_as_an_error_decision(signed_in, recorder):
    recorder.refuse()
    cycle = SchedulingCycle.objects.get()
    body = text(signed_in.get(reverse("ui:decision", args=[cycle.id])))
    assert "Error: filter:" in body
    assert "No candidate was recorded" in body


def test_an_unschedulable_pod_is_explained(signed_in, recorder):
    cycle = recorder.schedule(make_pod("train", "ml", gpu=True), nodes=["node-3", "node-4", "node-5"])
    assert cycle.outcome == Outcome.UNSCHEDULABLE
    body = text(signed_in.get(reverse("ui:decision", args=[cycle.id])))
    assert "3 nodes excluded" in body
    assert "node does not enable example.com/gpu" in body
    assert "No node passed every filter" in body


def test_what_if_shows_the_recorded_decision_and_a_form(signed_in, recorder):
    cycle = recorder.schedule()
    response = signed_in.get(reverse("ui:what-if", args=[cycle.id]))
    assert response.status_code == 200
    body = text(response)
    assert 'name="w_NetworkTraffic" value="3"' in body
    assert 'name="threshold_mbps" value="125.0"' in body
    assert 'id="whatif-result"' not in body


def test_what_if_under_other_weights_moves_the_highest_score(signed_in, recorder):
    cycle = recorder.schedule(nodes=["node-1", "node-2", "node-3"])
    params = {
        "mode": "custom",
        "w_NetworkTraffic": "1",
        "w_ImageLocality": "0",
        "f_TrafficThreshold": "on",
        "f_NodeResourceFitByCR": "on",
        "threshold_mbps": "125",
    }
    body = text(signed_in.get(reverse("ui:what-if", args=[cycle.id]), params))
    assert "Our highest score would move from <strong>node-3</strong> to <strong>node-1</strong>." in body


def test_what_if_a_looser_threshold_readmits_a_busy_node(signed_in, recorder):
    cycle = recorder.schedule()
    params = {"mode": "custom", "w_NetworkTraffic": "3", "w_ImageLocality": "1", "f_TrafficThreshold": "on"}
    params["threshold_mbps"] = "500"
    body = text(signed_in.get(reverse("ui:what-if", args=[cycle.id]), params))
    row = re.search(r'<tr class="[^"]*changed[^"]*">\s*<th scope="row">node-4', body)
    assert row, "node-4 now passes"
    assert "node-5" in body


def test_what_if_under_another_profile(signed_in, recorder):
    cycle = recorder.schedule()
    body = text(signed_in.get(reverse("ui:what-if", args=[cycle.id]), {"mode": "profile", "profile": "gpu-aware"}))
    assert "Under gpu-aware" in body
    assert "node-6" in body
    assert "TrafficThreshold: no traffic series for node" in body  # gpu-aware fails on missing metrics


def test_what_if_names_a_bad_field(signed_in, recorder):
    cycle = recorder.schedule()
    body = text(signed_in.get(reverse("ui:what-if", args=[cycle.id]), {"mode": "custom", "w_NetworkTraffic": "x"}))
    assert "w_NetworkTraffic: weight must be a whole number" in body
    body = text(signed_in.get(reverse("ui:what-if", args=[cycle.id]), {"mode": "profile", "profile": "nope"}))
    assert "profile: unknown profile" in body


def test_the_nodes_page_counts_placements_exclusions_and_flags_missing_series(signed_in, recorder):
    recorder.schedule()
    recorder.schedule(make_pod("web-2"))
    response = signed_in.get(reverse("ui:nodes"))
    assert response.status_code == 200
    body = text(response)
    assert "1 node matches no traffic series" in body
    assert re.search(r"node-6</a></th>\s*<td class=\"num\">2</td>", body), "node-6 received both pods"
    assert "TrafficThreshold: receive rate above 125.0 MB/s (2)" in body
    assert "NodeResourceFitByCR: no NodeResources object for node (2)" in body
    assert "50.0 GB" in body
    chart = re.search(r'<script id="node-chart-data" type="application/json">(.*?)</script>', body, re.S)
    assert chart
    assert json.loads(chart.group(1))["node"] == "node-6"


def test_the_nodes_page_charts_a_chosen_node(signed_in, recorder):
    recorder.schedule()
    body = text(signed_in.get(reverse("ui:nodes"), {"node": "node-1"}))
    chart = re.search(r'<script id="node-chart-data" type="application/json">(.*?)</script>', body, re.S)
    assert chart
    data = json.loads(chart.group(1))
    assert data["node"] == "node-1"
    assert data["points"][0]["mb"] == 1.0


def test_the_nodes_page_says_why_a_chosen_node_was_filtered_out(signed_in, recorder):
    recorder.schedule()
    recorder.schedule(make_pod("web-2"))
    response = signed_in.get(reverse("ui:nodes"), {"node": "node-4"})
    assert response.status_code == 200
    body = text(response)
    assert "Why it was filtered out" in body
    assert "<li>TrafficThreshold: receive rate above 125.0 MB/s — 2×</li>" in body


def test_the_nodes_page_reads_kept_counts_in_as_many_queries_whatever_the_history_s_length(
    signed_in, recorder, monkeypatch, django_assert_max_num_queries
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from dashboard.storage import call_body_read as call_body

    decoded: list[bytes] = []
    decode = call_body.body_decode
    monkeypatch.setattr(call_body, "body_decode", lambda body, **kw: decoded.append(body) or decode(body, **kw))
    recorder.schedule()
    recorder.schedule(make_pod("web-2"))
    decoded.clear()
    with CaptureQueriesContext(connection) as first:
        assert signed_in.get(reverse("ui:nodes")).status_code == 200
    assert len(decoded) == 1, "only the latest filter call, for its traffic"
    for index in range(20):
        recorder.schedule(make_pod(f"more-{index}"))
    decoded.clear()
    with django_assert_max_num_queries(len(first)):
        body = text(signed_in.get(reverse("ui:nodes")))
    assert len(decoded) == 1, "no call decoded to count"
    assert "Counts over the retained history since <time" in body
    assert "TrafficThreshold: receive rate above 125.0 MB/s (22)" in body
    assert re.search(r"node-6</a></th>\s*<td class=\"num\">22</td>", body), "node-6 received every pod"
    assert "traffic from the latest recorded filter call, at <time" in body


def test_the_health_page_shows_latency_errors_spool_and_traffic(signed_in, recorder):
    recorder.schedule()
    recorder.refuse()
    response = signed_in.get(reverse("ui:health"))
    assert response.status_code == 200
    body = text(response)
    assert re.search(r"<th scope=\"row\">filter</th><td class=\"num\">2</td>", body)
    assert re.search(r'<td class="num error-text">1</td>', body), "the refused filter counts as an error"
    assert "Spool depth" in body  # its figure: tests/dashboard/test_probes_read_the_spool_backlog.py (needs a runtime)
    assert "not configured" in body
    assert '<th scope="row">default</th>' in body


def test_the_health_page_shows_each_refresh_and_infers_worker_liveness(signed_in, recorder, refreshed_traffic):
    body = text(signed_in.get(reverse("ui:health")))
    assert refreshed_traffic.query_key in body
    assert "Prefetch refreshes" in body
    assert re.search(r"<strong>worker</strong>: <span class=\"badge bound\">alive</span>", body)
    assert refreshed_traffic.worker in body


def test_without_workers_liveness_is_not_configured(signed_in, recorder, settings):
    settings.SCHEDLENS_TRAFFIC_BACKEND = "inprocess"
    assert "<strong>not configured</strong>" in text(signed_in.get(reverse("ui:health")))


def test_the_nodes_page_charts_refresh_snapshots_and_flags_nodes_they_miss(signed_in, recorder, refreshed_traffic):
    recorder.schedule()
    body = text(signed_in.get(reverse("ui:nodes"), {"node": "node-2"}))
    assert "traffic from traffic refresh snapshots" in body
    chart = re.search(r'<script id="node-chart-data" type="application/json">(.*?)</script>', body, re.S)
    assert chart
    points = json.loads(chart.group(1))["points"]
    assert len(points) == 1
    assert points[0]["mb"] == round(refreshed_traffic.bytes_by_node["node-2"] / 1e6, 3)
    assert re.search(r"node-6</a></th>(?:(?!</tr>).)*no series", body, re.S)
    assert not re.search(r"node-2</a></th>(?:(?!</tr>).)*no series", body, re.S)


def test_the_nodes_page_shows_a_large_cluster_a_page_at_a_time(signed_in):
    from dashboard.models import NodeTally
    from dashboard.ui.views import NODES_PER_PAGE

    count = NODES_PER_PAGE + 7
    NodeTally.objects.bulk_create(
        NodeTally(node=f"node-{i:04d}", considered=1, placements=count - i) for i in range(count)
    )
    first = text(signed_in.get(reverse("ui:nodes")))
    assert first.count('<th scope="row">') == NODES_PER_PAGE
    assert f"Nodes 1–{NODES_PER_PAGE} of {count}" in first
    assert "node-0000</a>" in first, "most placed first"
    second = text(signed_in.get(reverse("ui:nodes"), {"page": 2}))
    assert second.count('<th scope="row">') == 7
    assert f"node-{count - 1:04d}</a>" in second
    assert text(signed_in.get(reverse("ui:nodes"), {"page": "x"})).count('<th scope="row">') == NODES_PER_PAGE
