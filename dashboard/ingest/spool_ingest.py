"""Drain the spool into the database, batch after batch; safe to run from several processes at once.

Each batch goes: read (``dashboard.ingest.spool_read_ahead``, ahead of the writing) → decode and sanitize each
record and build its new call (:func:`ready_calls`, in a thread or in builder processes:
``dashboard.ingest.call_builders``) → fold into cycles, write and seal (``dashboard.ingest.cycles``) →
delete the batch's rows from the spool. Rows leave the spool only after their batch committed: a crash in between
ingests the batch again, which the unique ``event_id`` makes harmless.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Executor
from functools import partial

import msgspec
import zstandard
from django.conf import settings
from django.db import InterfaceError, OperationalError

from dashboard.audit.chain import ChainOriginMismatch
from dashboard.ingest.cycles import ingest_calls
from dashboard.ingest.new_calls import NewCall, build_call
from dashboard.ingest.sanitize import sanitize_for_postgres
from dashboard.ingest.spool_read_ahead import SpoolReadAhead
from dashboard.services.profile_versions import profile_versions_store
from dashboard.spool import Spool, SpoolRow
from scheduler_core.extender.record.spool_codec import decode_event
from scheduler_core.extender.record.structs import PRIORITIZE, VerbEvent

log = logging.getLogger(__name__)

ANSWER_NOT_CONFIRMED = (
    "answer not confirmed: schedlens stopped, or lost the connection, before the answer was written; "
    "kube-scheduler saw this call fail"
)


def unconfirmed(event: VerbEvent) -> VerbEvent:
    error = f"{ANSWER_NOT_CONFIRMED}; {event.error}" if event.error else ANSWER_NOT_CONFIRMED
    return msgspec.structs.replace(event, error=error)


def ready_calls(rows: list[SpoolRow], grace_seconds: float) -> list[NewCall | None]:
    """The new calls of the leading rows ready for the database (None: not a verb record); stops at a row whose
    answer is still being written. A prioritize's source is left to its row (:func:`with_row_sources`): in a builder
    process, sending the row's bytes back would double what travels."""
    ready: list[NewCall | None] = []
    now = time.time()
    for row in rows:
        try:
            decoded = decode_event(row.data, derive_answer=False)
            event = sanitize_for_postgres(decoded, row.data)
        except (msgspec.DecodeError, zstandard.ZstdError) as exc:
            log.error("spool row %s is not a verb record (%s); set aside in the spool's rejected table", row.id, exc)
            ready.append(None)
            continue
        if not row.answered:
            if now - event.started_at < grace_seconds:
                break  # the answer is (most likely) being written right now; the next pass takes it
            log.warning("the answer recorded in spool row %s (%s) was never confirmed written", row.id, event.verb)
            event = unconfirmed(event)
            ready.append(build_call(event))  # its source is the event: the row's bytes lack the error
            continue
        call = build_call(event, spooled=row.data if event is decoded else None)
        call.source = None  # a prioritize's: its row holds it, and ``with_row_sources`` puts the row's bytes back
        ready.append(call)
    return ready


def with_row_sources(ready: list[tuple[SpoolRow, NewCall | None]]) -> list[tuple[SpoolRow, NewCall | None]]:
    """``ready`` (rows with what :func:`ready_calls` made of them) with each prioritize's source back: its row's
    bytes."""
    for row, call in ready:
        if call is not None and call.source is None and call.verb == PRIORITIZE:
            call.source = row.data
    return ready


def _ingest_rows(spool: Spool, ready: list[tuple[SpoolRow, NewCall | None]]) -> None:
    """Ingest in one transaction; if the database refuses the batch's content, row by row, setting aside the rows
    it refuses (an outage is raised instead: those rows wait in the spool)."""
    try:
        ingest_calls([call for _, call in ready if call is not None])
    except (OperationalError, InterfaceError, ChainOriginMismatch):  # the records wait in the spool
        raise
    except Exception:
        log.warning("an ingest batch was refused; retrying its records one by one", exc_info=True)
    else:
        for row, call in ready:
            if call is None:
                spool.reject(row.id, "not a verb record")
        return
    for row, call in ready:
        if call is None:
            spool.reject(row.id, "not a verb record")
            continue
        try:
            ingest_calls([call])
        except (OperationalError, InterfaceError, ChainOriginMismatch):
            raise
        except Exception as exc:
            log.error("spool row %s was refused by the database and set aside: %s", row.id, exc, exc_info=True)
            spool.reject(row.id, f"{type(exc).__name__}: {exc}")


def spool_ingest(
    *,
    spool: Spool,
    batch_size: int = 500,
    max_batches: int | None = None,
    confirm_grace_seconds: float | None = None,
    builders: Executor | None = None,
    ahead: int = 2,
) -> int:
    """Move records from the spool into the database; returns how many records left the spool.

    A record whose answer was not confirmed written within ``confirm_grace_seconds``
    (``SCHEDLENS_ANSWER_CONFIRM_SECONDS``) is stored as a failed call (see ``dashboard.spool``). The next batch's
    calls are built while one is written: by ``builders``' processes, kept ``ahead`` batches ahead, else by a thread.
    """
    grace = settings.SCHEDLENS_ANSWER_CONFIRM_SECONDS if confirm_grace_seconds is None else confirm_grace_seconds
    moved = 0
    with spool.ingest_lease() as leased:
        if not leased:
            return 0
        profile_versions_store(spool=spool)  # the versions the calls name, before the calls
        with SpoolReadAhead(
            spool,
            batch_size=batch_size,
            max_batches=max_batches,
            settle=partial(ready_calls, grace_seconds=grace),
            executor=builders,
            ahead=ahead,
        ) as batches:
            for ready in batches:
                _ingest_rows(spool, with_row_sources(ready))
                spool.delete_through(ready[-1][0].id)
                moved += len(ready)
    return moved
