"""Reads of nodes for the nodes page and the API: per-node counts over the retained record, and traffic over time.

The counts are the ones the ingester and the pruner keep (``NodeTally``, ``NodeReasonTally``:
``dashboard.services.node_tallies``), read in one query each: nothing here decodes calls to count them, so the page
costs the same at a thousand cycles as at ten million. Traffic over time comes from the prefetch's refresh
snapshots; without them, from the latest recorded filter call alone (one call decoded).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from dashboard.models import NodeReasonTally, NodeTally, SchedulingCycle
from dashboard.selectors.cycles import call_filter_record, call_list_recent
from scheduler_core.extender.record.structs import FILTER

REFRESH_HISTORY = timedelta(hours=6)
"""How far back the chart reads the refresh snapshots."""
TOP_REASONS = 3


@dataclass
class NodeStats:
    """One node's counts over the retained record, and its traffic over time."""

    name: str
    considered: int = 0
    placements: int = 0
    preferred: int = 0
    """Cycles whose highest-scored node it was."""
    filtered: int = 0
    last_seen_at: datetime | None = None
    reason_counts: list[tuple[str, int]] = field(default_factory=list)
    """("plugin: reason", filter calls that failed the node for it), most common first."""
    missing_series: int = 0
    """1 when the latest recorded filter call (the fallback source) had no traffic series for the node."""
    absent_from_refresh: bool = False
    """Missing from the latest traffic refresh snapshot that matched other nodes."""
    traffic: list[tuple[datetime, float | None]] = field(default_factory=list)
    """(when, received bytes over the window) oldest first."""

    @property
    def latest_bytes(self) -> float | None:
        return next((value for _, value in reversed(self.traffic) if value is not None), None)

    @property
    def filtered_share(self) -> float:
        return self.filtered / self.considered if self.considered else 0.0

    @property
    def top_reasons(self) -> list[tuple[str, int]]:
        return self.reason_counts[:TOP_REASONS]

    @property
    def unmatched(self) -> bool:
        return self.absent_from_refresh or (self.missing_series > 0 and self.latest_bytes is None)


@dataclass(frozen=True, slots=True)
class NodesReport:
    nodes: list[NodeStats]
    since: datetime | None
    """The oldest retained cycle's start: the counts cover the record from there on."""
    source: str
    """Where traffic over time came from: ``refresh`` (the prefetch's snapshots), ``call`` (the latest recorded filter
    call) or "" (neither)."""
    traffic_at: datetime | None = None
    """The latest recorded filter call's start, when ``source`` is ``call``."""


def node_report() -> NodesReport:
    """Every node of the retained record with its counts and reasons, most placed first, and its traffic."""
    stats: dict[str, NodeStats] = {}
    rows = NodeTally.objects.values_list(
        "node", "considered", "placements", "preferred", "filtered_out", "last_seen_at"
    )
    for name, considered, placements, preferred, filtered, seen in rows:
        stats[name] = NodeStats(name, considered, placements, preferred, filtered, seen)
    reasons = NodeReasonTally.objects.order_by("node", "-count", "plugin", "reason")
    for name, plugin, reason, count in reasons.values_list("node", "plugin", "reason", "count"):
        entry = stats.get(name)
        if entry is not None:
            entry.reason_counts.append((f"{plugin}: {reason}", count))
    since = SchedulingCycle.objects.order_by("started_at", "id").values_list("started_at", flat=True).first()
    source, traffic_at = "", None
    if _refresh_traffic(stats):
        source = "refresh"
    elif (traffic_at := _latest_call_traffic(stats)) is not None:
        source = "call"
    ordered = sorted(stats.values(), key=lambda s: (-s.placements, -s.considered, s.name))
    return NodesReport(ordered, since, source, traffic_at)


def _refresh_traffic(stats: dict[str, NodeStats]) -> bool:
    """Traffic over time from the prefetch's sampled refreshes, when they exist; True when they gave it."""
    from dashboard.traffic.models import TrafficRefresh
    from dashboard.traffic.selectors import traffic_history

    if not stats:
        return False
    latest = (
        TrafficRefresh.objects.filter(bytes_by_node__isnull=False, error="")
        .order_by("-started_at", "-id")
        .values_list("query_key", "bytes_by_node")
        .first()
    )
    if latest is None:
        return False
    key, newest = latest
    history = traffic_history(query_key=key, since=timezone.now() - REFRESH_HISTORY)
    for entry in stats.values():
        entry.traffic = [(at, values.get(entry.name)) for at, values in history]
        entry.absent_from_refresh = bool(newest and entry.name not in newest)
    return True


def _latest_call_traffic(stats: dict[str, NodeStats]) -> datetime | None:
    """Without refresh snapshots: each node's traffic as the latest answered filter call recorded it (one point),
    among the newest calls. Returns that call's start, None when there is none or it recorded no traffic."""
    latest = (
        call_list_recent()
        .filter(verb=FILTER, http_status=200)
        .order_by("-id")
        .values_list("started_at", "body", "record_json")
        .first()
    )
    if latest is None or not stats:
        return None
    at, body, record_json = latest
    record = call_filter_record(body=body, record_json=record_json)
    if record is None or not record.traffic_bytes:
        return None
    for name, value in zip(record.nodes, record.traffic_bytes, strict=False):
        entry = stats.get(name)
        if entry is not None:
            entry.traffic = [(at, value)]
            entry.missing_series = int(value is None)
    return at


def node_list() -> QuerySet[NodeTally]:
    return NodeTally.objects.all()


def node_reasons(*, nodes: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Why each of ``nodes`` was filtered out over the retained record, most common first: one query."""
    found: dict[str, list[dict[str, Any]]] = {node: [] for node in nodes}
    rows = NodeReasonTally.objects.filter(node__in=nodes).order_by("node", "-count", "plugin", "reason")
    for node, plugin, reason, count in rows.values_list("node", "plugin", "reason", "count"):
        found[node].append({"plugin": plugin, "reason": reason, "count": count})
    return found
