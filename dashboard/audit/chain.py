"""Tamper evidence of the scheduling record: every ``VerbCall`` is one link of a single hash chain, in id order::

    chain_hash = sha256(previous chain_hash + "\\n" + canonical bytes of the call's immutable content)

The call, not the cycle, is the chained unit because a cycle's summary columns are re-derived whenever a
later call joins it; the calls are the source of truth and are never updated. The ingester opens the chain
inside its transaction (``audit_chain_open``), which takes the chain lock (:func:`lock_chain`) *before* any call is
inserted: appends of concurrent ingesters are serialized, so id order is chain order.

Altering, deleting or reordering a stored call breaks the link at that call (or, for a deletion, at the call
after it). Rewriting every hash from some call to the end cannot be detected from inside the database: keep
the head hash that ``audit_chain_verify`` reports somewhere else to anchor it.

Retention (``dashboard.services.retention``) deletes a prefix of the chain after verifying it, and leaves an
``AuditCheckpoint`` with the last deleted call's id and hash, from which verification resumes. The appender also
counts each call for the per-node counts (``dashboard.services.node_tallies``).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from json.encoder import encode_basestring_ascii
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Max, Min

from dashboard.audit.lock import lock_chain
from dashboard.models import AuditCheckpoint, AuditVerification, ChainOrigin, SharedPart, VerbCall
from dashboard.services.node_tallies import DayTallies, tally_call
from dashboard.storage.packed_json import stored_form

GENESIS = "0" * 64
"""The ``previous`` hash of the very first call."""
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
OPTIONAL_CONTENT_FIELDS = ("profile_version",)
"""Covered only when not empty: calls recorded before the column existed hash exactly as they did."""
STORED_FIELDS = {"record": "record_json", "response": "response_json"}
"""Canonical name → the ``VerbCall`` field that holds it."""
CALL_COLUMNS = (*(STORED_FIELDS.get(name, name) for name in CONTENT_FIELDS), *OPTIONAL_CONTENT_FIELDS, "body")
"""The ``VerbCall`` fields a link covers."""
_json_string = encode_basestring_ascii
"""``json.dumps`` of a string, without its dispatch (the same C function writes it)."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = datetime.resolution
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


_CONTENT_NAMES = tuple(sorted(CONTENT_FIELDS))
_CONTENT_KEYS = tuple(_json_string(name) + ":" for name in _CONTENT_NAMES)
_VERSIONED_NAMES = tuple(sorted((*CONTENT_FIELDS, *OPTIONAL_CONTENT_FIELDS)))
_VERSIONED_KEYS = tuple(_json_string(name) + ":" for name in _VERSIONED_NAMES)
_BODY_KEY = _json_string("body") + ':"'
assert sorted((*CONTENT_FIELDS, "body"))[0] == "body", "the body's digest leads the sorted content"


def call_content(values: Mapping[str, Any]) -> bytes:
    """Canonical bytes of one call's chained content (``values`` has at least ``CONTENT_FIELDS``, and ``body``; its
    ``profile_version`` when not empty).

    A packed record or answer counts as what its column holds, its packed text (``dashboard.storage.packed_json``);
    a binary body as its SHA-256. Exactly ``_canonical`` of that content as a mapping (``tests/security``), written
    key by key in their sorted order with the scalars inline, because the ingester links every call it writes.
    """
    body = values.get("body")
    out: list[str] = ["{", _BODY_KEY, hashlib.sha256(body).hexdigest(), '",'] if body is not None else ["{"]
    versioned = bool(values.get("profile_version"))
    names, keys = (_VERSIONED_NAMES, _VERSIONED_KEYS) if versioned else (_CONTENT_NAMES, _CONTENT_KEYS)
    for index, (name, key) in enumerate(zip(names, keys, strict=True)):
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


def latest_checkpoint() -> AuditCheckpoint | None:
    """Where retention cut the chain last (None: never)."""
    return AuditCheckpoint.objects.order_by("-last_call_id").first()


def checkpoint_link() -> tuple[int, str]:
    """Where the retained chain starts: the last checkpoint's call and link, or (0, the genesis) without one."""
    checkpoint = latest_checkpoint()
    return (checkpoint.last_call_id, checkpoint.chain_hash) if checkpoint else (0, GENESIS)


def _chain_head() -> str:
    last = VerbCall.objects.order_by("-id").values_list("chain_hash", flat=True).first()
    if last is not None:
        return last
    checkpoint = latest_checkpoint()
    return checkpoint.chain_hash if checkpoint is not None else GENESIS


# --- appending --------------------------------------------------------------------------------------


class ChainAppender:
    """Seals each new call into the chain as the ingester saves it; made by ``audit_chain_open``."""

    def __init__(self, head: str, recorded_at: datetime) -> None:
        self.head = head
        self.recorded_at = recorded_at
        """The ``recorded_at`` of the calls appended: the database's clock once the chain lock is held, so that it
        grows with the ids whichever ingester appends (a day of calls is one stretch of the chain)."""

    @property
    def day(self) -> date:
        """The day the calls appended are stored on (their ``recorded_at``, UTC): the node counts' day."""
        return self.recorded_at.astimezone(UTC).date()

    def link(self, content: bytes) -> str:
        """Link the next call (its ``call_content``) to the chain; the caller counts it (``BatchTallies``)."""
        self.head = chain_link(self.head, content)
        return self.head


