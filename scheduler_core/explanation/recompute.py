"""An auditor's check of an explanation: recompute every score and answer from the figures it shows.

Takes the explanation as the audit API serves it (``GET /api/v1/why/``, a cycle's ``explanation``, the NDJSON
export's), plain JSON, and nothing else: no record, no profile, no engine. What it recomputes, with the formulas the
explanation states:

- ``NetworkTraffic``: estimate = measured + assumed (herd) bytes; the maximum over the candidates; the score
  ``100 − estimate × 100 / maximum`` (100 each when the maximum is 0); each recent bind counted by its pod's own
  traffic, ``max(0, assumed − observed)``, and the herd bytes as their sum (rounded) when they are all the node's
  binds, at least that sum when others decayed beside them;
- ``NodeResourceFitByCR``: the mean of the requested resources' ``resourcesScore``, clamped to 0..100;
- ``ImageLocality``: ``present × 100 / requested``;
- the final score: the weighted mean of the applicable terms as shown; the answer: the ``answer_scale``'s rule on
  the final score as shown; kube-scheduler's points; whether rounding erased our preference, and the tied nodes.

Scores are compared at the 4 decimals the record keeps them to, answers exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler_core.extender.protocol.wire import MAX_EXTENDER_PRIORITY
from scheduler_core.extender.record.structs import SOURCE_LEARNED
from scheduler_core.extender.scoring.answer import fixed_answer, preference_tied, spread_answer

TOLERANCE = 1.5e-4
"""A score is kept to 4 decimals (``engine.round4``: times 10⁴, rounded half to even): a mean that falls on a 5 in
the 5th decimal is kept one unit below what rounding half up by hand gives (29.16665 is kept as 29.1666). Anything
further off does not add up."""


@dataclass(frozen=True, slots=True)
class Mismatch:
    node: str
    """Empty for the cycle as a whole."""
    what: str
    shown: Any
    recomputed: Any

    def __str__(self) -> str:
        where = f"{self.node}: " if self.node else ""
        return f"{where}{self.what} shown as {self.shown!r}, recomputed as {self.recomputed!r}"


def _close(shown: float | None, recomputed: float | None) -> bool:
    if shown is None or recomputed is None:
        return shown is recomputed
    return math.isclose(shown, recomputed, rel_tol=0.0, abs_tol=TOLERANCE)


def _traffic_score(figures: Mapping[str, Any]) -> float | None:
    """None: the node had no usable measurement, and the record does not say what its policy scores it."""
    measured = figures.get("measured_bytes")
    if measured is None:
        missing: float | None = figures.get("missing_score")
        return missing
    largest = figures.get("max_estimate_bytes") or 0.0
    estimate = measured + (figures.get("herd_bytes") or 0.0)
    return 100.0 if largest <= 0 else 100.0 - estimate * 100.0 / largest


HERD_ROUNDING = 0.5 + 1e-6
"""Herd bytes are kept in whole bytes (rounded half to even): a sum of counted bytes rounds to within half a byte."""


def _reconciled_mismatches(node: str, traffic: Mapping[str, Any]) -> list[Mismatch]:
    """Each bind counted by its pod's own traffic is ``max(0, assumed − observed)``; the node's herd bytes are their
    sum when they are all its binds, and no less than it when others decayed beside them."""
    binds = traffic.get("herd_reconciled") or []
    found: list[Mismatch] = []
    total = 0.0
    for bind in binds:
        expected = max(0.0, bind["assumed_bytes"] - bind["observed_bytes"])
        if not math.isclose(bind["counted_bytes"], expected, rel_tol=1e-12, abs_tol=1e-6):
            found.append(Mismatch(node, f"herd bytes counted for {bind['pod']}", bind["counted_bytes"], expected))
        total += bind["counted_bytes"]
    if not binds:
        return found
    herd = traffic.get("herd_bytes") or 0.0
    if len(binds) == traffic.get("herd_binds") and abs(herd - total) > HERD_ROUNDING:
        found.append(Mismatch(node, "herd bytes (the reconciled binds' sum)", herd, round(total)))
    elif herd < total - HERD_ROUNDING:
        found.append(Mismatch(node, "herd bytes (at least the reconciled binds' sum)", herd, round(total)))
    return found


def _term_mismatches(node: str, term: Mapping[str, Any], largest: float | None) -> list[Mismatch]:
    found: list[Mismatch] = []
    shown = term["normalized"]
    recomputed: float | None = None
    if (traffic := term.get("traffic")) is not None:
        estimate = traffic.get("estimate_bytes")
        if traffic.get("measured_bytes") is not None:
            expected = traffic["measured_bytes"] + (traffic.get("herd_bytes") or 0.0)
            if estimate is None or not math.isclose(estimate, expected, rel_tol=1e-12, abs_tol=1e-6):
                found.append(Mismatch(node, "NetworkTraffic estimate_bytes", estimate, expected))
            if traffic.get("max_estimate_bytes") != largest:
                found.append(
                    Mismatch(node, "NetworkTraffic max_estimate_bytes", traffic["max_estimate_bytes"], largest)
                )
        found += _reconciled_mismatches(node, traffic)
        recomputed = _traffic_score(traffic)
    elif (resources := term.get("resources")) is not None:
        scores = list(resources.get("resource_scores", {}).values())
        if scores and all(s is not None for s in scores):
            mean = sum(scores) / len(scores)
            recomputed = min(100.0, max(0.0, mean))
            if resources.get("mean") is None or not _close(resources["mean"], mean):
                found.append(Mismatch(node, "NodeResourceFitByCR mean", resources.get("mean"), mean))
    elif (images := term.get("images")) is not None and images.get("present") is not None and images["requested"]:
        recomputed = images["present"] * 100.0 / images["requested"]
    if recomputed is not None and not _close(shown, recomputed):
        found.append(Mismatch(node, f"{term['plugin']} score", shown, round(recomputed, 4)))
    return found


def _final(terms: Sequence[Mapping[str, Any]]) -> float | None:
    applicable = [t for t in terms if t.get("applicable") and t.get("weight")]
    weights = sum(t["weight"] for t in applicable)
    if not weights:
        return None
    total: float = sum(t["normalized"] * t["weight"] for t in applicable)
    return round(total / float(weights), 4)


def _largest_estimate(scored: Sequence[Mapping[str, Any]]) -> float | None:
    estimates: list[float] = [
        t["traffic"]["estimate_bytes"]
        for n in scored
        for t in n.get("terms", [])
        if t.get("traffic") is not None and t["traffic"].get("estimate_bytes") is not None
    ]
    return max(estimates) if estimates else None


def _pod_assumed_mismatches(shown: Mapping[str, Any] | None) -> list[Mismatch]:
    """A learned figure is its rate times the window, rounded; its words name the pods, the workload and the
    percentile it follows from."""
    if not shown or shown.get("source") != SOURCE_LEARNED:
        return []
    found: list[Mismatch] = []
    window = shown.get("window_seconds")
    if window is not None:
        expected = float(round(shown["bytes_per_second"] * window))
        if shown["bytes"] != expected:
            found.append(Mismatch("", "pod assumed bytes", shown["bytes"], expected))
    words = f"learned from {shown['pods']} pods of {shown['workload']}, "
    if not str(shown.get("text", "")).startswith(words):
        found.append(Mismatch("", "pod assumed bytes' source", shown.get("text"), words + "…"))
    return found


def recompute_explanation(explanation: Mapping[str, Any]) -> list[Mismatch]:
    """Every figure of ``explanation`` that does not follow from the others; empty when the explanation adds up."""
    found: list[Mismatch] = _pod_assumed_mismatches(explanation.get("pod_assumed"))
    scored = [n for n in explanation.get("nodes", []) if n.get("final_score") is not None]
    if not scored:
        return found
    largest = _largest_estimate(scored)
    forced: set[int] = set()
    for position, node in enumerate(scored):
        name = node["node"]
        if "answered 0 whatever the plugins scored" in node.get("final_arithmetic", ""):
            forced.add(position)  # unknown to the node cache: its final and answer are 0 by rule
            continue
        for term in node.get("terms", []):
            if term.get("applicable"):
                found += _term_mismatches(name, term, largest)
        final = _final(node.get("terms", []))
        if final is not None and not _close(node["final_score"], final):
            found.append(Mismatch(name, "final score", node["final_score"], final))
    finals = [n["final_score"] for n in scored]
    bounds: tuple[float, float] | None = None
    if explanation.get("answer_scale") == "spread":
        kept = [f for position, f in enumerate(finals) if position not in forced]
        bounds = (min(kept), max(kept)) if kept and max(kept) > min(kept) else None
        shown = (explanation.get("spread_min"), explanation.get("spread_max"))
        if shown != (bounds or (None, None)):
            found.append(Mismatch("", "spread bounds", shown, bounds))
    weight = explanation.get("extender_weight")
    for position, node in enumerate(scored):
        final = node["final_score"]
        if position in forced:
            answer = 0
        elif explanation.get("answer_scale") == "spread":
            answer = spread_answer(final, *bounds) if bounds else MAX_EXTENDER_PRIORITY
        else:
            answer = fixed_answer(final)
        if node["extender_score"] != answer:
            found.append(Mismatch(node["node"], "answer", node["extender_score"], answer))
        points = node["extender_score"] * weight * 10 if weight else None
        if node.get("kube_scheduler_points") != points:
            found.append(Mismatch(node["node"], "kube-scheduler points", node.get("kube_scheduler_points"), points))
    extender = [n["extender_score"] for n in scored]
    tie = preference_tied(finals, extender)
    if explanation.get("answer_tie") != tie:
        found.append(Mismatch("", "answer_tie", explanation.get("answer_tie"), tie))
    return found
