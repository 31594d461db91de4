"""The ingest's writes: new cycles, new calls, the shared parts their bodies name, and node postings.

This is the one step of the ingest that differs by database. On PostgreSQL the new rows go in by COPY (a batch of
calls is one round trip however many there are), with the cycles' ids drawn from their sequence beforehand so that
calls and postings can point at them; on SQLite, by ``bulk_create``. A new call's row is built once
(:func:`call_row`), in the names its chain link covers, and only :func:`insert_calls` writes it one way or the other.
Rows that may exist already go in by upserts: node postings and the ingest's node counts, summed per node before
they are sent, as arrays of one element per row (:func:`postings_add`, :func:`tallies_upsert`); the other node counts
are upserted by ``dashboard.services.node_tallies`` itself.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import msgspec
from django.db import connection

from dashboard.audit.chain import CONTENT_FIELDS, OPTIONAL_CONTENT_FIELDS, STORED_FIELDS
from dashboard.ingest.new_calls import NewCall
from dashboard.models import (
    NodeDayReasonTally,
    NodeDayTally,
    NodePosting,
    NodeReasonTally,
    NodeTally,
    SchedulingCycle,
    SharedPart,
    VerbCall,
)
from dashboard.storage.packed_json import stored_form

_CALL_COPY_COLUMNS = (*CONTENT_FIELDS, *OPTIONAL_CONTENT_FIELDS, "body", "chain_hash")
"""A new call's row as COPY writes it: what its chain link covers (database column names), then body and hash."""
_JSON_COLUMNS = frozenset({"record", "response"})
POSTING_BITS = 256
"""Cycles per ``NodePosting`` row: a node's row for block ``b`` has bit ``i`` set for the cycle in slot
``b * POSTING_BITS + i`` that listed it as a candidate."""


def new_cycle_ids(count: int) -> list[int]:
    """``count`` ids of the cycle table's sequence (PostgreSQL), so new cycles know theirs before the INSERT."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
            [SchedulingCycle._meta.db_table, count],
        )
        return [row[0] for row in cursor.fetchall()]


def insert_cycles(cycles: list[SchedulingCycle]) -> None:
    """New cycles: COPY on PostgreSQL (their ids already drawn from the sequence), else bulk_create."""
    if connection.vendor != "postgresql" or not cycles:
        SchedulingCycle.objects.bulk_create(cycles)
        return
    fields = list(SchedulingCycle._meta.concrete_fields)
    table = connection.ops.quote_name(SchedulingCycle._meta.db_table)
    # A concrete field always has a column (Django: concrete = column is not None); django-stubs type it optional.
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)  # type: ignore[arg-type]
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        for cycle in cycles:
            copy.write_row([getattr(cycle, f.attname) for f in fields])


def update_cycles(cycles: list[SchedulingCycle], fields: Sequence[str]) -> None:
    """Write ``fields`` of stored cycles: on PostgreSQL one ``UPDATE … FROM`` a COPY of the new values, else
    bulk_update. (``bulk_update``'s ``CASE WHEN id = …`` per field and cycle is planned once for every day partition:
    seconds for a batch that joins a few hundred stored cycles.)"""
    if connection.vendor != "postgresql" or not cycles:
        SchedulingCycle.objects.bulk_update(cycles, fields)
        return
    model_fields = [SchedulingCycle._meta.get_field(name) for name in fields]
    q = connection.ops.quote_name
    table = q(SchedulingCycle._meta.db_table)
    staging = q("staging_cycle_update")
    columns = [q(field.column) for field in model_fields]  # type: ignore[union-attr,arg-type]  # (fields: concrete)
    with connection.cursor() as cursor:
        cursor.execute(  # the columns' types; once per connection
            f"CREATE TEMPORARY TABLE IF NOT EXISTS {staging} AS "  # noqa: S608
            f"SELECT id, {', '.join(columns)} FROM {table} WITH NO DATA"
        )
        with cursor.cursor.copy(f"COPY {staging} (id, {', '.join(columns)}) FROM STDIN") as copy:
            for cycle in cycles:
                # (fields: concrete, so never the relations get_field may also answer, which have no attname)
                copy.write_row([cycle.pk, *(getattr(cycle, field.attname) for field in model_fields)])  # type: ignore[union-attr]
        assignments = ", ".join(f"{column} = s.{column}" for column in columns)
        cursor.execute(f"UPDATE {table} AS c SET {assignments} FROM {staging} AS s WHERE c.id = s.id")  # noqa: S608
        cursor.execute(f"TRUNCATE {staging}")


def call_row(cycle_id: int, call: NewCall) -> dict[str, Any]:
    """The row of a new call, in the chain's names (``chain.CONTENT_FIELDS`` and ``body``): what
    ``call_content`` hashes. The caller adds ``chain_hash`` before :func:`insert_calls` writes it."""
    return {
        "cycle_id": cycle_id,
        "event_id": call.event_id,
        "verb": call.verb,
        "started_at": call.at,
        "duration_ms": call.duration_ms,
        "http_status": call.http_status,
        "error": call.error,
        "server": call.server,
        "record": call.record_json,
        "response": call.response_json,
        "body": call.body,
        "profile_version": call.summary.profile_version,
    }


def _json_column(value: Any) -> str | None:
    """What a jsonb column receives for ``value`` (``PackedJSONField``'s stored form, as JSON text)."""
    stored = stored_form(value)
    return None if stored is None else json.dumps(stored)


def insert_calls(rows: Sequence[dict[str, Any]], *, recorded_at: datetime) -> None:
    """The new calls (:func:`call_row`, sealed) in chain order, stored at ``recorded_at`` (``ChainAppender``'s): COPY
    on PostgreSQL (ids from the sequence, in row order), else bulk_create (which inserts them in order too)."""
    if connection.vendor != "postgresql":
        VerbCall.objects.bulk_create(
            [VerbCall(**{STORED_FIELDS.get(k, k): v for k, v in row.items()}, recorded_at=recorded_at) for row in rows]
        )
        return
    table = connection.ops.quote_name(VerbCall._meta.db_table)
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY {table} ({', '.join(_CALL_COPY_COLUMNS)}, recorded_at) FROM STDIN") as copy,
    ):
        for row in rows:
            values = [_json_column(row[name]) if name in _JSON_COLUMNS else row[name] for name in _CALL_COPY_COLUMNS]
            values.append(recorded_at)
            copy.write_row(values)


