"""scheduler_core.explanation.explain: a cycle's records become per-node reasons, score terms and one plain summary."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
import pytest

from scheduler_core.explanation.explain import explain
from scheduler_core.extender.record.structs import FilterRecord, PluginScores, PrioritizeRecord

RecordT = TypeVar("RecordT", FilterRecord, PrioritizeRecord)

TUTORIAL = {"node-1": 1.0e6, "node-2": 1.2e6, "node-3": 1.4e6}


def stored(record: RecordT, **extra: Any) -> RecordT:
    """A record as it reads back once stored (``extra``: the keys the ingester adds beside it, not read)."""
    return msgspec.convert(msgspec.to_builtins(record), type(record))


def traffic_filter(failures: dict[str, dict[str, str]] | None = None, **fields: Any) -> FilterRecord:
    failures = failures or {}
    nodes = [*TUTORIAL, *failures]
    return stored(
        FilterRecord(
            nodes=nodes,
            passed=[n for n in nodes if n not in failures],
            failures=failures,
            traffic_bytes=[TUTORIAL.get(n) for n in nodes],
            metric_age_seconds=fields.pop("metric_age_seconds", 3.0),
            **fields,
        ),
        node_mode="names",
    )


def traffic_prioritize(nodes: dict[str, float] = TUTORIAL) -> PrioritizeRecord:
    top = max(nodes.values())
    scores = [round(100 - raw * 100 / top, 4) for raw in nodes.values()]
    plugin = PluginScores(name="NetworkTraffic", weight=1, scores=scores, raw=list(nodes.values()))
    return stored(
        PrioritizeRecord(
            nodes=list(nodes), plugins=[plugin], final=scores, extender=[int(s / 10 + 0.5) for s in scores]
        )
    )


GPU_FAILURE = {"NodeResourceFitByCR": "node does not enable example.com/gpu"}


def test_the_tutorial_cycle_is_summarized_with_the_winning_term_the_margin_and_the_exclusions():
    explanation = explain(
        filter_record=traffic_filter({"node-7": GPU_FAILURE}),
        prioritize_record=traffic_prioritize(),
        chosen_node="node-1",
        traffic_window_minutes=5,
    )
    assert explanation.summary == (
        "Placed on node-1: lowest traffic (1.0 MB in 5 min), 14.3 points ahead of node-2 (answers 3 against 1 on the"
        " 0..10 scale). "
        "1 node excluded: node-7 does not enable example.com/gpu."
    )
    assert (explanation.chosen_node, explanation.preferred_node, explanation.runner_up) == ("node-1",) * 2 + ("node-2",)
    assert explanation.margin == pytest.approx(14.2857, abs=1e-3)
    assert (explanation.candidate_count, explanation.excluded_count) == (4, 1)


def test_every_node_carries_its_verdicts_traffic_terms_and_final_and_extender_scores():
    explanation = explain(
        filter_record=traffic_filter({"node-7": GPU_FAILURE}),
        prioritize_record=traffic_prioritize(),
        chosen_node="node-1",
    )
    by_node = {n.node: n for n in explanation.nodes}
    best = by_node["node-1"]
    assert (best.passed, best.rank, best.traffic_bytes) == (True, 1, 1.0e6)
    assert best.final_score == pytest.approx(28.5714)
    assert best.extender_score == 3
    [term] = best.terms
    assert (term.plugin, term.weight, term.raw, term.applicable) == ("NetworkTraffic", 1, 1.0e6, True)
    assert term.normalized == term.weighted == term.contribution == pytest.approx(28.5714)
    excluded = by_node["node-7"]
    assert (excluded.passed, excluded.rank, excluded.final_score, excluded.terms) == (False, None, None, ())
    assert [(v.plugin, v.reason) for v in excluded.verdicts] == [
        ("NodeResourceFitByCR", "node does not enable example.com/gpu")
    ]


def test_nodes_are_listed_by_rank_then_the_excluded_ones():
    explanation = explain(
        filter_record=traffic_filter({"node-7": GPU_FAILURE}),
        prioritize_record=traffic_prioritize({"node-3": 1.4e6, "node-1": 1.0e6, "node-2": 1.2e6}),
    )
    assert [(n.node, n.rank) for n in explanation.nodes] == [
        ("node-1", 1),
        ("node-2", 2),
        ("node-3", 3),
        ("node-7", None),
    ]


def test_a_nodes_traffic_bytes_come_from_its_own_place_in_the_filter_call_else_from_the_prioritize_call():
    nodes = ["node-3", "node-1", "node-2"]
    filtered = FilterRecord(nodes=nodes, passed=nodes, traffic_bytes=[3.0e6, 1.5e6])  # none for node-2
    explanation = explain(filter_record=stored(filtered), prioritize_record=traffic_prioritize())
    by_node = {n.node: n.traffic_bytes for n in explanation.nodes}
    assert by_node == {"node-3": 3.0e6, "node-1": 1.5e6, "node-2": 1.2e6}


def test_weighted_terms_add_up_to_the_final_score_and_an_inapplicable_plugin_adds_nothing():
    plugins = [
        PluginScores(name="NetworkTraffic", weight=3, scores=[100.0, 0.0], raw=[1.0e6, 2.0e6]),
        PluginScores(name="NodeResourceFitByCR", weight=1, scores=[20.0, 80.0]),
        PluginScores(name="ImageLocality", weight=2, scores=[0.0, 0.0], applicable=False, note="pod has no images"),
    ]
    record = PrioritizeRecord(nodes=["a", "b"], plugins=plugins, final=[80.0, 20.0], extender=[8, 2])
    explanation = explain(filter_record=None, prioritize_record=stored(record), chosen_node="a")

    a = explanation.nodes[0]
    assert [t.contribution for t in a.terms] == [75.0, 5.0, 0.0]
    assert sum(t.contribution for t in a.terms) == pytest.approx(a.final_score)
    assert [t.weighted for t in a.terms] == [300.0, 20.0, 0.0]
    assert a.terms[2].note == "pod has no images"
    assert a.passed is None, "no filter call was recorded"
    assert explanation.summary == (
        "Placed on a: lowest traffic (1.0 MB), 60.0 points ahead of b (answers 8 against 2 on the 0..10 scale)."
    )


def test_a_winner_decided_by_another_plugin_names_that_plugin():
    plugins = [
        PluginScores(name="NetworkTraffic", weight=1, scores=[40.0, 50.0], raw=[3.0e6, 2.5e6]),
        PluginScores(name="NodeResourceFitByCR", weight=4, scores=[90.0, 10.0]),
    ]
    record = PrioritizeRecord(nodes=["gpu-a", "gpu-b"], plugins=plugins, final=[80.0, 18.0], extender=[8, 2])
    explanation = explain(filter_record=None, prioritize_record=stored(record), chosen_node="gpu-a")
    assert explanation.summary == (
        "Placed on gpu-a: highest NodeResourceFitByCR score (90), 62.0 points ahead of gpu-b"
        " (answers 8 against 2 on the 0..10 scale)."
    )


def test_a_bind_to_a_node_that_answered_less_than_ours_blames_kube_schedulers_own_scores():
    explanation = explain(filter_record=traffic_filter(), prioritize_record=traffic_prioritize(), chosen_node="node-2")
    assert explanation.preferred_node == "node-1"
    assert explanation.runner_up == "node-1"
    assert explanation.summary == (
        "Placed on node-2, although our preferred node-1 answered 3 and node-2 1 on the 0..10 scale (our final scores:"
        " node-1 28.6, node-2 14.3): kube-scheduler's own scores, or another extender's, outweighed ours."
    )


def test_a_tie_says_kube_scheduler_picked_among_tied_nodes():
    explanation = explain(
        filter_record=None,
        prioritize_record=traffic_prioritize({"node-1": 1.0e6, "node-2": 1.0e6, "node-3": 2.0e6}),
        chosen_node="node-1",
    )
    assert explanation.margin == 0
    assert "tied with node-2 at 50.0 points, both answered 5 on the 0..10 scale: kube-scheduler picked among tied" in (
        explanation.summary
    )
    assert not explanation.answer_tie, "equal final scores: rounding erased no preference"


def test_an_unschedulable_pod_lists_the_first_exclusions_and_counts_the_rest():
    failures = {f"node-{i}": GPU_FAILURE for i in range(1, 8)}
    record = FilterRecord(nodes=list(failures), passed=[], failures=failures, unresolvable=list(failures))
    explanation = explain(filter_record=stored(record), prioritize_record=None)
    assert explanation.summary == (
        "Not placed: no candidate node passed the filters. 7 nodes excluded: "
        "node-1 does not enable example.com/gpu; node-2 does not enable example.com/gpu; "
        "node-3 does not enable example.com/gpu; node-4 does not enable example.com/gpu; "
        "node-5 does not enable example.com/gpu; and 2 more."
    )
    assert all(n.unresolvable for n in explanation.nodes)
    assert explanation.excluded_count == 7


def test_a_single_feasible_node_without_prioritize_is_explained_by_the_filters_alone():
    record = FilterRecord(nodes=["node-1", "node-2"], passed=["node-1"], failures={"node-2": GPU_FAILURE})
    explanation = explain(filter_record=stored(record), prioritize_record=None, chosen_node="node-1")
    assert explanation.preferred_node == "node-1"
    assert explanation.summary.startswith("Placed on node-1: the only node that passed the filters.")


def test_a_pending_cycle_names_our_preferred_node():
    explanation = explain(filter_record=traffic_filter(), prioritize_record=traffic_prioritize())
    assert explanation.summary.startswith("node-1 scored highest (not bound): lowest traffic (1.0 MB)")


def test_missing_metrics_are_said_in_the_summary():
    explanation = explain(
        filter_record=traffic_filter(metric_note="metrics stale", metric_age_seconds=300.0),
        prioritize_record=traffic_prioritize(),
        chosen_node="node-1",
    )
    assert explanation.summary.endswith("Traffic metrics: metrics stale.")
    assert (explanation.metric_note, explanation.metric_age_seconds) == ("metrics stale", 300.0)


def test_filter_details_are_shown_next_to_the_reason():
    failures = {"node-9": {"TrafficThreshold": "receive rate above 125.0 MB/s"}}
    record = FilterRecord(
        nodes=["node-1", "node-9"],
        passed=["node-1"],
        failures=failures,
        details={"node-9": {"TrafficThreshold": "130.0 MB/s over the last 5 min"}},
    )
    explanation = explain(filter_record=stored(record), prioritize_record=None)
    assert "1 node excluded: node-9: receive rate above 125.0 MB/s (130.0 MB/s over the last 5 min)." in (
        explanation.summary
    )
    [verdict] = explanation.nodes[-1].verdicts
    assert verdict.detail == "130.0 MB/s over the last 5 min"


def test_a_refused_call_has_no_readable_record_and_the_error_is_the_explanation():
    explanation = explain(
        filter_record=None,  # its stored record holds only the error path: no filter record
        prioritize_record=None,
        error="filter: expected `str`, got `int`",
    )
    assert explanation.nodes == ()
    assert explanation.summary == "Error: filter: expected `str`, got `int`."


# --- figures a person can recompute, and what kube-scheduler saw ---------------------------------------------


def herd_record(**fields: Any) -> PrioritizeRecord:
    """node-a is preferred only because 3 binds on node-c add 900 MB to its estimate."""
    nodes = ["node-a", "node-b", "node-c"]
    raw = [1.0e9, 1.71e9, 0.3e9]
    herd = [0.0, 0.0, 9.0e8]
    estimates = [r + h for r, h in zip(raw, herd, strict=True)]
    top = max(estimates)
    scores = [round(100 - e * 100 / top, 4) for e in estimates]
    plugin = PluginScores(
        name="NetworkTraffic",
        weight=1,
        scores=scores,
        raw=raw,
        herd_bytes=herd,
        herd_binds=[0, 0, 3],
        herd_newest_age_ms=[None, None, 2250],
        metric_age_seconds=4.0,
    )
    record = PrioritizeRecord(
        nodes=nodes, plugins=[plugin], final=scores, extender=[int(s / 10 + 0.5) for s in scores], **fields
    )
    return stored(record)


def test_a_herd_adjusted_node_shows_measured_and_assumed_bytes_the_estimate_the_maximum_and_the_arithmetic():
    explanation = explain(filter_record=None, prioritize_record=herd_record(), chosen_node="node-a")
    node_c = next(n for n in explanation.nodes if n.node == "node-c")
    [term] = node_c.terms
    assert term.traffic is not None
    figures = term.traffic
    assert (figures.measured_bytes, figures.herd_bytes, figures.herd_binds) == (0.3e9, 9.0e8, 3)
    assert (figures.estimate_bytes, figures.max_estimate_bytes, figures.max_estimate_node) == (1.2e9, 1.71e9, "node-b")
    assert (figures.herd_newest_bind_age_seconds, figures.metric_age_seconds) == (2.25, 4.0)
    assert term.arithmetic == (
        "estimate 1,200,000,000 = 300,000,000 measured + 900,000,000 assumed (3 recent binds, the newest 2.2 s"
        " before); 100 − 1,200,000,000 × 100 / 1,710,000,000 (node-b) = 29.8246"
    )
    assert node_c.final_arithmetic == "29.8246 × 1 / 1 = 29.8246"
    assert node_c.answer_arithmetic == "29.8246 / 10 = 2.9825 → 3"


def test_the_summary_says_when_the_herd_estimate_changed_the_ranking():
    explanation = explain(filter_record=None, prioritize_record=herd_record(), chosen_node="node-a")
    assert explanation.preferred_node == "node-a"
    assert (explanation.measured_leader, explanation.herd_changed_ranking) == ("node-c", True)
    assert (
        "On measured traffic alone node-c would score highest; 3 recent binds there assume 900.0 MB more (the newest"
        " 2.2 s before the call), which puts node-a first." in explanation.summary
    )


def test_without_herd_bytes_no_ranking_change_is_claimed():
    explanation = explain(filter_record=None, prioritize_record=traffic_prioritize(), chosen_node="node-1")
    assert (explanation.measured_leader, explanation.herd_changed_ranking) == ("", False)
    assert "measured traffic alone" not in explanation.summary


def tied_record(finals: list[float], extender: list[int], **fields: Any) -> PrioritizeRecord:
    nodes = [f"node-{c}" for c in "abcd"[: len(finals)]]
    plugin = PluginScores(name="NodeResourceFitByCR", weight=1, scores=finals)
    return stored(PrioritizeRecord(nodes=nodes, plugins=[plugin], final=finals, extender=extender, **fields))


def test_a_bind_to_a_node_that_answered_the_same_as_ours_names_the_tie_not_kube_schedulers_scores():
    explanation = explain(
        filter_record=None, prioritize_record=tied_record([75.0, 83.4, 40.0], [8, 8, 4]), chosen_node="node-a"
    )
    assert explanation.preferred_node == "node-b"
    assert explanation.summary == (
        "Placed on node-a: node-a and node-b both answered 8 on the 0..10 scale (our final scores: node-b 83.4,"
        " node-a 75.0): kube-scheduler picked among tied nodes."
    )
    assert (explanation.answer_tie, explanation.tied_nodes) == (True, ("node-a",))


def test_a_preference_the_rounding_erased_is_flagged_even_when_kube_scheduler_picked_ours():
    explanation = explain(
        filter_record=None, prioritize_record=tied_record([83.4, 78.0, 40.0], [8, 8, 4]), chosen_node="node-a"
    )
    assert explanation.summary == (
        "Placed on node-a: highest NodeResourceFitByCR score (83), 5.4 points ahead of node-b, but both answered 8"
        " on the 0..10 scale, so kube-scheduler picked among tied nodes."
    )
    assert (explanation.answer_tie, explanation.tied_nodes) == (True, ("node-b",))


def test_the_extenders_weight_turns_answers_into_kube_scheduler_points():
    record = tied_record([83.4, 61.0], [8, 6], extender_weight=10)
    explanation = explain(filter_record=None, prioritize_record=record, chosen_node="node-b")
    assert explanation.extender_weight == 10
    assert [n.kube_scheduler_points for n in explanation.nodes] == [800, 600]
    assert "our preferred node-a answered 8 and node-b 6 on the 0..10 scale, 800 against 600 points at weight 10" in (
        explanation.summary
    )


def test_a_spread_answer_shows_the_bounds_it_maps_from():
    record = tied_record([83.4, 61.0, 20.0], [10, 6, 0], answer_scale="spread")
    explanation = explain(filter_record=None, prioritize_record=record)
    assert (explanation.answer_scale, explanation.spread_min, explanation.spread_max) == ("spread", 20.0, 83.4)
    assert explanation.answer_rule.startswith("answer = 10 × (final − 20) / (83.4 − 20), rounded half up")
    assert explanation.nodes[1].answer_arithmetic == "10 × (61 − 20) / (83.4 − 20) = 6.4669 → 6"


def test_resource_and_image_scores_show_what_they_are_computed_from():
    plugins = [
        PluginScores(
            name="NodeResourceFitByCR",
            weight=2,
            scores=[70.0, 100.0],
            raw=[70.0, 120.0],
            requested=["example.com/fpga", "example.com/gpu"],
            inputs={"example.com/fpga": [60.0, 140.0], "example.com/gpu": [80.0, 100.0]},
        ),
        PluginScores(name="ImageLocality", weight=1, scores=[50.0, 0.0], raw=[1.0, 0.0], requested=["a:1", "b:2"]),
    ]
    record = PrioritizeRecord(nodes=["n1", "n2"], plugins=plugins, final=[63.3333, 66.6667], extender=[6, 7])
    explanation = explain(filter_record=None, prioritize_record=stored(record))
    n1 = next(n for n in explanation.nodes if n.node == "n1")
    n2 = next(n for n in explanation.nodes if n.node == "n2")
    resources, images = n1.terms
    assert resources.resources is not None
    assert images.images is not None
    assert resources.resources.resource_scores == {"example.com/fpga": 60.0, "example.com/gpu": 80.0}
    assert resources.arithmetic == "(60 + 80) / 2 = 70"
    assert n2.terms[0].arithmetic == "(140 + 100) / 2 = 120, clamped to 0..100: 100"
    assert (images.images.present, images.images.requested) == (1, 2)
    assert images.arithmetic == "1 of 2 images present: 1 × 100 / 2 = 50"
    assert n1.final_arithmetic == "(70 × 2 + 50 × 1) / 3 = 63.3333"


def test_a_record_from_before_binds_were_counted_says_so_instead_of_claiming_none():
    record = herd_record()
    for plugin in record.plugins:
        plugin.herd_binds, plugin.herd_newest_age_ms = [], []
    explanation = explain(filter_record=None, prioritize_record=record, chosen_node="node-a")
    [term] = next(n for n in explanation.nodes if n.node == "node-c").terms
    assert term.traffic is not None
    assert (term.traffic.herd_bytes, term.traffic.herd_binds) == (9.0e8, None)
    assert term.arithmetic.startswith(
        "estimate 1,200,000,000 = 300,000,000 measured + 900,000,000 assumed (recent binds, not counted in this"
        " record);"
    )
    assert "recent binds there assume 900.0 MB more, which puts node-a first." in explanation.summary


def test_a_node_without_a_measurement_shows_the_score_its_policy_gives_and_why():
    plugin = PluginScores(
        name="NetworkTraffic",
        weight=1,
        scores=[100.0, 0.0],
        raw=[1.0e6, None],
        notes={"b": "no traffic series for node"},
        missing_score=0.0,
    )
    record = PrioritizeRecord(nodes=["a", "b"], plugins=[plugin], final=[100.0, 0.0], extender=[10, 0])
    explanation = explain(filter_record=None, prioritize_record=stored(record))
    [term] = explanation.nodes[1].terms
    assert term.traffic is not None
    assert (term.traffic.measured_bytes, term.traffic.missing_score) == (None, 0.0)
    assert term.arithmetic == "no traffic series for node: missingPolicy fail scores it 0"
