"""The auditor's side: every score and answer of a cycle, recomputed from its explanation JSON alone.

Not a test module: ``test_explanations_add_up`` and ``test_explanations_exported`` check with it. No production code
is used here to check; :func:`recompute` redoes the arithmetic the documentation (docs/explanations.md) promises:

- ``NetworkTraffic``: estimate = measured + herd bytes; the maximum over the measured candidates;
  ``100 − estimate × 100 / max``; without a measurement, ``traffic.missing_score`` (the neutral 50, or 0 under
  ``missingPolicy: fail``: :func:`shown_missing_score`); 100 when every estimate is 0;
- ``NodeResourceFitByCR``: the mean of the requested resources' ``resourcesScore``, clamped to 0..100 (0 without a
  NodeResources object); ``ImageLocality``: ``present × 100 / requested``;
- final = Σ normalized × weight / Σ weight over the applicable terms, to 4 decimals; the answer on the profile's
  scale, rounded half up (``spread``: at most 9 below the best final); ``answer_tie``, ``tied_nodes``, ranks, margin,
  ``kube_scheduler_points``, and the measured-traffic leader;
- every ``arithmetic`` / ``final_arithmetic`` / ``answer_arithmetic`` text names the figures it was computed with.

Scores must match to the 4 decimals shown: ``round(recomputed, 4) == shown``, with one exception. The engine rounds
with ``np.round`` (``rint(x·10⁴)/10⁴``: an exact decimal half goes to even), ``round(x, 4)`` rounds the binary value,
and the two differ on an exact half in the 5th decimal. Such halves are common in final scores (a mean of 4-decimal
scores over an even weight sum: (58.3333 + 0) / 2 = 29.16665 is shown as 29.1666, ``round`` gives 29.1667), so there,
and only there, one unit of the 4th decimal is allowed (:func:`assert_shown`; docs/explanations.md says the same).
Answers must be exactly equal.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import event

TRAFFIC = "NetworkTraffic"
RESOURCES = "NodeResourceFitByCR"
IMAGES = "ImageLocality"
NEUTRAL = 50.0
"""A node without a usable measurement scores this under ``missingPolicy: neutral`` (0 under ``fail``)."""
EPSILON = 1e-9
"""Answers: ``floor(x + 0.5 + 1e-9)``, so a value a hair below .5 through float noise still rounds up."""
SPREAD_BELOW_BEST = 9
"""Under ``spread``, the highest answer of a node below the best final score: only the best answers 10."""
TIE_NOISE = 1e-6
"""How close (in units of the 4th decimal) to a half a value must be for the engine's rounding to differ."""


