"""Reads for history replays: the replays kept (newest first), one replay and its report, and the recorded cycles a
replay selects, read in chunks as the replay's columnar inputs (``dashboard.storage.replay_inputs``).

The selection takes the history's filters (``dashboard.filters.CycleFilterSet``: namespace, profile, a node among
the candidates) and a time range or the last N cycles.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
from django.db.models import QuerySet
from django.http import QueryDict

from dashboard.filters import CycleFilterSet
from dashboard.models import SchedulingCycle, VerbCall, shared_part_data
from dashboard.replays.models import HistoryReplay
from dashboard.storage.replay_inputs import Call, CycleReader, RecordedCycleRow
from scheduler_core.extender.record.structs import FILTER, PRIORITIZE
from scheduler_core.history_replay.recorded_cycles import RecordedCycle
from scheduler_core.history_replay.report import HistoryReplayReport

DEFAULT_LAST = 1000
"""Cycles replayed when the selection names neither a time range nor ``last``."""
SELECTION_FIELDS = ("since", "until", "last", "namespace", "profile", "node")


@dataclass(frozen=True, slots=True)
class ReplaySelection:
    """Which recorded cycles a replay replays (oldest first): those started in ``[since, until)`` or the newest
    ``last`` of them, of pods in ``namespace``, recorded under ``profile``, with ``node`` among the candidates."""

    since: datetime | None = None
    until: datetime | None = None
    last: int | None = None
    namespace: str = ""
    profile: str = ""
    node: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "last": self.last,
            "namespace": self.namespace,
            "profile": self.profile,
            "node": self.node,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReplaySelection:
        return cls(
            since=datetime.fromisoformat(data["since"]) if data.get("since") else None,
            until=datetime.fromisoformat(data["until"]) if data.get("until") else None,
            last=int(data["last"]) if data.get("last") is not None else None,
            namespace=str(data.get("namespace") or ""),
            profile=str(data.get("profile") or ""),
            node=str(data.get("node") or ""),
        )

    def filter_params(self) -> dict[str, str]:
        """The selection as ``CycleFilterSet`` parameters (the history's filters)."""
        params: dict[str, str] = {}
        if self.since is not None:
            params["started_after"] = self.since.isoformat()
        if self.until is not None:
            params["started_before"] = self.until.isoformat()
        if self.namespace:
            params["namespace"] = self.namespace
        if self.profile:
            params["profile"] = self.profile
        if self.node:
            params["node_considered"] = self.node
        return params

    def describe(self) -> str:
        """The selection in words: ``the last 1,000 cycles, namespace shop``."""
        parts = []
        if self.since is not None or self.until is not None:
            bounds = [
                f"from {self.since.isoformat()}" if self.since else "",
                f"until {self.until.isoformat()}" if self.until else "",
            ]
            parts.append("started " + " ".join(b for b in bounds if b))
        if self.last is not None:
            parts.append(f"the last {self.last:,} cycles")
        for label, value in (("namespace", self.namespace), ("profile", self.profile), ("node", self.node)):
            if value:
                parts.append(f"{label} {value}")
        return ", ".join(parts) or "every cycle"


_FILTER_NAMES = {"since": "started_after", "until": "started_before", "node": "node_considered"}


def selection_from_input(data: Mapping[str, Any]) -> tuple[ReplaySelection | None, dict[str, list[str]]]:
    """A selection from strings (a form, JSON), checked as the history's filters check them; the errors by field
    (``since``, ``until``, ``last``, ``namespace``, ``profile``, ``node``) when it is refused."""
    errors: dict[str, list[str]] = {}
    unknown = sorted(set(data) - set(SELECTION_FIELDS))
    if unknown:
        errors[unknown[0]] = [f"unknown selection field (known: {', '.join(SELECTION_FIELDS)})"]
    params = QueryDict(mutable=True)
    for key in ("since", "until", "namespace", "profile", "node"):
        value = data.get(key)
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            errors[key] = ["must be a string"]
            continue
        params[_FILTER_NAMES.get(key, key)] = value.strip()
    filterset = CycleFilterSet(params, queryset=SchedulingCycle.objects.none())
    if not filterset.is_valid():
        back = {v: k for k, v in _FILTER_NAMES.items()}
        for name, messages in filterset.errors.items():
            errors[back.get(name, name)] = [str(m) for m in messages]
    last: int | None = None
    raw_last = data.get("last")
    if raw_last is not None and raw_last != "":
        try:
            last = int(raw_last)
            if isinstance(raw_last, bool) or (isinstance(raw_last, float) and not raw_last.is_integer()):
                raise ValueError
        except (TypeError, ValueError):
            errors["last"] = [f"must be a whole number of cycles, got {str(raw_last)[:20]!r}"]
        else:
            if last < 1:
                errors["last"] = ["must be at least 1"]
    if errors:
        return None, errors
    cleaned = filterset.form.cleaned_data
    since, until = cleaned.get("started_after"), cleaned.get("started_before")
    if since is not None and until is not None and since >= until:
        return None, {"until": ["must be after since"]}
    if since is None and until is None and last is None:
        last = DEFAULT_LAST
    return (
        ReplaySelection(
            since=since,
            until=until,
            last=last,
            namespace=cleaned.get("namespace") or "",
            profile=cleaned.get("profile") or "",
            node=cleaned.get("node_considered") or "",
        ),
        {},
    )


def selected_cycles(selection: ReplaySelection) -> QuerySet[SchedulingCycle]:
    filterset = CycleFilterSet(selection.filter_params(), queryset=SchedulingCycle.objects.all())
    if not filterset.is_valid():  # checked when the replay was started
        raise ValueError(f"the selection is not valid: {dict(filterset.errors)}")
    cycles: QuerySet[SchedulingCycle] = filterset.qs  # (django-filter has no type hints)
    return cycles


def replay_cycle_ids(selection: ReplaySelection, *, limit: int) -> Sequence[int]:
    """The ids of the selected cycles, oldest first (at most ``limit``; the newest ``last`` when it is set)."""
    cycles = selected_cycles(selection)
    if selection.last is not None:
        newest = cycles.order_by("-started_at", "-id").values_list("id", flat=True)[: min(selection.last, limit)]
        return array("q", reversed(list(newest)))
    ids = array("q")
    for chunk_start in range(0, limit, 100_000):
        part = list(
            cycles.order_by("started_at", "id").values_list("id", flat=True)[
                chunk_start : min(limit, chunk_start + 100_000)
            ]
        )
        ids.extend(part)
        if len(part) < 100_000:
            break
    return ids


_CYCLE_FIELDS = (
    "id",
    "started_at",
    "pod_namespace",
    "pod_name",
    "profile",
    "preferred_node",
    "chosen_node",
    "profile_version",
)
_CALL_FIELDS = ("cycle_id", "verb", "http_status", "event_id", "body", "record_json")


def replay_rows(ids: Sequence[int]) -> Iterator[RecordedCycleRow]:
    """The cycles ``ids`` (in that order; a cycle pruned since it was listed is left out) with their filter and
    prioritize calls, oldest first. Two queries."""
    wanted = list(ids)
    cycles = {row[0]: row for row in SchedulingCycle.objects.filter(id__in=wanted).values_list(*_CYCLE_FIELDS)}
    calls: dict[int, list[Call]] = {}
    rows = (
        VerbCall.objects.filter(cycle_id__in=wanted, verb__in=(FILTER, PRIORITIZE))
        .order_by("started_at", "id")
        .values_list(*_CALL_FIELDS)
    )
    for cycle_id, verb, status, event_id, body, record in rows.iterator(chunk_size=2000):
        calls.setdefault(cycle_id, []).append((verb, status, event_id, body, record))
    for cycle_id in wanted:
        cycle = cycles.get(cycle_id)
        if cycle is None:
            continue
        yield RecordedCycleRow(
            cycle_id=cycle_id,
            started_at=cycle[1],
            pod_namespace=cycle[2],
            pod_name=cycle[3],
            profile=cycle[4],
            preferred_node=cycle[5],
            chosen_node=cycle[6],
            calls=calls.get(cycle_id, []),
            profile_version=cycle[7],
        )


def replay_cycles(ids: Sequence[int], *, reader: CycleReader) -> Iterator[RecordedCycle]:
    """The cycles ``ids`` with their recorded inputs, read by ``reader`` (which keeps the shared parts it decoded
    from chunk to chunk)."""
    for row in replay_rows(ids):
        cycle = reader.cycle(row, shared_parts=shared_part_data)
        cycle.profile_version = row.profile_version  # its baseline: the version it recorded
        yield cycle


# --- replays kept -------------------------------------------------------------------------------------------------


def history_replay_list() -> QuerySet[HistoryReplay]:
    """Replays, newest first, without their reports and YAML (read one with :func:`history_replay_get`)."""
    return HistoryReplay.objects.defer("report", "candidate_yaml").order_by("-created_at", "-id")


def history_replay_get(*, replay_id: int) -> HistoryReplay | None:
    """One replay with its report (None: no such replay)."""
    return HistoryReplay.objects.filter(pk=replay_id).first()


REPORT_FORMS_READ = ("json v1",)
"""The stored forms of ``HistoryReplay.report`` :func:`history_replay_report` reads (``docs/stored-formats.md``):
``HistoryReplayReport`` as JSON; fields added since (``learning``) read as their default from reports kept before."""


def history_replay_report(replay: HistoryReplay) -> HistoryReplayReport | None:
    """The replay's report as the struct (``scheduler_core.history_replay.report.HistoryReplayReport``); None until
    it is done."""
    if not replay.report:
        return None
    return msgspec.convert(replay.report, HistoryReplayReport)
