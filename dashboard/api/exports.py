"""Streaming CSV and NDJSON exports of cycles: memory is bounded by the fetch chunk, not by the row count.

Rows come from ``QuerySet.iterator(chunk_size)`` (a server-side cursor on PostgreSQL) and leave as soon as a
few hundred (or a megabyte) are encoded, so 1,000,000 rows cost what 2,000 do; a cycle's calls, prefetched with its
chunk, are let go once the cycle is written.

With the explanation (``include=explanation``) each NDJSON line carries the why API's ``explanation`` object, and
the CSV has one row per cycle and candidate node whose columns are named by the same keys, a term's as
``<plugin>.<key>`` (``NetworkTraffic.traffic.measured_bytes``): a spreadsheet recomputes what the API shows.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator
from dataclasses import fields
from datetime import datetime
from typing import Any

import msgspec
from django.db.models import Prefetch, QuerySet

from dashboard.audit.chain import CONTENT_FIELDS, OPTIONAL_CONTENT_FIELDS, STORED_FIELDS
from dashboard.models import SchedulingCycle, VerbCall
from dashboard.selectors.cycles import CYCLE_FIELDS, CallRead, CycleRead, cycle_read
from dashboard.storage.call_record import record_builtins
from scheduler_core.explanation.explain import Explanation
from scheduler_core.explanation.figures import ImageFigures, ResourceFigures, TrafficFigures
from scheduler_core.explanation.nodes import NodeExplanation, ScoreTerm
from scheduler_core.extender.record.structs import IMAGE_LOCALITY, NETWORK_TRAFFIC, NODE_RESOURCE_FIT_BY_CR

CALL_FIELDS = ("id", *(f for f in CONTENT_FIELDS if f != "cycle_id"), "chain_hash", *OPTIONAL_CONTENT_FIELDS)
"""A call's columns as exported: what its chain link covers (but the cycle, which the export is nested in), its id and
its hash."""
STORED_CALL_FIELDS = (*(f for f in CALL_FIELDS if f not in STORED_FIELDS), *STORED_FIELDS.values(), "body")
"""The columns ``CALL_FIELDS`` are read from (``record`` and ``response`` are decoded from the last three)."""
EXPLANATION_FIELDS = (
    "answer_scale",
    "answer_rule",
    "spread_min",
    "spread_max",
    "extender_weight",
    "tied_nodes",
    "measured_leader",
    "herd_changed_ranking",
    "summary",
)
"""The explanation's cycle-wide keys in a CSV row (``answer_tie`` is a cycle column already)."""
NODE_FIELDS = (
    "node",
    "passed",
    "unresolvable",
    "verdicts",
    "rank",
    "final_score",
    "final_arithmetic",
    "extender_score",
    "answer_arithmetic",
    "kube_scheduler_points",
)
TERM_FIELDS = ("weight", "applicable", "normalized", "weighted", "contribution", "raw", "note", "arithmetic")
FIGURES: dict[str, tuple[str, tuple[str, ...]]] = {
    NETWORK_TRAFFIC: ("traffic", tuple(f.name for f in fields(TrafficFigures))),
    NODE_RESOURCE_FIT_BY_CR: ("resources", tuple(f.name for f in fields(ResourceFigures))),
    IMAGE_LOCALITY: ("images", tuple(f.name for f in fields(ImageFigures))),
}
"""The plugins whose terms carry figures: the key of the figures in a term, and theirs."""
TERM_COLUMNS = tuple(
    [f"{plugin}.{key}" for key in TERM_FIELDS] + [f"{plugin}.{group}.{key}" for key in keys]
    for plugin, (group, keys) in FIGURES.items()
)
EXPLAINED_CSV_FIELDS = (
    *CYCLE_FIELDS,
    *EXPLANATION_FIELDS,
    *NODE_FIELDS,
    *(c for columns in TERM_COLUMNS for c in columns),
)
ROWS_PER_WRITE = 500
WRITE_BYTES = 1024 * 1024
"""An NDJSON write also leaves once it holds this much: a line with the calls or the explanation of a 1000-node
cycle is hundreds of kilobytes, so ``ROWS_PER_WRITE`` of them would be hundreds of megabytes."""
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


