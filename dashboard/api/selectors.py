"""Reads of the audit API: every query the views run is here."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import msgspec
from django.db.models import Prefetch, QuerySet

from dashboard.extender.runtime import load_runtime_profiles
from dashboard.models import NodeTally, SchedulingCycle, VerbCall
from dashboard.traffic.models import TrafficRefresh
from scheduler_core.explain import Explanation, explain
from scheduler_core.profiles import ProfileError
from scheduler_core.recompute import Mismatch, recompute_explanation

REDACTED = "***"
_SECRET_KEY = re.compile(r"pass(word|wd)?|secret|token|credential|api[-_]?key|auth|bearer|private|cookie", re.I)
TRAFFIC_PLUGIN = "NetworkTraffic"


class ProfilesUnavailableError(Exception):
    """The profiles file cannot be read or is invalid (the extender would refuse to start with it)."""


# --- cycles -----------------------------------------------------------------------------------------


def cycle_list() -> QuerySet[SchedulingCycle]:
    # candidate_nodes is kilobytes per 1000-node cycle and only ever filtered on.
    return SchedulingCycle.objects.defer("candidate_nodes")


def cycle_with_calls() -> QuerySet[SchedulingCycle]:
    calls = Prefetch("calls", queryset=VerbCall.objects.order_by("started_at", "id"))
    return cycle_list().prefetch_related(calls)


def cycle_latest_for_pod(*, namespace: str = "", name: str = "", pod_uid: str = "") -> SchedulingCycle | None:
    """The newest cycle of a pod, by UID or by namespace and name, with its calls."""
    cycles = cycle_with_calls()
    cycles = cycles.filter(pod_uid=pod_uid) if pod_uid else cycles.filter(pod_namespace=namespace, pod_name=name)
    return cycles.order_by("-started_at", "-id").first()


def _traffic_window_minutes(profile_name: str) -> int | None:
    """The profile's current ``timeRangeInMinutes`` (the record does not carry it); None when unknown."""
    try:
        profile = load_runtime_profiles().get(profile_name)
    except (ProfileError, OSError):
        return None
    window = profile.plugin_args.get(TRAFFIC_PLUGIN, {}).get("timeRangeInMinutes") if profile else None
    return window if isinstance(window, int) else None


def cycle_explanation(*, cycle: SchedulingCycle) -> Explanation:
    """Explain a cycle from its calls (prefetched by ``cycle_with_calls``)."""
    records = {call.verb: call.record for call in cycle.calls.all() if call.http_status == 200}
    return records_explanation(records=records, chosen_node=cycle.chosen_node, error=cycle.error, profile=cycle.profile)


def records_explanation(*, records: Mapping[str, Any], chosen_node: str, error: str, profile: str) -> Explanation:
    """Explain a cycle from its answered calls' records by verb (as ``cycle_explanation`` collects them)."""
    return explain(
        filter_record=records.get("filter"),
        prioritize_record=records.get("prioritize"),
        chosen_node=chosen_node,
        error=error,
        traffic_window_minutes=_traffic_window_minutes(profile),
    )


def cycle_explanations_recomputed(
    *, started_after: datetime | None = None, limit: int | None = None, chunk_size: int = 200
) -> Iterator[tuple[SchedulingCycle, list[Mismatch]]]:
    """Each cycle (oldest first) with what its explanation, as the audit API serves it, fails to add up to."""
    cycles = cycle_with_calls().order_by("started_at", "id")
    if started_after is not None:
        cycles = cycles.filter(started_at__gte=started_after)
    if limit is not None:
        cycles = cycles[:limit]
    for cycle in cycles.iterator(chunk_size=chunk_size):
        served = msgspec.json.decode(msgspec.json.encode(cycle_explanation(cycle=cycle)))  # the JSON an auditor reads
        yield cycle, recompute_explanation(served)


def cycle_export_queryset() -> QuerySet[SchedulingCycle]:
    return cycle_list().order_by("started_at", "id")


# --- nodes ------------------------------------------------------------------------------------------


def node_list() -> QuerySet[NodeTally]:
    return NodeTally.objects.all()


def traffic_refresh_list() -> QuerySet[TrafficRefresh]:
    """Refresh runs without their per-node values (those are the snapshots)."""
    return TrafficRefresh.objects.defer("bytes_by_node")


def traffic_snapshot_list() -> QuerySet[TrafficRefresh]:
    """The refreshes whose per-node values were kept (one per history interval): traffic over time."""
    return TrafficRefresh.objects.filter(bytes_by_node__isnull=False)


# --- profiles ---------------------------------------------------------------------------------------


def _redact_url(text: str) -> str:
    try:
        parts = urlsplit(text)
    except ValueError:
        return text
    if not parts.scheme or not parts.netloc:
        return text
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, _password = userinfo.partition(":")
        netloc = f"{user}:{REDACTED}@{host}" if colon else f"{REDACTED}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, REDACTED if _SECRET_KEY.search(k) else v) for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact(value: Any, key: str = "") -> Any:
    """Profile configuration with secrets masked: values of secret-looking keys, URL passwords and tokens."""
    if isinstance(value, Mapping):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v, key) for v in value]
    if key and _SECRET_KEY.search(key) and value not in (None, "", False):
        return REDACTED
    if isinstance(value, str) and "://" in value:
        return _redact_url(value)
    return value


def profile_list() -> list[dict[str, Any]]:
    """The effective configuration of every profile, as the extender loads it, redacted."""
    try:
        profiles = load_runtime_profiles()
    except (ProfileError, OSError) as exc:
        raise ProfilesUnavailableError(str(exc)) from None
    return [redact(profile.describe()) for profile in profiles.values()]
