"""Draining a spool into the test database as the ingester does."""

from __future__ import annotations

import time


def ingest_everything(spool, *, deadline_seconds: float = 10.0) -> int:
    """Drain a spool into the database, waiting for answers still being confirmed (bounded, not a sleep-for-timing).

    A verb's record is held back until the server confirms the answer was written; that confirmation lands just
    after the client has read the response, so an ingest right after the last call can find it not yet there.
    """
    from dashboard.ingest.spool_ingest import spool_ingest

    moved = spool_ingest(spool=spool)
    deadline = time.monotonic() + deadline_seconds
    while spool.depth() and time.monotonic() < deadline:
        time.sleep(0.01)
        moved += spool_ingest(spool=spool)
    assert spool.depth() == 0, "records still unconfirmed after the deadline"
    return moved