OUTCOME_PREFIX = "placement_outcome"
OUTCOME_FIELDS = ("status", "complete", "unattributable_reason", "workload_kind", "workload_name")
OUTCOME_WINDOW_FIELDS = (
    "seconds",
    "node_estimated_bytes",
    "node_bytes",
    "node_relative_error",
    "stayed_quietest",
    "quieter_runner_ups",
    "pod_estimated_bytes",
    "pod_bytes",
    "pod_relative_error",
)
OUTCOME_CSV_FIELDS = tuple(f"{OUTCOME_PREFIX}.{f}" for f in (*OUTCOME_FIELDS, *OUTCOME_WINDOW_FIELDS))
"""``include=placement_outcome``: what followed the placement, its longest passed window's figures."""
OutcomeLookup = Callable[[list[int]], dict[int, dict[str, Any]]]
"""Cycle ids → their outcomes' figures (``dashboard.outcomes.selectors.outcome_figures``), in one read."""


def _outcome_cells(figures: dict[str, Any] | None) -> list[Any]:
    if figures is None:
        return [""] * len(OUTCOME_CSV_FIELDS)
    workload = figures["workload"]
    head = [
        figures["status"],
        figures["complete"],
        figures["unattributable_reason"],
        workload["kind"],
        workload["name"],
    ]
    last = figures["windows"][-1] if figures["windows"] else {}
    window = [last.get(f, "") for f in OUTCOME_WINDOW_FIELDS]
    return [_cell(v) for v in head] + [_cell(" ".join(v) if isinstance(v, list) else v) for v in window]


def _with_outcomes(rows: Iterator[dict[str, Any]], lookup: OutcomeLookup) -> Iterator[dict[str, Any]]:
    """``rows`` each with its ``placement_outcome`` (None: none), read a write's worth of rows at a time."""
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= ROWS_PER_WRITE:
            found = lookup([r["id"] for r in chunk])
            yield from ({**r, OUTCOME_PREFIX: found.get(r["id"])} for r in chunk)
            chunk = []
    if chunk:
        found = lookup([r["id"] for r in chunk])
        yield from ({**r, OUTCOME_PREFIX: found.get(r["id"])} for r in chunk)


def cycles_csv(
    queryset: QuerySet[SchedulingCycle], *, chunk_size: int, outcomes: OutcomeLookup | None = None
) -> Iterator[bytes]:
    writer = csv.writer(_Line())
    yield writer.writerow((*CYCLE_FIELDS, *(OUTCOME_CSV_FIELDS if outcomes is not None else ()))).encode()
    lines: list[str] = []
    plain = (
        dict(zip(CYCLE_FIELDS, row, strict=True)) for row in queryset.values_list(*CYCLE_FIELDS).iterator(chunk_size)
    )
    for row in _with_outcomes(plain, outcomes) if outcomes is not None else plain:
        cells = [_csv_cell(row[f]) for f in CYCLE_FIELDS]
        if outcomes is not None:
            cells += _outcome_cells(row[OUTCOME_PREFIX])
        lines.append(writer.writerow(cells))
        if len(lines) >= ROWS_PER_WRITE:
            yield "".join(lines).encode()
            lines = []
    if lines:
        yield "".join(lines).encode()


def cycles_ndjson(
    queryset: QuerySet[SchedulingCycle],
    *,
    chunk_size: int,
    with_calls: bool,
    explain: Explainer | None = None,
    outcomes: OutcomeLookup | None = None,
) -> Iterator[bytes]:
    """``with_calls``: each cycle with its calls; ``explain``: with its explanation, as the why API shows it;
    ``outcomes``: with its placement's outcome, as ``/api/v1/cycles/<id>/outcome/`` shows it."""
    encoder = msgspec.json.Encoder()
    lines = bytearray()
    if with_calls or explain is not None:
        rows: Iterator[dict[str, Any]] = (
            {
                **{f: getattr(read.cycle, f) for f in CYCLE_FIELDS},
                **({"calls": [_call_row(c) for c in read.calls]} if with_calls else {}),
                **({"explanation": msgspec.to_builtins(explain(read))} if explain is not None else {}),
            }
            for read in map(_read, _with_calls(queryset, chunk_size))
        )
    else:
        rows = (
            dict(zip(CYCLE_FIELDS, row, strict=True))
            for row in queryset.values_list(*CYCLE_FIELDS).iterator(chunk_size)
        )
    if outcomes is not None:
        rows = _with_outcomes(rows, outcomes)
    for count, row in enumerate(rows, start=1):
        lines += encoder.encode(row)
        lines += b"\n"
        if count % ROWS_PER_WRITE == 0 or len(lines) >= WRITE_BYTES:
            yield bytes(lines)
            lines.clear()
    if lines:
        yield bytes(lines)