def fmt_score(value: float) -> str:
    """A score as the texts show it: up to 4 decimals, trailing zeros dropped."""
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def fmt_bytes(value: float) -> str:
    """A byte figure in full, with thousands separators."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,}"


def assert_shown(value: float, shown: float | None, what: str) -> None:
    """``shown`` is ``value`` to 4 decimals; one unit off only where ``value`` sits on a rounding tie."""
    assert shown is not None, f"{what}: not shown"
    expected = round(value, 4)
    if expected == shown:
        return
    scaled = value * 10_000
    on_tie = abs(scaled - math.floor(scaled) - 0.5) < TIE_NOISE
    message = f"{what}: recomputed {value!r} → {expected}, shown {shown!r}"
    assert on_tie, message
    assert abs(expected - shown) < 1.5e-4, message
    field = what.rsplit(" ", 1)[-1]
    event(f"{field} on a 4th-decimal tie: shown {shown!r} for {value!r}, round(x, 4) gives {expected!r}")


def round_half_up(value: float) -> int:
    return min(10, max(0, math.floor(value + 0.5 + EPSILON)))


def answer_of(final: float, scale: str, spread: tuple[float, float] | None) -> tuple[float | None, int]:
    """The documented rule (docs/explanations.md): ``fixed`` answers ``final / 10`` rounded half up; ``spread``
    answers ``10 × (final − min) / (max − min)`` rounded half up, at most 9 for every node below the highest final,
    and 10 for every candidate when they all scored the same (no bounds). Returns the scaled value and the answer."""
    if scale == "fixed":
        return final / 10, round_half_up(final / 10)
    if spread is None:
        return None, 10
    low, high = spread
    value = 10 * (final - low) / (high - low)
    answer = round_half_up(value)
    return value, answer if final >= high else min(answer, SPREAD_BELOW_BEST)


def terms_of(node: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    terms = {t["plugin"]: t for t in node["terms"]}
    assert len(terms) == len(node["terms"]), f"{node['node']}: a plugin twice"
    return terms


def shown_missing_score(explanation: Mapping[str, Any]) -> float | None:
    """``traffic.missing_score``: what a node without a usable measurement scores under the profile's policy, the
    same on every scored node of the cycle (one profile), and either the neutral 50 or missingPolicy fail's 0; None
    when no node was scored."""
    shown: set[Any] = set()
    for n in explanation["nodes"]:
        if n["final_score"] is None:
            continue
        figures = terms_of(n)[TRAFFIC]["traffic"]
        assert figures is not None, f"{n['node']}: NetworkTraffic applies but shows no traffic figures"
        shown.add(figures["missing_score"])
    if not shown:
        return None
    assert len(shown) == 1, f"one profile per cycle, so one missing score: {sorted(shown, key=repr)}"
    (score,) = shown
    assert score in (NEUTRAL, 0.0), f"missing score {score!r}: neither the neutral {NEUTRAL} nor missingPolicy fail's 0"
    return float(score)


def recompute_traffic(scored: Sequence[Mapping[str, Any]], missing_score: float) -> dict[str, float]:
    """Each node's NetworkTraffic score from the ``traffic`` figures, checking the figures on the way."""
    figures = {n["node"]: terms_of(n)[TRAFFIC]["traffic"] for n in scored}
    for node, f in figures.items():
        assert f is not None, f"{node}: NetworkTraffic applies but shows no traffic figures"
    estimates: dict[str, float] = {}
    for node, f in figures.items():
        if f["measured_bytes"] is None:
            assert f["estimate_bytes"] is None, f"{node}: an estimate without a measurement"
            assert f["herd_bytes"] == 0, f"{node}: herd bytes on a node scored as missing"
            assert f["missing_reason"], f"{node}: no measurement and no reason"
        else:
            assert f["herd_bytes"] >= 0
            assert f["estimate_bytes"] == f["measured_bytes"] + f["herd_bytes"], f"{node}: estimate ≠ measured + herd"
            estimates[node] = f["estimate_bytes"]
    top = max(estimates.values(), default=None)
    leaders = {node for node, value in estimates.items() if value == top}
    scores: dict[str, float] = {}
    for node, f in figures.items():
        assert f["max_estimate_bytes"] == top, f"{node}: max estimate {f['max_estimate_bytes']} ≠ {top}"
        if top is None:
            assert f["max_estimate_node"] == ""
        else:
            assert f["max_estimate_node"] in leaders, f"{node}: {f['max_estimate_node']} does not have the max"
        if f["measured_bytes"] is None:
            scores[node] = missing_score
        elif top == 0:
            scores[node] = 100.0
        else:
            scores[node] = 100.0 - f["estimate_bytes"] * 100.0 / top
    ages = {f["metric_age_seconds"] for f in figures.values()}
    assert len(ages) == 1, "one snapshot per cycle: one metric age"
    return scores


def recompute_resources(node: str, term: Mapping[str, Any]) -> float:
    figures = term["resources"]
    assert figures is not None, f"{node}: NodeResourceFitByCR applies but shows no figures"
    assert sorted(figures["resource_scores"]) == sorted(figures["requested"]), f"{node}: scores ≠ requested"
    values = list(figures["resource_scores"].values())
    if figures["mean"] is None or None in values:
        assert figures["mean"] is None, f"{node}: half a NodeResources object"
        assert all(v is None for v in values), f"{node}: half a NodeResources object"
        return 0.0
    mean = sum(values) / len(values)
    assert math.isclose(mean, figures["mean"], rel_tol=0, abs_tol=1e-9), f"{node}: mean {figures['mean']} ≠ {mean}"
    return min(100.0, max(0.0, mean))


def recompute_images(node: str, term: Mapping[str, Any]) -> float:
    figures = term["images"]
    assert figures is not None, f"{node}: ImageLocality applies but shows no figures"
    assert figures["requested"] == len(figures["images"]) > 0
    assert figures["present"] is not None
    assert 0 <= figures["present"] <= figures["requested"]
    return figures["present"] * 100 / figures["requested"]


