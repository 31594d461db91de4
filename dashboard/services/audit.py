"""Tamper evidence and retention of the scheduling record.

Every ``VerbCall`` is one link of a single hash chain, in insertion (id) order::

    chain_hash = sha256(previous chain_hash + "\\n" + canonical bytes of the call's immutable content)

The call, not the cycle, is the chained unit because a cycle's summary columns are re-derived whenever a
later call joins it; the calls are the source of truth and are never updated. The ingester opens the chain
inside its transaction (``audit_chain_open``), which on PostgreSQL takes a transaction-scoped advisory lock
on a constant key *before* any call is inserted: appends of concurrent ingesters are serialized, so id order
is chain order. On SQLite a second writer fails with "database is locked" and retries from the spool, which
also leaves one chain.

Altering, deleting or reordering a stored call breaks the link at that call (or, for a deletion, at the call
after it). Rewriting every hash from some call to the end cannot be detected from inside the database: keep
the head hash that ``audit_chain_verify`` reports somewhere else to anchor it.

Retention deletes a prefix of the chain (``cycles_prune``) after verifying it, and leaves an
``AuditCheckpoint`` with the last deleted call's id and hash, from which verification resumes.

The same module keeps ``NodeTally``: per-node counts over the retained calls, added as calls are chained
and subtracted as they are pruned, so listing nodes is one indexed read instead of a scan of every record.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection, transaction
from django.db.models import F, Max, Min
from django.db.models.functions import Greatest
from django.utils import timezone
from rest_framework.authtoken.models import Token

from dashboard.models import AuditCheckpoint, NodeTally, SchedulingCycle, SharedPart, VerbCall
from dashboard.packing import body_read, stored_form

AUDITOR_GROUP = "auditor"
"""Members (and superusers) may read the audit API."""

GENESIS = "0" * 64
"""The ``previous`` hash of the very first call."""
CHAIN_LOCK_KEY = 0x5C4ED1E5A0D17
"""``pg_advisory_xact_lock`` key serializing chain appends and prunes (an arbitrary constant)."""
CONTENT_FIELDS = (
    "cycle_id",
    "event_id",
    "verb",
    "started_at",
    "duration_ms",
    "http_status",
    "error",
    "server",
    "record",
    "response",
)
"""What a link covers: every column of a call except its id (order is the chain's) and the hash itself.

The names are the canonical ones (a row of ``.values()`` may name the two JSON columns by their fields,
``record_json`` and ``response_json``); a call stored with a binary body (migration 0004) adds the body's SHA-256,
so calls recorded before hash exactly as they did."""
STORED_FIELDS = {"record": "record_json", "response": "response_json"}
"""Canonical name → the ``VerbCall`` field that holds it."""
CALL_COLUMNS = (*(STORED_FIELDS.get(name, name) for name in CONTENT_FIELDS), "body")
"""The ``VerbCall`` fields a link covers."""
_json_string = encode_basestring_ascii
"""``json.dumps`` of a string, without its dispatch (the same C function writes it)."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = datetime.resolution


class AuditChainBrokenError(Exception):
    """Raised instead of pruning a stretch of the chain that does not verify: evidence is never deleted."""

    def __init__(self, report: ChainReport) -> None:
        super().__init__(f"audit chain broken at call {report.first_broken_id}: {report.reason}")
        self.report = report


# --- canonical content and links ---------------------------------------------------------------------


def _number(value: float) -> str:
    if not math.isfinite(value):
        return json.dumps(value)  # NaN/Infinity, as Django's JSONField writes them
    return "0.0" if value == 0 else repr(value)


def _canonical(value: Any, out: list[str]) -> None:
    # Numbers are written as floats: PostgreSQL's jsonb gives 1e16 back as the integer 10000000000000000 and
    # 4000000.0 as a float, SQLite gives back what was written; both must hash alike.
    if value is None:
        out.append("null")
    elif value is True or value is False:
        out.append("true" if value else "false")
    elif isinstance(value, int):
        try:
            out.append(_number(float(value)))
        except OverflowError:
            out.append(str(value))
    elif isinstance(value, float):
        out.append(_number(value))
    elif isinstance(value, str):
        out.append(_json_string(value))
    elif isinstance(value, datetime):
        out.append(str((value - _EPOCH) // _MICROSECOND))
    elif isinstance(value, list | tuple):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _canonical(item, out)
        out.append("]")
    elif isinstance(value, Mapping):
        out.append("{")
        for index, key in enumerate(sorted(value)):
            if index:
                out.append(",")
            out.append(_json_string(str(key)))
            out.append(":")
            _canonical(value[key], out)
        out.append("}")
    else:
        raise TypeError(f"cannot hash a {type(value).__name__}")


def _stored(values: Mapping[str, Any], name: str) -> Any:
    return values[name] if name in values else values[STORED_FIELDS[name]]


_CONTENT_KEYS = tuple(_json_string(name) + ":" for name in sorted(CONTENT_FIELDS))
_CONTENT_NAMES = tuple(sorted(CONTENT_FIELDS))
_BODY_KEY = _json_string("body") + ':"'
assert sorted((*CONTENT_FIELDS, "body"))[0] == "body", "the body's digest leads the sorted content"


def call_content(values: Mapping[str, Any]) -> bytes:
    """Canonical bytes of one call's chained content (``values`` has at least ``CONTENT_FIELDS``, and ``body``).

    A packed record or answer counts as what its column holds, its packed text (``dashboard.packing``); a binary
    body as its SHA-256. Exactly ``_canonical`` of that content as a mapping (``tests/security``), written key by key
    in their sorted order, scalars inline: ~3× faster, and the ingester links every call.
    """
    body = values.get("body")
    out: list[str] = ["{", _BODY_KEY, hashlib.sha256(body).hexdigest(), '",'] if body is not None else ["{"]
    for index, (name, key) in enumerate(zip(_CONTENT_NAMES, _CONTENT_KEYS, strict=True)):
        if index:
            out.append(",")
        out.append(key)
        value = stored_form(_stored(values, name))
        kind = type(value)
        if kind is str:
            out.append(_json_string(value))
        elif value is None:
            out.append("null")
        elif kind is float:
            out.append(_number(value))
        elif kind is int:
            try:
                out.append(_number(float(value)))
            except OverflowError:
                out.append(str(value))
        elif kind is datetime:
            out.append(str((value - _EPOCH) // _MICROSECOND))
        else:
            _canonical(value, out)
    out.append("}")
    return "".join(out).encode("ascii")


def chain_link(previous: str, content: bytes) -> str:
    return hashlib.sha256(previous.encode("ascii") + b"\n" + content).hexdigest()


def _lock_chain() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CHAIN_LOCK_KEY])


def _latest_checkpoint() -> AuditCheckpoint | None:
    return AuditCheckpoint.objects.order_by("-last_call_id").first()


def _chain_head() -> str:
    last = VerbCall.objects.order_by("-id").values_list("chain_hash", flat=True).first()
    if last is not None:
        return last
    checkpoint = _latest_checkpoint()
    return checkpoint.chain_hash if checkpoint is not None else GENESIS


# --- node tallies -----------------------------------------------------------------------------------


@dataclass(slots=True)
class NodeCounts:
    considered: int = 0
    filtered_out: int = 0
    placements: int = 0
    last_seen_at: datetime | None = None


def _record(values: Mapping[str, Any]) -> dict[str, Any]:
    """The record of a row with canonical names (``record``) or the stored columns (``record_json``, ``body``)."""
    if "record" in values:
        return values["record"] or {}
    if values.get("body") is not None:  # a filter's or bind's body refers to no other call
        return body_read(bytes(values["body"]), lookup=lambda _event_id: None)[0]
    return values["record_json"] or {}


def tally_call(tallies: dict[str, NodeCounts], values: Mapping[str, Any]) -> None:
    """What one call adds to the per-node counts (the same function undoes it when pruning)."""
    if values["http_status"] != 200:
        return
    record = _record(values)
    touched: list[str] = []
    if values["verb"] == "filter":
        touched = record.get("nodes", [])
        for node in touched:  # (a NodeCounts only for a node not seen yet: 1000 nodes per call)
            tally = tallies.get(node)
            if tally is None:
                tally = tallies[node] = NodeCounts()
            tally.considered += 1
        for node in record.get("failures", {}):
            tallies.setdefault(node, NodeCounts()).filtered_out += 1
    elif values["verb"] == "bind" and not values["error"] and record.get("node"):
        tallies.setdefault(record["node"], NodeCounts()).placements += 1
        touched = [record["node"]]
    at = values["started_at"]
    for node in touched:
        tally = tallies[node]
        if tally.last_seen_at is None or at > tally.last_seen_at:
            tally.last_seen_at = at


def copy_upsert(table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], conflict: str) -> None:
    """PostgreSQL: COPY ``rows`` into a temporary table like ``table``, then one ``INSERT … SELECT … ON CONFLICT``.

    Thousands of values without building (and quoting, client side) a statement that holds them all.
    ``conflict`` is the ``ON CONFLICT`` clause; ``table`` and ``columns`` are identifiers from a model.
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


def _tallies_add(tallies: Mapping[str, NodeCounts]) -> None:
    """One upsert of every node's counts (PostgreSQL: through COPY; SQLite: per chunk of nodes)."""
    if not tallies:
        return
    q = connection.ops.quote_name
    table = q(NodeTally._meta.db_table)
    node, seen = q("node"), q("last_seen_at")
    counters = [q(name) for name in ("considered", "filtered_out", "placements")]
    updates = ", ".join(f"{c} = {table}.{c} + excluded.{c}" for c in counters)
    newest = (
        f"{seen} = CASE WHEN {table}.{seen} IS NULL OR excluded.{seen} > {table}.{seen} "
        f"THEN excluded.{seen} ELSE {table}.{seen} END"
    )
    items = sorted(tallies.items())
    if connection.vendor == "postgresql":
        copy_upsert(
            NodeTally._meta.db_table,
            ["node", "considered", "filtered_out", "placements", "last_seen_at"],
            ((n, t.considered, t.filtered_out, t.placements, t.last_seen_at) for n, t in items),
            f"ON CONFLICT ({node}) DO UPDATE SET {updates}, {newest}",
        )
        return
    per_statement = max(1, (connection.features.max_query_params or 999) // 5)
    with connection.cursor() as cursor:
        for start in range(0, len(items), per_statement):
            chunk = items[start : start + per_statement]
            rows = ", ".join(["(%s, %s, %s, %s, %s)"] * len(chunk))
            params: list[Any] = []
            for name, tally in chunk:
                seen_at = connection.ops.adapt_datetimefield_value(tally.last_seen_at)
                params += [name, tally.considered, tally.filtered_out, tally.placements, seen_at]
            # Identifiers come from the model, every value is a parameter.
            sql = (
                f"INSERT INTO {table} ({node}, {', '.join(counters)}, {seen}) VALUES {rows} "  # noqa: S608
                f"ON CONFLICT ({node}) DO UPDATE SET {updates}, {newest}"
            )
            cursor.execute(sql, params)


def _tallies_subtract(tallies: Mapping[str, NodeCounts]) -> None:
    for name, tally in sorted(tallies.items()):
        NodeTally.objects.filter(node=name).update(
            considered=Greatest(F("considered") - tally.considered, 0),
            filtered_out=Greatest(F("filtered_out") - tally.filtered_out, 0),
            placements=Greatest(F("placements") - tally.placements, 0),
        )
    NodeTally.objects.filter(considered=0, filtered_out=0, placements=0).delete()


def node_tallies_rebuild() -> int:
    """Recount every node from the retained calls (after a restore, or if the counts are ever doubted)."""
    tallies: dict[str, NodeCounts] = {}
    fields = ("verb", "http_status", "error", "record_json", "body", "started_at")
    with transaction.atomic():
        _lock_chain()
        for values in VerbCall.objects.filter(verb__in=["filter", "bind"]).values(*fields).iterator(2000):
            tally_call(tallies, values)
        NodeTally.objects.all().delete()
        _tallies_add(tallies)
    return len(tallies)


# --- appending --------------------------------------------------------------------------------------


class ChainAppender:
    """Seals each new call into the chain as the ingester saves it; made by ``audit_chain_open``."""

    def __init__(self, head: str) -> None:
        self.head = head
        self._tallies: dict[str, NodeCounts] = {}

    def append(self, call: VerbCall) -> VerbCall:
        self.seal(call)
        call.save(force_insert=True)
        return call

    def seal(self, call: VerbCall) -> VerbCall:
        """Link ``call`` to the chain without saving it: the caller inserts the sealed calls in sealing order."""
        values = {name: getattr(call, name) for name in CALL_COLUMNS}
        call.chain_hash = chain_link(self.head, call_content(values))
        self.head = call.chain_hash
        tally_call(self._tallies, values)
        return call

    def link(self, content: bytes) -> str:
        """Link the next call (its ``call_content``) to the chain; the caller counts it (:meth:`count`)."""
        self.head = chain_link(self.head, content)
        return self.head

    def count(self, tallies: Mapping[str, NodeCounts]) -> None:
        """Add per-node counts of calls linked with :meth:`link`."""
        for node, counts in tallies.items():
            tally = self._tallies.get(node)
            if tally is None:
                self._tallies[node] = NodeCounts(
                    counts.considered, counts.filtered_out, counts.placements, counts.last_seen_at
                )
                continue
            tally.considered += counts.considered
            tally.filtered_out += counts.filtered_out
            tally.placements += counts.placements
            seen = counts.last_seen_at
            if seen is not None and (tally.last_seen_at is None or seen > tally.last_seen_at):
                tally.last_seen_at = seen

    def close(self) -> None:
        """Write the per-node counts of the calls appended (call once, before the transaction commits)."""
        _tallies_add(self._tallies)
        self._tallies = {}


def audit_chain_open() -> ChainAppender:
    """Lock the chain for the rest of the current transaction and return an appender at its head."""
    if not connection.in_atomic_block:
        raise RuntimeError("the audit chain is appended to inside the ingest transaction only")
    _lock_chain()
    return ChainAppender(_chain_head())


# --- verification -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChainReport:
    ok: bool
    checked: int
    """Calls whose link was recomputed."""
    first_broken_id: int | None
    """The first call whose stored hash does not match its content and the link before it."""
    reason: str
    start_after_id: int | None
    """Verification started after this call (the checkpoint's, or the one asked for); None from the start."""
    start_hash: str
    head_id: int | None
    """The last call checked; keep ``head_hash`` elsewhere to anchor the chain."""
    head_hash: str
    altered_parts: tuple[str, ...] = ()
    """Shared parts (``SharedPart``) whose bytes no longer match the digest the sealed bodies name."""


def _altered_parts(chunk_size: int = 500) -> list[str]:
    """Every stored shared part checked against its digest (a few per traffic snapshot: cheap beside the chain)."""
    altered = []
    after = ""
    while rows := list(
        SharedPart.objects.filter(digest__gt=after).order_by("digest").values_list("digest", "data")[:chunk_size]
    ):
        altered += [digest for digest, data in rows if hashlib.sha256(bytes(data)).hexdigest() != digest]
        after = rows[-1][0]
    return altered


@dataclass(slots=True)
class _Walk:
    previous: str
    checked: int = 0
    last_id: int | None = None
    broken_id: int | None = None


_WALK_FIELDS = ("id", "chain_hash", *CALL_COLUMNS)


def _walk(rows: Iterable[Mapping[str, Any]], walk: _Walk, tallies: dict[str, NodeCounts] | None = None) -> None:
    for values in rows:
        expected = chain_link(walk.previous, call_content(values))
        walk.checked += 1
        if values["chain_hash"] != expected:
            walk.broken_id = values["id"]
            return
        if tallies is not None:
            tally_call(tallies, values)
        walk.previous = values["chain_hash"]
        walk.last_id = values["id"]


def _rows_after(after_id: int, before_id: int | None = None, chunk_size: int = 2000) -> Iterator[dict[str, Any]]:
    rows = VerbCall.objects.filter(id__gt=after_id)
    if before_id is not None:
        rows = rows.filter(id__lt=before_id)
    return rows.order_by("id").values(*_WALK_FIELDS).iterator(chunk_size)


def _broken_reason(call_id: int) -> str:
    return (
        f"call {call_id}: the stored chain_hash does not match the call's content and the link before it "
        "(the call was altered, or a call before it was deleted or altered)"
    )


def audit_chain_verify(*, after_id: int | None = None, chunk_size: int = 2000) -> ChainReport:
    """Recompute the chain from the last checkpoint (or from just after ``after_id``) to the newest call.

    Raises ``VerbCall.DoesNotExist`` when ``after_id`` names no stored call.
    """
    checkpoint = _latest_checkpoint()
    start_id, start_hash = (checkpoint.last_call_id, checkpoint.chain_hash) if checkpoint else (None, GENESIS)
    if after_id is not None and (start_id is None or after_id > start_id):
        start_hash = VerbCall.objects.values_list("chain_hash", flat=True).get(id=after_id)
        start_id = after_id
    walk = _Walk(previous=start_hash, last_id=start_id)
    _walk(_rows_after(start_id or 0, chunk_size=chunk_size), walk)
    altered = _altered_parts()
    reason = "" if walk.broken_id is None else _broken_reason(walk.broken_id)
    if altered:
        listed = ", ".join(altered[:5]) + (f" and {len(altered) - 5} more" if len(altered) > 5 else "")
        reason = "; ".join(filter(None, [reason, f"shared parts whose bytes no longer match their digest: {listed}"]))
    return ChainReport(
        ok=walk.broken_id is None and not altered,
        checked=walk.checked,
        first_broken_id=walk.broken_id,
        reason=reason,
        altered_parts=tuple(altered),
        start_after_id=start_id,
        start_hash=start_hash,
        head_id=walk.last_id,
        head_hash=walk.previous,
    )


# --- retention --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PruneResult:
    cycles_deleted: int
    calls_deleted: int
    parts_deleted: int
    """Shared parts (``SharedPart``) no remaining call refers to."""
    checkpoint_call_id: int | None
    """The last deleted call: verification resumes after it. None when nothing was deleted."""
    held_back: int
    """Cycles older than the cut-off kept because some of their calls were chained after newer cycles' calls
    (a late bind): the chain can only lose a prefix. A later prune takes them."""


def _prune_parts() -> int:
    """Delete the shared parts no remaining call can refer to: last used before the oldest remaining cycle started.

    A call refers to a part only if the part's ``last_used_at`` is at least the call's start, which is at least its
    cycle's (a cycle starts with its first call); the cycles' newest-first index finds the oldest at once.
    """
    oldest = SchedulingCycle.objects.aggregate(m=Min("started_at"))["m"]
    doomed = SharedPart.objects.all() if oldest is None else SharedPart.objects.filter(last_used_at__lt=oldest)
    return doomed.delete()[0]


def _prune_boundary(older_than: datetime) -> int:
    """The id of the first call that stays: every call below it belongs to a cycle older than the cut-off."""
    boundary = VerbCall.objects.filter(cycle__started_at__gte=older_than).aggregate(m=Min("id"))["m"]
    if boundary is None:
        boundary = (VerbCall.objects.aggregate(m=Max("id"))["m"] or 0) + 1
    while True:  # a cycle straddling the boundary stays whole, so the boundary moves below its first call
        lower = VerbCall.objects.filter(id__lt=boundary, cycle__calls__id__gte=boundary).aggregate(m=Min("id"))["m"]
        if lower is None:
            return int(boundary)
        boundary = lower


def cycles_prune(*, older_than: datetime, dry_run: bool = False, batch_size: int = 2000) -> PruneResult:
    """Delete the cycles that started before ``older_than``, keeping the chain verifiable.

    The stretch of chain to delete is verified first (a broken one raises ``AuditChainBrokenError`` and
    nothing is deleted), then an ``AuditCheckpoint`` keeps its last link. Holds the chain lock, so ingest
    waits (its records stay in the spool) while a prune runs.
    """
    with transaction.atomic():
        _lock_chain()
        boundary = _prune_boundary(older_than)
        checkpoint = _latest_checkpoint()
        start_id, start_hash = (checkpoint.last_call_id, checkpoint.chain_hash) if checkpoint else (0, GENESIS)
        walk = _Walk(previous=start_hash)
        removed: dict[str, NodeCounts] = {}
        _walk(_rows_after(start_id, boundary, batch_size), walk, removed)
        if walk.broken_id is not None:
            raise AuditChainBrokenError(
                ChainReport(
                    ok=False,
                    checked=walk.checked,
                    first_broken_id=walk.broken_id,
                    reason=_broken_reason(walk.broken_id),
                    start_after_id=start_id or None,
                    start_hash=start_hash,
                    head_id=walk.last_id,
                    head_hash=walk.previous,
                )
            )
        calls_deleted, _ = VerbCall.objects.filter(id__lt=boundary).delete()
        cycles_deleted = 0
        doomed = SchedulingCycle.objects.filter(started_at__lt=older_than, calls__isnull=True)
        while ids := list(doomed.values_list("id", flat=True)[:batch_size]):
            cycles_deleted += SchedulingCycle.objects.filter(id__in=ids).delete()[1].get(SchedulingCycle._meta.label, 0)
        if walk.last_id is not None:
            AuditCheckpoint.objects.create(
                last_call_id=walk.last_id,
                chain_hash=walk.previous,
                pruned_before=older_than,
                cycles_deleted=cycles_deleted,
                calls_deleted=calls_deleted,
                created_at=timezone.now(),
            )
        _tallies_subtract(removed)
        parts_deleted = _prune_parts()
        result = PruneResult(
            cycles_deleted=cycles_deleted,
            calls_deleted=calls_deleted,
            parts_deleted=parts_deleted,
            checkpoint_call_id=walk.last_id,
            held_back=SchedulingCycle.objects.filter(started_at__lt=older_than).count(),
        )
        if dry_run:
            transaction.set_rollback(True)
    return result


# --- access -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IssuedToken:
    key: str
    user_created: bool
    token_created: bool


def auditor_token_issue(*, username: str, rotate: bool = False) -> IssuedToken:
    """Make ``username`` (created without a usable password if new) an auditor and return their API token.

    An existing token is returned as is unless ``rotate``, which replaces it (the old key stops working).
    """
    user_model = get_user_model()
    with transaction.atomic():
        user, user_created = user_model.objects.get_or_create(**{user_model.USERNAME_FIELD: username})
        if user_created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        group, _ = Group.objects.get_or_create(name=AUDITOR_GROUP)
        user.groups.add(group)
        if rotate:
            Token.objects.filter(user=user).delete()
        token, token_created = Token.objects.get_or_create(user=user)
    return IssuedToken(key=token.key, user_created=user_created, token_created=token_created)
