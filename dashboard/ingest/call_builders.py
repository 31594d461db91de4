"""Processes of their own that build the new calls of the spool's batches for the dedicated ingester
(``ingest_spool --follow``, ``--preparers``).

Building a batch's calls (decompressing and decoding records, building their bodies: ``new_calls``) takes most of
the ingester's Python time, and a thread cannot run it beside the writing: both need the GIL. In a second process
the two halves run on two cores. What comes back is small to hand over: bodies and filter references are bytes,
each node list travels as one string, received as the same list object when it repeats (a candidate list does,
from pod to pod), and a filter's failures (the node counts' reasons) once per batch however many calls share them.

Nothing changes for the records: batches are handed over in spool order, each built by one process (which keeps
the recent filters a prioritize body refers to), and rows leave the spool only after their batch committed.
The processes are spawned, never forked (a fork copies locks other threads hold), and set Django up like the
ingester. They ignore SIGINT and SIGTERM: the ingester decides when they stop and shuts them down; should it be
killed outright, they end by themselves within a second.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

__all__ = ["BrokenProcessPool", "start_call_builders"]


ORPHAN_CHECK_SECONDS = 1.0


def _exit_with(parent: int) -> None:
    """End this process once ``parent`` is gone: killed outright, the ingester cannot shut its builders down, and
    they would wait for work forever (they hold their own end of the queue, so they never see it close)."""
    while os.getppid() == parent:
        time.sleep(ORPHAN_CHECK_SECONDS)  # a watchdog's poll, not a wait for a result
    os._exit(0)


def _setup(parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    threading.Thread(target=_exit_with, args=(parent,), name="orphan-check", daemon=True).start()
    import django

    django.setup()


def start_call_builders(processes: int) -> ProcessPoolExecutor:
    """``processes`` builder processes, for ``spool_ingest(builders=...)``; shut them down when done, and start
    others if an ingest raised ``BrokenProcessPool`` (one died: killed, out of memory).

    With more than one, consecutive batches are built side by side (and still handed over in order); each process
    then remembers the filters of its own batches only, so a prioritize whose filter went to the other process (a
    cycle split by a batch boundary) is stored whole instead of referring to it.
    """
    spawn = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=processes, mp_context=spawn, initializer=_setup, initargs=(os.getpid(),))
    # Started now rather than by the first batch: a record never waits for Django to be set up in them.
    for started in [pool.submit(os.getpid) for _ in range(processes)]:
        started.result()
    return pool