def check_term_text(node: str, term: Mapping[str, Any], missing_score: float) -> None:
    text = term["arithmetic"]
    normalized = fmt_score(term["normalized"])
    if not term["applicable"]:
        assert text.endswith("carries no weight"), f"{node} {term['plugin']}: {text!r}"
        return
    assert text.endswith(normalized), f"{node} {term['plugin']}: {text!r} does not end with {normalized}"
    if term["plugin"] == TRAFFIC:
        f = term["traffic"]
        if f["measured_bytes"] is None:
            assert text.startswith(f["missing_reason"]), f"{node}: {text!r} does not say {f['missing_reason']!r}"
            assert term["normalized"] == missing_score
            policy = "the neutral score" if missing_score == NEUTRAL else "missingPolicy fail scores it"
            assert policy in text, f"{node}: {text!r} does not say {policy!r}"
        elif f["max_estimate_bytes"] == 0:
            assert "0 B" in text, f"{node}: {text!r}"
        else:
            for figure in (fmt_bytes(f["estimate_bytes"]), fmt_bytes(f["max_estimate_bytes"]), f["max_estimate_node"]):
                assert figure in text, f"{node}: {text!r} lacks {figure!r}"
            if f["herd_bytes"]:
                binds = "recent binds" if f["herd_binds"] is None else f"{f['herd_binds']} recent bind"
                for figure in (fmt_bytes(f["measured_bytes"]), fmt_bytes(f["herd_bytes"]), binds):
                    assert figure in text, f"{node}: {text!r} lacks {figure!r}"
    elif term["plugin"] == RESOURCES:
        r = term["resources"]
        if r["mean"] is not None:
            for score in r["resource_scores"].values():
                assert fmt_score(score) in text, f"{node}: {text!r} lacks {score}"
            assert fmt_score(r["mean"]) in text, f"{node}: {text!r} lacks the mean {r['mean']}"
    elif term["plugin"] == IMAGES:
        i = term["images"]
        assert f"{i['present']} × 100 / {i['requested']}" in text, f"{node}: {text!r}"


def recompute(explanation: Mapping[str, Any]) -> None:
    """Every score and answer of the cycle, from the explanation alone."""
    nodes = explanation["nodes"]
    scored = [n for n in nodes if n["final_score"] is not None]
    if not scored:
        assert explanation["answer_tie"] is False
        assert explanation["tied_nodes"] == []
        return
    # Scored nodes first, by rank (ties keep kube-scheduler's order), then the rest.
    assert nodes[: len(scored)] == scored, "scored nodes come first"
    assert [n["rank"] for n in scored] == list(range(1, len(scored) + 1))
    assert all(n["rank"] is None for n in nodes[len(scored) :])
    assert all(n["passed"] is not False and not n["verdicts"] for n in scored), "a scored node passed the filters"
    finals = [n["final_score"] for n in scored]
    assert finals == sorted(finals, reverse=True), "ranked by final score"
    plugins = [[(t["plugin"], t["weight"], t["applicable"]) for t in n["terms"]] for n in scored]
    assert all(p == plugins[0] for p in plugins), "every node is scored by the same plugins"

    missing_score = shown_missing_score(explanation)
    assert missing_score is not None
    traffic = recompute_traffic(scored, missing_score)
    total_weight = sum(t["weight"] for t in scored[0]["terms"] if t["applicable"])
    for n in scored:
        node = n["node"]
        terms = terms_of(n)
        for term in terms.values():
            if term["plugin"] == TRAFFIC:
                assert term["applicable"], "NetworkTraffic always applies"
                value = traffic[node]
                assert term["raw"] == term["traffic"]["measured_bytes"]
                if n["traffic_bytes"] is not None and term["traffic"]["measured_bytes"] is not None:
                    assert n["traffic_bytes"] == term["traffic"]["measured_bytes"]
            elif not term["applicable"]:
                continue
            elif term["plugin"] == RESOURCES:
                value = recompute_resources(node, term)
            elif term["plugin"] == IMAGES:
                value = recompute_images(node, term)
            else:  # pragma: no cover - the profiles above use no other plugin
                raise AssertionError(f"unexpected plugin {term['plugin']}")
            assert_shown(value, term["normalized"], f"{node} {term['plugin']}.normalized")
            assert_shown(term["normalized"] * term["weight"], term["weighted"], f"{node} {term['plugin']}.weighted")
            share = term["normalized"] * term["weight"] / total_weight
            assert_shown(share, term["contribution"], f"{node} {term['plugin']}.contribution")
            check_term_text(node, term, missing_score)
        for term in terms.values():
            if not term["applicable"]:
                assert term["contribution"] == 0
                check_term_text(node, term, missing_score)

        # final = Σ normalized × weight / Σ weight over the applicable terms, from the scores as shown.
        applicable = [t for t in n["terms"] if t["applicable"]]
        total = 0.0
        for t in applicable:
            total += t["normalized"] * t["weight"]
        final = total / total_weight
        assert_shown(final, n["final_score"], f"{node} final_score")
        text = n["final_arithmetic"]
        assert text.endswith(f"= {fmt_score(n['final_score'])}"), f"{node}: {text!r}"
        for t in applicable:
            times = "" if len(applicable) == 1 and t["weight"] == 1 else f" × {t['weight']}"
            part = fmt_score(t["normalized"]) + times
            assert part in text, f"{node}: {text!r} lacks {part!r}"
        if not (len(applicable) == 1 and total_weight == 1):
            assert f"/ {total_weight} =" in text, f"{node}: {text!r} lacks the total weight {total_weight}"

    check_answers(explanation, scored)
    check_measured_leader(explanation, scored)


