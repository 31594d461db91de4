"""A cycle's columns, derived from its calls whenever one joins it: the calls are the source of truth.

The fold (``dashboard.ingest.cycles``) calls :func:`summarize` with each call's :class:`Summary` (built with the
new call, or from a stored call's record) after every call it adds, because the next call's match reads the
cycle's outcome and verbs.
"""

from __future__ import annotations

from collections.abc import Sequence

from dashboard.ingest.new_calls import Summary
from dashboard.models import NodeMode, Outcome, SchedulingCycle
from scheduler_core.extender.record.structs import BIND, FILTER, PREEMPT, PRIORITIZE, VERBS

SUMMARY_FIELDS = [
    "pod_namespace",
    "pod_name",
    "started_at",
    "finished_at",
    "filter_ms",
    "prioritize_ms",
    "bind_ms",
    "preempt_ms",
    "error",
    "node_mode",
    "metric_age_seconds",
    "candidate_count",
    "feasible_count",
    "candidate_nodes",
    "candidate_slot",
    "preferred_node",
    "answer_tie",
    "outcome",
    "chosen_node",
    "profile_version",
]
"""What :func:`summarize` (and a late pod name) may change on a stored cycle."""


def candidates(summaries: Sequence[Summary]) -> Sequence[str]:
    """The cycle's candidate nodes: the filter's, else prioritize's (the last call of each verb counts)."""
    by_verb = {s.verb: s for s in summaries}
    if (found := by_verb.get(FILTER)) is not None and found.has_record:
        return found.nodes
    if (found := by_verb.get(PRIORITIZE)) is not None and found.has_record:
        return found.nodes
    return ()


def summarize(cycle: SchedulingCycle, summaries: Sequence[Summary], *, postgres: bool) -> None:
    """Derive the cycle's columns from its calls; the calls are the source of truth.

    ``postgres``: the database is PostgreSQL. Passed in, read once per batch, because this runs for every call and
    ``connection.vendor`` goes through Django's per-context connection proxy."""
    by_verb = {s.verb: s for s in summaries}
    cycle.started_at = min(s.started_at for s in summaries)
    cycle.finished_at = max(s.finished_at for s in summaries)
    for verb in VERBS:
        setattr(cycle, f"{verb}_ms", by_verb[verb].duration_ms if verb in by_verb else None)
    cycle.error = "; ".join(f"{s.verb}: {s.error}" for s in summaries if s.error)

    filtered = by_verb.get(FILTER)
    scored = by_verb.get(PRIORITIZE)
    modes = [s.node_mode for s in summaries if s.node_mode]
    cycle.node_mode = modes[0] if modes else NodeMode.NONE
    ages = [age for s in (filtered, scored) if s is not None for age in s.ages]
    known_ages = [a for a in ages if a is not None]
    cycle.metric_age_seconds = max(known_ages) if known_ages else None

    if filtered is not None:
        cycle.candidate_count = len(filtered.nodes)
        cycle.feasible_count = filtered.passed_count
    elif scored is not None:
        cycle.candidate_count = len(scored.nodes)
    names = candidates(summaries)
    if not postgres:  # read by dashboard.filters (PostgreSQL: NodePosting, ``record_writes.postings_add``)
        cycle.candidate_nodes = f"|{'|'.join(names)}|" if names else ""
    cycle.preferred_node = ""
    if scored is not None and scored.nodes:
        cycle.preferred_node = scored.preferred
    elif filtered is not None and filtered.passed_count == 1:
        cycle.preferred_node = filtered.only_passed  # kube-scheduler skips prioritize for one node
    cycle.answer_tie = scored is not None and scored.answer_tie
    # The version that decided: the prioritize's, else the filter's, else any call's (a refusal has none).
    versions = (s.profile_version for s in (scored, filtered, *summaries) if s is not None and s.profile_version)
    cycle.profile_version = next(versions, "")

    bind = by_verb.get(BIND)
    if any(s.http_status != 200 or (s.error and s.verb in {FILTER, BIND}) for s in summaries):
        cycle.outcome = Outcome.ERROR
    elif bind is not None:
        cycle.outcome = Outcome.BOUND
    elif (filtered is not None and not filtered.passed_count) or PREEMPT in by_verb:
        cycle.outcome = Outcome.UNSCHEDULABLE
    else:
        cycle.outcome = Outcome.PENDING
    cycle.chosen_node = bind.bind_node if bind is not None and not bind.error else ""
