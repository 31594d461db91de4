"""The lock every writer of the audit chain, and of the node counts kept beside it, takes first.

Chain appends (the ingester), prunes (retention) and the node counts' rebuild take it inside their transaction,
before they read the chain's head or its calls: appends are then serialized, so id order is chain order, and a
prune or a rebuild never sees half of an ingest batch.
"""

from __future__ import annotations

from django.db import connection

CHAIN_LOCK_KEY = 0x5C4ED1E5A0D17
"""``pg_advisory_xact_lock`` key (an arbitrary constant)."""


def lock_chain() -> None:
    """Hold the chain until the current transaction ends. On SQLite the database's single writer does this: a second
    writer fails with "database is locked" (an ingester retries from the spool)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CHAIN_LOCK_KEY])
