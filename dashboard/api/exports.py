"""Streaming CSV and NDJSON exports of cycles: memory is bounded by the fetch chunk, not by the row count.

Rows come from ``QuerySet.iterator(chunk_size)`` (a server-side cursor on PostgreSQL) and leave as soon as a
few hundred are encoded, so 1,000,000 rows cost what 2,000 do.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import msgspec
from django.db.models import Prefetch, QuerySet

from dashboard.models import SchedulingCycle, VerbCall

FIELDS = (
    "id",
    "started_at",
    "finished_at",
    "pod_namespace",
    "pod_name",
    "pod_uid",
    "profile",
    "node_mode",
    "outcome",
    "chosen_node",
    "preferred_node",
    "candidate_count",
    "feasible_count",
    "filter_ms",
    "prioritize_ms",
    "bind_ms",
    "preempt_ms",
    "metric_age_seconds",
    "error",
)
CALL_FIELDS = (
    "id",
    "event_id",
    "verb",
    "started_at",
    "duration_ms",
    "http_status",
    "error",
    "server",
    "record",
    "response",
    "chain_hash",
)
STORED_CALL_FIELDS = (
    *(f for f in CALL_FIELDS if f not in {"record", "response"}),
    "record_json",
    "response_json",
    "body",
)
"""The columns ``CALL_FIELDS`` are read from (``record`` and ``response`` are decoded from the last three)."""
ROWS_PER_WRITE = 500
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class _Line:
    """A file-like whose ``write`` returns the line csv.writer produced (Django's streaming CSV recipe)."""

    def write(self, value: str) -> str:
        return value


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        # Pod names and errors are attacker-controlled: never let a spreadsheet run them as a formula.
        return "'" + value
    return value


def cycles_csv(queryset: QuerySet[SchedulingCycle], *, chunk_size: int) -> Iterator[bytes]:
    writer = csv.writer(_Line())
    yield writer.writerow(FIELDS).encode()
    lines: list[str] = []
    for row in queryset.values_list(*FIELDS).iterator(chunk_size=chunk_size):
        lines.append(writer.writerow([_csv_cell(v) for v in row]))
        if len(lines) >= ROWS_PER_WRITE:
            yield "".join(lines).encode()
            lines = []
    if lines:
        yield "".join(lines).encode()


def cycles_ndjson(queryset: QuerySet[SchedulingCycle], *, chunk_size: int, with_calls: bool) -> Iterator[bytes]:
    encoder = msgspec.json.Encoder()
    lines = bytearray()
    if with_calls:
        calls = Prefetch("calls", queryset=VerbCall.objects.order_by("id").only(*STORED_CALL_FIELDS, "cycle_id"))
        rows: Iterator[dict[str, Any]] = (
            {
                **{f: getattr(cycle, f) for f in FIELDS},
                "calls": [{f: getattr(c, f) for f in CALL_FIELDS} for c in cycle.calls.all()],
            }
            for cycle in queryset.prefetch_related(calls).iterator(chunk_size=chunk_size)
        )
    else:
        rows = (dict(zip(FIELDS, row, strict=True)) for row in queryset.values_list(*FIELDS).iterator(chunk_size))
    for count, row in enumerate(rows, start=1):
        lines += encoder.encode(row)
        lines += b"\n"
        if count % ROWS_PER_WRITE == 0:
            yield bytes(lines)
            lines.clear()
    if lines:
        yield bytes(lines)