def shared_parts_upsert(calls: Sequence[NewCall]) -> None:
    """Store the shared parts these calls' bodies refer to (once each), and move each part's ``last_used_at`` to the
    latest of its calls (retention deletes a part by it): one statement per batch, a row per distinct part."""
    latest: dict[str, tuple[bytes, datetime]] = {}
    for call in calls:
        assert call.shared_part is not None
        digest, data = call.shared_part
        known = latest.get(digest)
        if known is None or call.at > known[1]:
            latest[digest] = (data, call.at)
    if not latest:
        return
    q = connection.ops.quote_name
    table = q(SharedPart._meta.db_table)
    newest = "GREATEST" if connection.vendor == "postgresql" else "MAX"
    rows = ", ".join(["(%s, %s, %s)"] * len(latest))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (digest, data, last_used_at) VALUES {rows} ON CONFLICT (digest) DO UPDATE "  # noqa: S608
            f"SET last_used_at = {newest}({table}.last_used_at, excluded.last_used_at)",
            [value for digest, (data, at) in sorted(latest.items()) for value in (digest, data, at)],
        )


def postings_add(cycles: Sequence[tuple[int, Sequence[str]]]) -> None:
    """PostgreSQL: set each cycle's bit (its ``candidate_slot``) in the NodePosting rows of its candidates, in one
    upsert, so that ``dashboard.filters`` finds a node's cycles by index instead of scanning candidate lists.

    The bits are ORed here, per node and block, so that the database receives one element per row it upserts (a
    block's bits as hexadecimal, bit 0 leftmost as ``set_bit`` numbers them), not one per candidate.
    """
    masks: dict[int, dict[str, int]] = {}
    for slot, names in cycles:
        block, bit = divmod(slot, POSTING_BITS)
        value = 1 << (POSTING_BITS - 1 - bit)
        of_block = masks.setdefault(block, {})
        for name in names:
            of_block[name] = of_block.get(name, 0) | value
    rows = sorted((name, block, mask) for block, of_block in masks.items() for name, mask in of_block.items())
    if not rows:
        return
    table = connection.ops.quote_name(NodePosting._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (node, block, bits) "  # noqa: S608
            f"SELECT node, block::int8, ('x' || bits)::bit({POSTING_BITS}) "
            f"FROM ROWS FROM ({_ELEMENTS_3}) AS e(node, block, bits) "
            f"ON CONFLICT (node, block) DO UPDATE SET bits = {table}.bits | excluded.bits",
            [
                _json([name for name, _, _ in rows]),
                _json([block for _, block, _ in rows]),
                _json([format(mask, f"0{POSTING_BITS // 4}x") for _, _, mask in rows]),
            ],
        )


_ELEMENTS_3 = ", ".join(["json_array_elements_text(%s::json)"] * 3)
_ELEMENTS_4 = ", ".join(["json_array_elements_text(%s::json)"] * 4)
_ELEMENTS_6 = ", ".join(["json_array_elements_text(%s::json)"] * 6)
"""Parallel JSON arrays as rows (``ROWS FROM`` zips them in order), one parameter each."""


def _json(values: Sequence[Any]) -> str:
    return _json_encode(values).decode()


_json_encode = msgspec.json.Encoder().encode


