"""The ingest's writes: new cycles, new calls, the shared parts their bodies name, and node postings.

This is the one step of the ingest that differs by database. On PostgreSQL the new rows go in by COPY (a batch of
calls is one round trip however many there are), with the cycles' ids drawn from their sequence beforehand so that
calls and postings can point at them; on SQLite, by ``bulk_create``. A new call's row is built once
(:func:`call_row`), in the names its chain link covers, and only :func:`insert_calls` writes it one way or the other.
Rows that may exist already (node postings, and the node counts beside them) go in by :func:`copy_upsert`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db import connection

from dashboard.audit.chain import CONTENT_FIELDS, OPTIONAL_CONTENT_FIELDS, STORED_FIELDS
from dashboard.ingest.new_calls import NewCall
from dashboard.models import NodePosting, SchedulingCycle, SharedPart, VerbCall
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

    Cycles with the same candidate list (most of them: a cluster's nodes, pod after pod) share one pass over the
    names.
    """
    by_list: dict[tuple[str, ...], dict[int, int]] = {}
    for slot, names in cycles:
        blocks = by_list.setdefault(tuple(names), {})
        block, offset = divmod(slot, POSTING_BITS)
        blocks[block] = blocks.get(block, 0) | (1 << (POSTING_BITS - 1 - offset))
    merged: dict[tuple[str, int], int] = {}
    for names, blocks in by_list.items():
        for block, bits in blocks.items():
            for name in set(names):
                key = (name, block)
                merged[key] = merged.get(key, 0) | bits
    if not merged:
        return
    table = connection.ops.quote_name(NodePosting._meta.db_table)
    copy_upsert(
        NodePosting._meta.db_table,
        ["node", "block", "bits"],
        ((name, block, format(bits, f"0{POSTING_BITS}b")) for (name, block), bits in sorted(merged.items())),
        f"ON CONFLICT (node, block) DO UPDATE SET bits = {table}.bits | excluded.bits",
    )


def copy_upsert(table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], conflict: str) -> None:
    """PostgreSQL: COPY ``rows`` into a temporary table like ``table``, then one ``INSERT … SELECT … ON CONFLICT``.

    COPY streams thousands of values without building (and quoting, client side) a statement that holds them all.
    ``conflict`` is the ``ON CONFLICT`` clause; ``table`` and ``columns`` are identifiers from a model. The node
    counts (``dashboard.services.node_tallies``) are upserted this way too.
    """
    q = connection.ops.quote_name
    staging = q(f"staging_{table}")
    names = ", ".join(q(c) for c in columns)
    with connection.cursor() as cursor:
        cursor.execute(  # the columns' types, without constraints or defaults; once per connection
            f"CREATE TEMPORARY TABLE IF NOT EXISTS {staging} AS SELECT {names} FROM {q(table)} WITH NO DATA"  # noqa: S608
        )
        with cursor.cursor.copy(f"COPY {staging} ({names}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cursor.execute(f"INSERT INTO {q(table)} ({names}) SELECT {names} FROM {staging} {conflict}")  # noqa: S608
        cursor.execute(f"TRUNCATE {staging}")