def check_answers(explanation: Mapping[str, Any], scored: Sequence[Mapping[str, Any]]) -> None:
    scale = explanation["answer_scale"]
    assert scale in {"fixed", "spread"}
    finals = [n["final_score"] for n in scored]
    low, high = min(finals), max(finals)
    spread = scale == "spread" and high > low
    if spread:
        assert (explanation["spread_min"], explanation["spread_max"]) == (low, high)
        assert fmt_score(low) in explanation["answer_rule"]
        assert fmt_score(high) in explanation["answer_rule"]
    else:
        assert explanation["spread_min"] is None
        assert explanation["spread_max"] is None
    weight = explanation["extender_weight"]
    answers: dict[str, int] = {}
    for n in scored:
        node, final = n["node"], n["final_score"]
        value, answer = answer_of(final, scale, (low, high) if spread else None)
        assert n["extender_score"] == answer, f"{node}: answered {n['extender_score']}, recomputed {answer}"
        answers[node] = answer
        text = n["answer_arithmetic"]
        if value is not None:
            scaled = f"= {fmt_score(value)} → {round_half_up(value)}"
            assert scaled in text, f"{node}: {text!r} lacks {scaled!r}"
        assert text.endswith(f"→ {answer}"), f"{node}: {text!r} does not end with the answer {answer}"
        assert fmt_score(final) in text
        if spread:
            assert f"({fmt_score(high)} − {fmt_score(low)})" in text, f"{node}: {text!r} lacks the spread"
        expected_points = answer * weight * 10 if weight else None
        assert n["kube_scheduler_points"] == expected_points, f"{node}: {n['kube_scheduler_points']} points"

    best = max(finals)
    preferred = next(n for n in scored if n["final_score"] == best)
    assert explanation["preferred_node"] == preferred["node"]
    top = answers[preferred["node"]]
    tie = any(answers[n["node"]] == top and n["final_score"] < best for n in scored)
    assert explanation["answer_tie"] is tie
    tied = [n["node"] for n in scored if n["node"] != preferred["node"] and answers[n["node"]] == top]
    assert explanation["tied_nodes"] == tied

    by_name = {n["node"]: n for n in scored}
    if explanation["runner_up"]:
        winner = by_name[explanation["chosen_node"] or explanation["preferred_node"]]
        margin = winner["final_score"] - by_name[explanation["runner_up"]]["final_score"]
        assert_shown(margin, explanation["margin"], "margin")


def check_measured_leader(explanation: Mapping[str, Any], scored: Sequence[Mapping[str, Any]]) -> None:
    """The node that would score highest were NetworkTraffic scored on measured bytes alone (no herd)."""
    figures = {n["node"]: terms_of(n)[TRAFFIC]["traffic"] for n in scored}
    measured = [f["measured_bytes"] for f in figures.values() if f["measured_bytes"] is not None]
    leader = explanation["measured_leader"]
    if not measured or not any(f["herd_bytes"] for f in figures.values()):
        assert leader == ""
        assert explanation["herd_changed_ranking"] is False
        return
    highest = max(measured)
    finals: dict[str, float] = {}
    for n in scored:
        total = weights = 0.0
        for t in n["terms"]:
            if not t["applicable"]:
                continue
            m = t["traffic"]["measured_bytes"] if t["plugin"] == TRAFFIC else None
            score = (100.0 - m * 100.0 / highest if highest > 0 else 100.0) if m is not None else t["normalized"]
            total += score * t["weight"]
            weights += t["weight"]
        finals[n["node"]] = total / weights
    best = max(finals.values())
    assert leader in finals, f"measured leader {leader!r}: {finals}"
    assert finals[leader] >= best - 1e-6, f"measured leader {leader!r}: {finals}"
    assert explanation["herd_changed_ranking"] is (leader != explanation["preferred_node"])
