"""The spool's WAL-checkpoint thread ends: on ``close()``, and by itself once the spool's directory is gone.

Before, every Spool that appended once kept a thread that checkpointed forever, and after a test removed its
temporary directory it logged "spool checkpoint failed" every second until the process exited.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from dashboard.spool import Spool


def appended(directory: Path) -> Spool:
    spool = Spool(directory)
    spool.append(b"record")
    thread = spool.checkpoint_thread
    assert thread is not None, "the first append starts the checkpoint thread"
    assert thread.is_alive()
    assert thread.daemon, "it never keeps a process from exiting"
    return spool


def test_close_stops_the_checkpoint_thread_and_the_spool_still_reads_and_appends(tmp_path: Path) -> None:
    spool = appended(tmp_path / "spool")
    thread = spool.checkpoint_thread
    assert thread is not None

    spool.close()
    thread.join(timeout=10)

    assert not thread.is_alive()
    spool.append(b"after close")
    assert [data for _, data in spool.read_batch(10)] == [b"record", b"after close"]
    assert spool.checkpoint_thread is thread, "appending after close() does not start another thread"
    spool.close()  # twice is harmless


def test_the_thread_stops_by_itself_once_the_spool_directory_is_removed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spool = appended(tmp_path / "spool")
    thread = spool.checkpoint_thread
    assert thread is not None

    with caplog.at_level(logging.INFO, logger="dashboard.spool"):
        shutil.rmtree(tmp_path / "spool")
        thread.join(timeout=10)

    assert not thread.is_alive()
    messages = [record.getMessage() for record in caplog.records]
    assert any("its checkpoint thread stops" in message for message in messages)
    assert not any("spool checkpoint failed" in message for message in messages)


def _append_paced(directory: str, count: int, size: int) -> None:
    """A gunicorn worker's share of the load: appends about a millisecond apart, never a pause long enough for
    a checkpoint to catch up."""
    import os
    import time

    spool = Spool(directory)
    spool._checkpointer_pid = os.getpid()  # this process's own appends only: the test checkpoints
    record = b"x" * size
    for _ in range(count):
        spool.append(record)
        time.sleep(0.001)  # pacing the load (like verbs arriving), not waiting for a result


def _ingest_steadily(directory: str, stop: object) -> None:
    """The ingester: reads and deletes what is spooled, over and over (a reader the WAL has to wait for)."""
    spool = Spool(directory)
    while not stop.is_set():  # type: ignore[attr-defined]
        if rows := spool.read_batch(100):
            spool.delete_through(rows[-1][0])


def test_the_wal_starts_over_while_appends_and_ingest_never_pause(tmp_path: Path, monkeypatch) -> None:
    """Two appending processes and an ingester, as deployed: a PASSIVE checkpoint alone never catches up, so
    SQLite never starts the WAL over and it grows past everything written (with the WAL index every process maps
    growing alongside)."""
    import multiprocessing
    import time

    from dashboard import spool as spool_module

    monkeypatch.setattr(spool_module, "WAL_RESTART_FRAMES", 256)  # 1 MiB instead of 64 MiB: the same logic, smaller
    directory = str(tmp_path / "spool")
    spool = Spool(directory)
    # Spawned, not forked: a fork copies whatever lock another thread of the test process held at that instant
    # (SQLite's, from an earlier test's spool threads), and a child stuck on one never exits.
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    count, size = 1500, 16_384
    # Daemonic: a child still running when the test is done is terminated, never waited for at exit.
    writers = [context.Process(target=_append_paced, args=(directory, count, size), daemon=True) for _ in range(2)]
    ingester = context.Process(target=_ingest_steadily, args=(directory, stop), daemon=True)
    for process in [*writers, ingester]:
        process.start()
    wal = tmp_path / "spool" / "spool.sqlite3-wal"
    largest = 0
    try:
        while any(writer.is_alive() for writer in writers):
            spool.checkpoint()
            largest = max(largest, wal.stat().st_size if wal.exists() else 0)
            time.sleep(0.05)  # the checkpoint thread's round (1 s) scaled down with the load: pacing, not waiting
    finally:
        stop.set()
        for process in [*writers, ingester]:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
                process.join()
    written = 2 * count * size  # 48 MiB through the WAL
    assert [process.exitcode for process in [*writers, ingester]] == [0, 0, 0]
    # Without the RESTART the WAL outgrows everything written; with it, it starts over
    # whenever the readers let it, which on 2 loaded cores can be seconds apart: so less than written, not a fraction.
    assert largest < written, f"the WAL reached {largest} bytes for {written} written"
