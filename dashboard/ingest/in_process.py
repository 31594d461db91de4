"""The ingester as a thread of a web process (``SCHEDLENS_INGEST_IN_PROCESS``), for single-process layouts.

The demo and small installations run one process: its verbs append to the spool and this thread moves the
records into the database. Deployments run ``manage.py ingest_spool`` as a process of its own instead (the
manifests set ``SCHEDLENS_INGEST_IN_PROCESS=false``), so a slow database never competes with the verbs for CPU.
Started by the WSGI wiring, not by the runtime: the verbs' runtime imports no ingest service.
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.db import close_old_connections

from dashboard.ingest.spool_ingest import spool_ingest
from dashboard.spool import Spool

log = logging.getLogger(__name__)


def ingest_in_background(*, spool: Spool) -> threading.Thread:
    """Start a daemon thread that ingests ``spool`` every ``SCHEDLENS_INGEST_INTERVAL`` seconds, forever."""
    thread = threading.Thread(target=_ingest_forever, args=(spool,), name="schedlens-ingest", daemon=True)
    thread.start()
    return thread


def _ingest_forever(spool: Spool) -> None:
    while True:
        try:
            spool_ingest(spool=spool)
        except Exception:  # The database may be down: records stay in the spool until it returns.
            log.warning("spool ingest failed; will retry", exc_info=True)
        finally:
            close_old_connections()
        time.sleep(settings.SCHEDLENS_INGEST_INTERVAL)
