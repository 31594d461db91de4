"""The Celery beat schedule: one ``prefetch_traffic`` entry per distinct query among the profiles, and pruning."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dashboard.traffic.snapshots import query_key, query_to_dict
from scheduler_core.extender.scoring.profiles import Profile

PREFETCH_TASK = "schedlens.prefetch_traffic"
PRUNE_TASK = "schedlens.prune_traffic_refreshes"
PRUNE_EVERY_SECONDS = 3600.0
PRUNE_CYCLES_TASK = "schedlens.prune_cycles"
ENSURE_PARTITIONS_TASK = "schedlens.ensure_partitions"
OUTCOMES_TASK = "schedlens.refresh_placement_outcomes"
"""What each placement did to traffic (``dashboard.outcomes``), when ``SCHEDLENS_OUTCOME_RUNNER=celery``."""


def traffic_beat_schedule(profiles: Mapping[str, Profile], *, refresh_seconds: float) -> dict[str, dict[str, Any]]:
    """Entries for ``beat_schedule``. A refresh that could not start within one interval is dropped
    (``expires``): the next one is already queued, and a backlog of old refreshes helps nobody."""
    queries = {q for profile in profiles.values() for q in profile.traffic_queries()}
    schedule: dict[str, dict[str, Any]] = {}
    for query in sorted(queries, key=query_key):
        schedule[f"prefetch-traffic-{query_key(query)}"] = {
            "task": PREFETCH_TASK,
            "schedule": refresh_seconds,
            "args": (query_to_dict(query),),
            "options": {"expires": refresh_seconds},
        }
    schedule["prune-traffic-refreshes"] = {"task": PRUNE_TASK, "schedule": PRUNE_EVERY_SECONDS}
    # Audit retention (dashboard.services.retention.cycles_prune) runs on the same hourly beat.
    schedule["prune-cycles"] = {"task": PRUNE_CYCLES_TASK, "schedule": PRUNE_EVERY_SECONDS}
    # PostgreSQL's day partitions of the record, kept DAYS_AHEAD days ahead (dashboard.services.partitions).
    schedule["ensure-partitions"] = {"task": ENSURE_PARTITIONS_TASK, "schedule": PRUNE_EVERY_SECONDS}
    return schedule
