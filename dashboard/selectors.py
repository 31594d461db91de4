"""Reads of recorded cycles shared by the dashboard, the audit API, pod Events and the commands.

One place for what they must agree on: which calls a cycle has, in which order, and how a cycle is explained
(the same ``scheduler_core.explain`` with the same traffic window and staleness limit, :func:`cycle_traffic_terms`,
everywhere a person reads an explanation).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

import msgspec
from django.db.models import Prefetch, QuerySet
from django.utils import timezone

from dashboard.models import SchedulingCycle, VerbCall
from dashboard.runtime import configured_profiles
from scheduler_core.explain import Explanation, explain, explain_summary
from scheduler_core.profiles import ProfileError
from scheduler_core.recompute import Mismatch, recompute_explanation
from scheduler_core.record import FILTER, PRIORITIZE
from scheduler_core.traffic_terms import TrafficTerms, terms_of


def cycle_list() -> QuerySet[SchedulingCycle]:
    # candidate_nodes is kilobytes per 1000-node cycle and only ever filtered on.
    return SchedulingCycle.objects.defer("candidate_nodes")


NEWEST_FIRST_WINDOWS = (timedelta(days=1), timedelta(days=8))
"""How far back :func:`newest_first_page` looks before it reads the whole history: a day partition, then a week's."""


def newest_first_page(rows: QuerySet[SchedulingCycle], *, count: int, below: datetime | None) -> list[SchedulingCycle]:
    """The first ``count`` of ``rows`` (ordered newest first; those after a cursor at ``below``, if any), read from
    the newest day first, then the newest week, then the rest.

    On PostgreSQL's day partitions, one query over the whole history must find a first match in every partition
    before it yields the newest: a filter that most old days lack reads them all. When the window holds ``count``
    rows, no row outside it can come before them, so the page is the same as the whole history's.
    """
    top = below if below is not None else timezone.now()
    for window in NEWEST_FIRST_WINDOWS:
        page = list(rows.filter(started_at__gte=top - window)[:count])
        if len(page) >= count:
            return page
    return list(rows[:count])


def cycles_with_calls() -> QuerySet[SchedulingCycle]:
    """Cycles with their calls prefetched in the order they were made."""
    calls = Prefetch("calls", queryset=VerbCall.objects.order_by("started_at", "id"))
    return cycle_list().prefetch_related(calls)


def cycle_and_calls(*, cycle_id: int) -> tuple[SchedulingCycle, list[VerbCall]] | None:
    """One cycle and its calls in order, each call able to read a sibling its stored body refers to."""
    cycle = SchedulingCycle.objects.filter(pk=cycle_id).first()
    if cycle is None:
        return None
    calls = list(cycle.calls.order_by("started_at", "id"))
    for call in calls:
        call.__dict__["siblings"] = calls  # a prioritize body may refer to its cycle's filter call
    return cycle, calls


def cycle_traffic_terms(*, profile: str) -> TrafficTerms:
    """The traffic window and staleness limit a cycle of ``profile`` is explained with, for every screen and export.

    The record does not carry them, so they are the profile's as configured now, and say so; a profile no longer
    configured, or a profiles file that cannot be read, leaves them unknown with the reason, never a default. When
    cycles record their profile's version, this is the one place to read it first.
    """
    try:
        profiles = configured_profiles()
    except (ProfileError, OSError) as exc:
        return TrafficTerms(unknown=f"not recorded; the profiles configuration cannot be read: {exc}", profile=profile)
    configured = profiles.get(profile)
    return terms_of(profile, configured.plugin_args if configured is not None else None)


def cycle_explanation(*, cycle: SchedulingCycle) -> Explanation:
    """Explain a cycle from its calls (prefetched by ``cycles_with_calls``)."""
    records = {call.verb: call.record for call in cycle.calls.all() if call.http_status == 200}
    return records_explanation(records=records, chosen_node=cycle.chosen_node, error=cycle.error, profile=cycle.profile)


def records_explanation(*, records: Mapping[str, Any], chosen_node: str, error: str, profile: str) -> Explanation:
    """Explain a cycle from its answered calls' records by verb (as ``cycle_explanation`` collects them)."""
    return explain(
        filter_record=records.get(FILTER),
        prioritize_record=records.get(PRIORITIZE),
        chosen_node=chosen_node,
        error=error,
        traffic_terms=cycle_traffic_terms(profile=profile),
    )


def records_summary(*, records: Mapping[str, Any], chosen_node: str, error: str, profile: str) -> str:
    """``records_explanation(...).summary``, the same text, without explaining every node (the pod's Event)."""
    return explain_summary(
        filter_record=records.get(FILTER),
        prioritize_record=records.get(PRIORITIZE),
        chosen_node=chosen_node,
        error=error,
        traffic_window_minutes=cycle_traffic_terms(profile=profile).window_minutes,
    )


def cycle_explanations_recomputed(
    *, started_after: datetime | None = None, limit: int | None = None, chunk_size: int = 200
) -> Iterator[tuple[SchedulingCycle, list[Mismatch]]]:
    """Each cycle (oldest first) with what its explanation, as the audit API serves it, fails to add up to."""
    cycles = cycles_with_calls().order_by("started_at", "id")
    if started_after is not None:
        cycles = cycles.filter(started_at__gte=started_after)
    if limit is not None:
        cycles = cycles[:limit]
    for cycle in cycles.iterator(chunk_size=chunk_size):
        served = msgspec.json.decode(msgspec.json.encode(cycle_explanation(cycle=cycle)))  # the JSON an auditor reads
        yield cycle, recompute_explanation(served)