@dataclass(slots=True)
class NodeElements:
    """A batch's per-node counts as parallel arrays (``BatchTallies`` gives one element per node; the database sums
    any repeated node's)."""

    nodes: list[str]
    considered: list[int]
    filtered_out: list[int]
    preferred: list[int]
    """Changes: a late call may move a cycle's preference away from a node (-1)."""
    placements: list[int]
    seen_micros: list[int]
    """When the node was seen, in microseconds since the epoch; -1: not seen by this element."""
    lowered: dict[str, tuple[int, int]]
    """Nodes whose preferred or placement count a late call lowered, by how much (≤ 0 each): rare, and each an
    update of its own, never below zero."""


@dataclass(slots=True)
class ReasonElements:
    """How many times each node failed for each plugin and reason (cut to the columns' widths), as parallel arrays."""

    nodes: list[str]
    plugins: list[str]
    reasons: list[str]
    counts: list[int]


def tallies_upsert(nodes: NodeElements, reasons: ReasonElements, *, day: date) -> None:
    """PostgreSQL: add a batch's counts to ``NodeTally`` and ``NodeReasonTally``, and to ``day``'s share
    (``NodeDayTally``, ``NodeDayReasonTally``): two statements, whatever the batch's size, each summing its arrays per
    node (and reason) and upserting both tables. Counts moved below zero by a late call stay at zero."""
    q = connection.ops.quote_name
    tally, day_tally = q(NodeTally._meta.db_table), q(NodeDayTally._meta.db_table)
    reason_tally, day_reason_tally = q(NodeReasonTally._meta.db_table), q(NodeDayReasonTally._meta.db_table)
    with connection.cursor() as cursor:
        if nodes.nodes:
            cursor.execute(
                "WITH g AS (SELECT node, sum(c::int8) AS considered, sum(f::int8) AS filtered_out, "  # noqa: S608
                "sum(p::int8) AS preferred, sum(b::int8) AS placements, max(s::int8) AS seen "
                f"FROM ROWS FROM ({_ELEMENTS_6}) AS e(node, c, f, p, b, s) GROUP BY node), "
                f"d AS (INSERT INTO {day_tally} (day, node, considered, filtered_out) "
                "SELECT %s, node, considered, filtered_out FROM g WHERE considered > 0 OR filtered_out > 0 "
                f"ORDER BY node ON CONFLICT (day, node) DO UPDATE SET considered = {day_tally}.considered + "
                f"excluded.considered, filtered_out = {day_tally}.filtered_out + excluded.filtered_out) "
                f"INSERT INTO {tally} (node, considered, filtered_out, placements, preferred, last_seen_at) "
                "SELECT node, considered, filtered_out, GREATEST(placements, 0), GREATEST(preferred, 0), "
                "CASE WHEN seen < 0 THEN NULL ELSE timestamptz 'epoch' + seen * interval '1 microsecond' END "
                f"FROM g ORDER BY node ON CONFLICT (node) DO UPDATE SET "
                f"considered = {tally}.considered + excluded.considered, "
                f"filtered_out = {tally}.filtered_out + excluded.filtered_out, "
                f"placements = {tally}.placements + excluded.placements, "
                f"preferred = {tally}.preferred + excluded.preferred, "
                f"last_seen_at = GREATEST({tally}.last_seen_at, excluded.last_seen_at)",
                [
                    _json(nodes.nodes),
                    _json(nodes.considered),
                    _json(nodes.filtered_out),
                    _json(nodes.preferred),
                    _json(nodes.placements),
                    _json(nodes.seen_micros),
                    day,
                ],
            )
            for name, (preferred, placed) in sorted(nodes.lowered.items()):
                cursor.execute(
                    f"UPDATE {tally} SET preferred = GREATEST(preferred + %s, 0), "  # noqa: S608
                    "placements = GREATEST(placements + %s, 0) WHERE node = %s",
                    [preferred, placed, name],
                )
        if reasons.nodes:
            cursor.execute(
                "WITH g AS (SELECT node, plugin, reason, sum(n::int8) AS n "  # noqa: S608
                f"FROM ROWS FROM ({_ELEMENTS_4}) AS e(node, plugin, reason, n) GROUP BY 1, 2, 3), "
                f"d AS (INSERT INTO {day_reason_tally} (day, node, plugin, reason, count) "
                "SELECT %s, node, plugin, reason, n FROM g ORDER BY 2, 3, 4 "
                f"ON CONFLICT (day, node, plugin, reason) DO UPDATE SET count = {day_reason_tally}.count + "
                "excluded.count) "
                f"INSERT INTO {reason_tally} (node, plugin, reason, count) SELECT node, plugin, reason, n FROM g "
                f"ORDER BY 1, 2, 3 ON CONFLICT (node, plugin, reason) DO UPDATE SET count = {reason_tally}.count + "
                "excluded.count",
                [_json(reasons.nodes), _json(reasons.plugins), _json(reasons.reasons), _json(reasons.counts), day],
            )