def audit_chain_open() -> ChainAppender:
    """Lock the chain for the rest of the current transaction and return an appender at its head."""
    if not connection.in_atomic_block:
        raise RuntimeError("the audit chain is appended to inside the ingest transaction only")
    lock_chain()
    now = _database_now()
    chain_origin_claim(now)
    return ChainAppender(_chain_head(), now)


class ChainOriginMismatch(RuntimeError):
    """This process's binds are not the kind the chain records: nothing is appended (the records stay spooled)."""


def chain_origin_claim(now: datetime) -> None:
    """Check, under the chain lock, that the chain records this process's kind of binds; the first append writes it.
    Once per ingest transaction: a one-row table, next to a batch of calls."""
    binds = str(settings.SCHEDLENS_BIND_MODE)
    origin = ChainOrigin.objects.first()
    if origin is None:
        origin = ChainOrigin.objects.create(binds=binds, first_appended_at=now)
    if origin.binds != binds:
        raise ChainOriginMismatch(chain_origin_problem(origin, binds))


def chain_origin_problem(origin: ChainOrigin, binds: str) -> str:
    if origin.binds == "simulated":
        return (
            f"this database holds the demo's audit chain ({origin}) and this process binds for real "
            f"(SCHEDLENS_BIND_MODE={binds}): give the real cluster a database of its own (DATABASE_URL; make serve "
            "keeps var/cluster/, make run var/demo/)"
        )
    return (
        f"this database holds a real cluster's audit chain ({origin}) and this process simulates binds "
        f"(SCHEDLENS_BIND_MODE={binds}): give the demo a database of its own (make run keeps var/demo/)"
    )


def chain_origin_conflict() -> str:
    """What stops this process appending to the database's chain (empty: nothing, or the table is not there yet)."""
    try:
        origin = ChainOrigin.objects.first()
    except DatabaseError:  # before migrate created the table: nothing recorded yet
        return ""
    binds = str(settings.SCHEDLENS_BIND_MODE)
    return "" if origin is None or origin.binds == binds else chain_origin_problem(origin, binds)


def _database_now() -> datetime:
    if connection.vendor != "postgresql":
        return datetime.now(UTC)
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        now: datetime = cursor.fetchone()[0]
    return now


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
    """Every stored shared part checked against its digest (the chain covers a body, and a body names its part by
    digest: a part altered in place would change what a sealed call reads back without breaking a link)."""
    altered = []
    after = ""
    while rows := list(
        SharedPart.objects.filter(digest__gt=after).order_by("digest").values_list("digest", "data")[:chunk_size]
    ):
        altered += [digest for digest, data in rows if hashlib.sha256(bytes(data)).hexdigest() != digest]
        after = rows[-1][0]
    return altered


def _broken_reason(call_id: int) -> str:
    return (
        f"call {call_id}: the stored chain_hash does not match the call's content and the link before it "
        "(the call was altered, or a call before it was deleted or altered)"
    )


@dataclass(slots=True)
class ChainWalk:
    """A stretch of the chain recomputed call by call (:func:`chain_walk`), up to the first broken link."""

    previous: str
    """The last good link (the start's hash before any call)."""
    checked: int = 0
    last_id: int | None = None
    """The last call whose link held."""
    broken_id: int | None = None

    def report(self, *, start_after_id: int | None, start_hash: str) -> ChainReport:
        return ChainReport(
            ok=self.broken_id is None,
            checked=self.checked,
            first_broken_id=self.broken_id,
            reason="" if self.broken_id is None else _broken_reason(self.broken_id),
            start_after_id=start_after_id,
            start_hash=start_hash,
            head_id=self.last_id,
            head_hash=self.previous,
        )


_WALK_FIELDS = ("id", "chain_hash", "recorded_at", *CALL_COLUMNS)


def _walk(rows: Iterable[Mapping[str, Any]], walk: ChainWalk, tallies: DayTallies | None) -> None:
    for values in rows:
        expected = chain_link(walk.previous, call_content(values))
        walk.checked += 1
        if values["chain_hash"] != expected:
            walk.broken_id = values["id"]
            return
        if tallies is not None:
            tally_call(tallies.setdefault(values["recorded_at"].astimezone(UTC).date(), {}), values)
        walk.previous = values["chain_hash"]
        walk.last_id = values["id"]


def _rows_after(after_id: int, before_id: int | None, chunk_size: int) -> Iterator[dict[str, Any]]:
    rows = VerbCall.objects.filter(id__gt=after_id)
    if before_id is not None:
        rows = rows.filter(id__lt=before_id)
    walked: Iterator[dict[str, Any]] = rows.order_by("id").values(*_WALK_FIELDS).iterator(chunk_size)
    return walked