Explainer = Callable[[CycleRead], Explanation]
"""A cycle decoded → its explanation: ``dashboard.selectors.cycles.cycle_explanation``."""


def _read(cycle: SchedulingCycle) -> CycleRead:
    return cycle_read(cycle=cycle)


def _call_row(read: CallRead) -> dict[str, Any]:
    decoded = {"record": record_builtins(read.recorded), "response": read.answer}
    return {f: decoded[f] if f in decoded else getattr(read.call, f) for f in CALL_FIELDS}


def _with_calls(queryset: QuerySet[SchedulingCycle], chunk_size: int) -> Iterator[SchedulingCycle]:
    """Each cycle with its calls prefetched; the calls are dropped once the caller asks for the next cycle."""
    calls = Prefetch("calls", queryset=VerbCall.objects.order_by("id").only(*STORED_CALL_FIELDS, "cycle_id"))
    for cycle in queryset.prefetch_related(calls).iterator(chunk_size=chunk_size):
        yield cycle
        # The prefetched calls and their cycle refer to each other (Django caches the relation both ways), so
        # reference counting never frees them, decoded records included: only the cyclic collector does, which
        # a worker runs rarely (config.gunicorn_conf.post_worker_init). Breaking the loop frees them now.
        cycle._prefetched_objects_cache.clear()  # type: ignore[attr-defined]  # Django's, private: not in django-stubs


def _cell(value: Any) -> Any:
    """A list or mapping as JSON text; anything else as ``_csv_cell`` writes it."""
    if isinstance(value, list | tuple | dict):
        return json.dumps(msgspec.to_builtins(value), ensure_ascii=False)
    return _csv_cell(value)


def _verdicts(node: NodeExplanation) -> str:
    return "; ".join(f"{v.plugin}: {v.reason}" + (f" ({v.detail})" if v.detail else "") for v in node.verdicts)


def _term_cells(term: ScoreTerm | None, plugin: str) -> list[Any]:
    group, keys = FIGURES[plugin]
    if term is None:
        return [""] * (len(TERM_FIELDS) + len(keys))
    figures = getattr(term, group)
    return [_cell(getattr(term, key)) for key in TERM_FIELDS] + [
        "" if figures is None else _cell(getattr(figures, key)) for key in keys
    ]


def _node_cells(node: NodeExplanation) -> list[Any]:
    cells = [_verdicts(node) if key == "verdicts" else _cell(getattr(node, key)) for key in NODE_FIELDS]
    terms = {term.plugin: term for term in node.terms}
    for plugin in FIGURES:
        cells += _term_cells(terms.get(plugin), plugin)
    return cells


def cycles_explained_csv(
    queryset: QuerySet[SchedulingCycle], *, chunk_size: int, explain: Explainer
) -> Iterator[bytes]:
    """One row per cycle and candidate node (a cycle without one: one row with the node columns empty)."""
    writer = csv.writer(_Line())
    yield writer.writerow(EXPLAINED_CSV_FIELDS).encode()
    width = len(EXPLAINED_CSV_FIELDS) - len(CYCLE_FIELDS) - len(EXPLANATION_FIELDS)
    lines: list[str] = []
    for cycle in _with_calls(queryset, chunk_size):
        explanation = explain(_read(cycle))
        head = [_csv_cell(getattr(cycle, f)) for f in CYCLE_FIELDS]
        head += [_cell(getattr(explanation, key)) for key in EXPLANATION_FIELDS]
        rows = [head + _node_cells(node) for node in explanation.nodes] or [head + [""] * width]
        lines += [writer.writerow(row) for row in rows]
        if len(lines) >= ROWS_PER_WRITE:
            yield "".join(lines).encode()
            lines = []
    if lines:
        yield "".join(lines).encode()
