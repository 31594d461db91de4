"""An auditor recomputes every score and answer of a recorded cycle from the audit API's JSON alone.

Hypothesis generates cycles (2–12 candidates; traffic with ties, zeros, missing series and stale snapshots; recent
binds weighing on some nodes; profiles mixing NetworkTraffic with NodeResourceFitByCR and ImageLocality at weights
1..5; the ``fixed`` or ``spread`` answer scale; ``missingPolicy`` neutral or fail). Each is driven through the real
extender verbs (``scheduler_core.extender.verbs.Extender``: herd binds, filter, prioritize, and bind for some), folded
by the real ingester, and read back through ``/api/v1/why/`` and ``/api/v1/cycles/<id>/``
(``tests.support.explained_cycles``).

:func:`~tests.support.explanation_checks.recompute` then works from the ``explanation`` object only (what a node without
a measurement scores included: ``traffic.missing_score``) and redoes the arithmetic the documentation promises, to
the 4 decimals shown (``tests.support.explanation_checks`` says how, and where one unit of the 4th decimal is allowed).
:func:`~tests.support.explained_cycles.assert_figures_are_the_inputs` separately ties the figures to what the test fed
the verbs (the missing score to the scenario's ``missingPolicy`` among them), so a self-consistent but wrong
explanation cannot pass.

The exports with ``?include=explanation`` are checked the same way in ``test_explanations_exported``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import event, example, given

from tests.support.explained_cycles import (
    ALL_ZERO,
    HALF_UP_FIXED,
    HALF_UP_SPREAD,
    HERD_TIE,
    NEAR_TIE_FIXED,
    PROPERTY,
    STALE_FAIL,
    TINY_MAXIMUM,
    Scenario,
    assert_figures_are_the_inputs,
    in_savepoint,
    ingest_and_fetch,
    record_cycle,
    scenarios,
)
from tests.support.explanation_checks import TRAFFIC, recompute, terms_of


def describe(explanation: Mapping[str, Any]) -> None:
    """What the example exercised (``--hypothesis-show-statistics``)."""
    scored = [n for n in explanation["nodes"] if n["final_score"] is not None]
    event(f"{'no' if not scored else '1' if len(scored) == 1 else '2-4' if len(scored) <= 4 else '5+'} scored nodes")
    if not scored:
        return
    event(f"answer scale {explanation['answer_scale']}")
    figures = [terms_of(n)[TRAFFIC]["traffic"] for n in scored]
    measured = [f["measured_bytes"] for f in figures if f["measured_bytes"] is not None]
    for label, happened in [
        ("herd bytes on some node", any(f["herd_bytes"] for f in figures)),
        ("a node without a measurement", len(measured) < len(figures)),
        ("stale metrics", any(f["missing_reason"] == "metrics stale" for f in figures)),
        ("every estimate 0", bool(measured) and figures[0]["max_estimate_bytes"] == 0),
        ("equal final scores", len({n["final_score"] for n in scored}) < len(scored)),
        ("answer_tie", explanation["answer_tie"]),
        ("herd changed the ranking", explanation["herd_changed_ranking"]),
        ("a term not applicable", any(not t["applicable"] for t in scored[0]["terms"])),
        ("3 plugins", len(scored[0]["terms"]) == 3),
        ("extender weight stated", explanation["extender_weight"] is not None),
    ]:
        if happened:
            event(label)


# --- the property ------------------------------------------------------------------------------------------------


@pytest.mark.django_db
@PROPERTY
@given(scenario=scenarios())
@example(scenario=ALL_ZERO)
@example(scenario=STALE_FAIL)
@example(scenario=HERD_TIE)
@example(scenario=HALF_UP_FIXED)
@example(scenario=HALF_UP_SPREAD)
@example(scenario=NEAR_TIE_FIXED)
@example(scenario=TINY_MAXIMUM)
def test_every_score_and_answer_recomputes_from_the_why_and_cycle_json(fast_api: Any, scenario: Scenario) -> None:
    def body() -> None:
        recorded = record_cycle(scenario)
        fetched = ingest_and_fetch(fast_api, scenario, recorded)
        why = fetched.why["explanation"]
        recompute(why)
        assert_figures_are_the_inputs(scenario, recorded, why)
        assert fetched.why["cycle"]["answer_tie"] is why["answer_tie"]
        # The cycle detail explains the same cycle the same way, and recomputes on its own too.
        recompute(fetched.detail["explanation"])
        assert fetched.detail["explanation"] == why
        describe(why)

    in_savepoint(body)