def chain_walk(
    walk: ChainWalk,
    *,
    after_id: int,
    before_id: int | None = None,
    chunk_size: int = 2000,
    tallies: DayTallies | None = None,
) -> None:
    """Recompute the links of the calls after ``after_id`` (and before ``before_id``) from ``walk.previous``,
    stopping at the first that does not hold; ``tallies``: count the calls whose link held (``node_tallies``), by
    the day they were stored."""
    _walk(_rows_after(after_id, before_id, chunk_size), walk, tallies)


class VerificationMovedError(Exception):
    """``resume``: the call the last verification ended on no longer carries the hash it was verified with."""


def _resume_point(start_id: int | None) -> tuple[int, str] | None:
    """Where the last verification that reached the head ended, if after ``start_id`` (the checkpoint's)."""
    verified = AuditVerification.objects.order_by("-last_call_id").first()
    if verified is None or (start_id is not None and verified.last_call_id <= start_id):
        return None
    stored = VerbCall.objects.filter(id=verified.last_call_id).values_list("chain_hash", flat=True).first()
    if stored != verified.chain_hash:
        when = f"{verified.verified_at:%Y-%m-%d %H:%M:%S}Z"
        raise VerificationMovedError(
            f"call {verified.last_call_id} no longer carries the hash verified on {when} ({verified.chain_hash}): "
            "the chain was rewritten from there or before; verify without --resume"
        )
    return verified.last_call_id, verified.chain_hash


def audit_chain_verify(*, after_id: int | None = None, resume: bool = False, chunk_size: int = 2000) -> ChainReport:
    """Recompute the chain from the last checkpoint (or from just after ``after_id``) to the newest call.

    ``resume``: start where the last verification that reached the head ended (``AuditVerification``), after
    checking that its call still carries the hash it was verified with; what was verified before is not re-read.
    A verification that reaches the head with every link holding is remembered so.

    Raises ``VerbCall.DoesNotExist`` when ``after_id`` names no stored call, ``VerificationMovedError`` when
    ``resume`` finds the remembered link changed.
    """
    checkpoint = latest_checkpoint()
    start_id, start_hash = (checkpoint.last_call_id, checkpoint.chain_hash) if checkpoint else (None, GENESIS)
    if after_id is not None and (start_id is None or after_id > start_id):
        start_hash = VerbCall.objects.values_list("chain_hash", flat=True).get(id=after_id)
        start_id = after_id
    elif resume and (point := _resume_point(start_id)) is not None:
        start_id, start_hash = point
    walk = ChainWalk(previous=start_hash, last_id=start_id)
    chain_walk(walk, after_id=start_id or 0, chunk_size=chunk_size)
    report = walk.report(start_after_id=start_id, start_hash=start_hash)
    if report.ok and report.head_id is not None and report.checked:
        AuditVerification.objects.create(
            last_call_id=report.head_id,
            chain_hash=report.head_hash,
            checked=report.checked,
            started_after_id=start_id,
            verified_at=datetime.now(UTC),
        )
    altered = _altered_parts()
    if not altered:
        return report
    listed = ", ".join(altered[:5]) + (f" and {len(altered) - 5} more" if len(altered) > 5 else "")
    altered_reason = f"shared parts whose bytes no longer match their digest: {listed}"
    reason = "; ".join(filter(None, [report.reason, altered_reason]))
    return replace(report, ok=False, reason=reason, altered_parts=tuple(altered))


def audit_chain_verify_day(day: date, *, chunk_size: int = 2000) -> ChainReport:
    """Recompute the links of the calls stored on ``day`` (UTC, by ``recorded_at``: one day partition on
    PostgreSQL), from the stored link of the call before them (or the checkpoint that replaced it).

    Shows that the day's calls are unaltered and follow the link before them; that link itself is the previous day's
    to verify. An empty day checks nothing.
    """
    start = datetime.combine(day, time(), tzinfo=UTC)
    stretch = VerbCall.objects.filter(recorded_at__gte=start, recorded_at__lt=start + timedelta(days=1))
    bounds = stretch.aggregate(low=Min("id"), high=Max("id"))
    low, high = bounds["low"], bounds["high"]
    if low is None:
        return ChainReport(True, 0, None, "", None, GENESIS, None, GENESIS)
    before = VerbCall.objects.filter(id__lt=low).order_by("-id").values_list("id", "chain_hash").first()
    checkpoint = AuditCheckpoint.objects.filter(last_call_id__lt=low).order_by("-last_call_id").first()
    if checkpoint is not None and (before is None or checkpoint.last_call_id >= before[0]):
        before = (checkpoint.last_call_id, checkpoint.chain_hash)
    start_id, start_hash = before if before is not None else (0, GENESIS)
    walk = ChainWalk(previous=start_hash, last_id=start_id or None)
    chain_walk(walk, after_id=start_id, before_id=high + 1, chunk_size=chunk_size)
    return walk.report(start_after_id=start_id or None, start_hash=start_hash)
