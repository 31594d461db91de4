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
