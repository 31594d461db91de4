"""The chain lock: what every writer of the hash chain (``dashboard.audit.chain``), and of the node counts kept beside
it (``dashboard.services.node_tallies``), takes first.

Its own module because the chain's appender counts the calls it links with the node counts, and the node counts'
rebuild takes this lock: both import it, neither imports the other for it.
"""

from __future__ import annotations

from django.db import connection

CHAIN_LOCK_KEY = 0x5C4ED1E5A0D17
"""``pg_advisory_xact_lock`` key (an arbitrary constant)."""


def lock_chain() -> None:
    """Hold the chain until the current transaction ends: the lock every writer of the chain, and of the node counts
    kept beside it, takes first.

    Chain appends (the ingester), prunes (retention) and the node counts' rebuild take it inside their transaction,
    before they read the chain's head or its calls: appends are then serialized, so id order is chain order, and a
    prune or a rebuild never sees half of an ingest batch. On SQLite the database's single writer does this: a
    second writer fails with "database is locked" (an ingester retries from the spool)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CHAIN_LOCK_KEY])
