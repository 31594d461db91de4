"""Reads of the audit API: every query the views run is here."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.db.models import QuerySet

from dashboard.models import NodeReasonTally, NodeTally, SchedulingCycle
from dashboard.runtime import configured_profiles
from dashboard.selectors import cycle_list, cycles_with_calls
from dashboard.traffic.models import TrafficRefresh
from scheduler_core.profiles import ProfileError

REDACTED = "***"
_SECRET_KEY = re.compile(r"pass(word|wd)?|secret|token|credential|api[-_]?key|auth|bearer|private|cookie", re.I)


class ProfilesUnavailableError(Exception):
    """The profiles file cannot be read or is invalid (the extender would refuse to start with it)."""


# --- cycles (the reads the dashboard shares are in dashboard.selectors) ---------------------------------


def cycle_latest_for_pod(*, namespace: str = "", name: str = "", pod_uid: str = "") -> SchedulingCycle | None:
    """The newest cycle of a pod, by UID or by namespace and name, with its calls."""
    cycles = cycles_with_calls()
    cycles = cycles.filter(pod_uid=pod_uid) if pod_uid else cycles.filter(pod_namespace=namespace, pod_name=name)
    return cycles.order_by("-started_at", "-id").first()


def cycle_export_queryset() -> QuerySet[SchedulingCycle]:
    return cycle_list().order_by("started_at", "id")


# --- nodes ------------------------------------------------------------------------------------------


def node_list() -> QuerySet[NodeTally]:
    return NodeTally.objects.all()


def node_reasons(nodes: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Why each of ``nodes`` was filtered out over the retained record, most common first: one query."""
    found: dict[str, list[dict[str, Any]]] = {node: [] for node in nodes}
    rows = NodeReasonTally.objects.filter(node__in=nodes).order_by("node", "-count", "plugin", "reason")
    for node, plugin, reason, count in rows.values_list("node", "plugin", "reason", "count"):
        found[node].append({"plugin": plugin, "reason": reason, "count": count})
    return found


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
        profiles = configured_profiles()
    except (ProfileError, OSError) as exc:
        raise ProfilesUnavailableError(str(exc)) from None
    return [redact(profile.describe()) for profile in profiles.values()]
