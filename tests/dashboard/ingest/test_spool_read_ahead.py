"""The ingester's read-ahead hands over the spool's batches in order, once each, and stops where a pass stops,
whether a thread prepares them (one batch ahead) or a process of its own (two ahead, as ``ingest_spool --follow``)."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor

import pytest

from dashboard.ingest.spool_read_ahead import SpoolReadAhead
from dashboard.spool import Spool, SpoolRow


def _spool(tmp_path, count: int) -> Spool:
    spool = Spool(tmp_path / "spool")
    for n in range(count):
        spool.append(b"record %d" % n)
    return spool


def _every_row(rows: list[SpoolRow]) -> list[bytes]:
    return [row.data for row in rows]


def _held_back_at_7(rows: list[SpoolRow]) -> list[bytes]:
    ready = []
    for row in rows:
        if row.data == b"record 7":
            break  # an answer still being written: this pass stops here
        ready.append(row.data)
    return ready


def _fails_at_5(rows: list[SpoolRow]) -> list[bytes]:
    if any(row.data == b"record 5" for row in rows):
        raise RuntimeError("cannot prepare")
    return _every_row(rows)


@pytest.fixture(scope="module")
def preparing_process() -> Iterator[ProcessPoolExecutor]:
    # Spawned like dashboard.ingest.call_builders's (which also sets Django up, not needed by these settles).
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield pool


@pytest.fixture(params=["thread", "process"])
def executor(request: pytest.FixtureRequest) -> Executor | None:
    return request.getfixturevalue("preparing_process") if request.param == "process" else None


def _drain(spool: Spool, read_ahead: SpoolReadAhead[bytes], into: list[list[bytes]] | None = None) -> list[list[bytes]]:
    batches = [] if into is None else into
    with read_ahead as reader:
        for ready in reader:
            assert all(made == row.data for row, made in ready), "each row with what was made of it"
            batches.append([made for _, made in ready])
            spool.delete_through(ready[-1][0].id)
    return batches


def test_batches_come_in_spool_order_each_row_once(tmp_path, executor: Executor | None) -> None:
    spool = _spool(tmp_path, 23)
    batches = _drain(spool, SpoolReadAhead(spool, batch_size=5, max_batches=None, settle=_every_row, executor=executor))
    assert [len(b) for b in batches] == [5, 5, 5, 5, 3]
    assert [made for batch in batches for made in batch] == [b"record %d" % n for n in range(23)]
    assert spool.depth() == 0


def test_max_batches_leaves_the_rest_in_the_spool(tmp_path, executor: Executor | None) -> None:
    spool = _spool(tmp_path, 23)
    batches = _drain(spool, SpoolReadAhead(spool, batch_size=5, max_batches=2, settle=_every_row, executor=executor))
    assert [len(b) for b in batches] == [5, 5]
    assert spool.depth() == 13


def test_a_batch_cut_short_is_the_last(tmp_path, executor: Executor | None) -> None:
    spool = _spool(tmp_path, 23)
    reader = SpoolReadAhead(spool, batch_size=5, max_batches=None, settle=_held_back_at_7, executor=executor)
    batches = _drain(spool, reader)
    assert batches == [[b"record %d" % n for n in range(5)], [b"record 5", b"record 6"]]
    assert spool.depth() == 16


def test_a_failure_while_reading_ahead_reaches_the_ingester_after_the_batches_before_it(
    tmp_path, executor: Executor | None
) -> None:
    spool = _spool(tmp_path, 12)
    got: list[list[bytes]] = []
    with pytest.raises(RuntimeError, match="cannot prepare"):
        _drain(spool, SpoolReadAhead(spool, batch_size=5, max_batches=None, settle=_fails_at_5, executor=executor), got)
    assert got == [[b"record %d" % n for n in range(5)]]  # the batch read before the failure was handed over
    assert spool.depth() == 7  # the first batch was written and deleted, the rest waits


def test_leaving_early_stops_the_preparing_thread_and_keeps_the_rows(tmp_path) -> None:
    spool = _spool(tmp_path, 30)
    threads_before = set(threading.enumerate())
    with SpoolReadAhead(spool, batch_size=5, max_batches=None, settle=_every_row) as reader:
        for _ in reader:
            break  # the database refused the first batch (an outage): nothing is deleted
    assert set(threading.enumerate()) - threads_before == set()
    assert spool.depth() == 30
    # The next pass starts over from the spool's first row.
    assert _drain(spool, SpoolReadAhead(spool, batch_size=5, max_batches=None, settle=_every_row))[0][0] == b"record 0"


def test_leaving_early_with_two_batches_ahead_in_a_preparing_process_keeps_the_rows(
    tmp_path, preparing_process: ProcessPoolExecutor
) -> None:
    spool = _spool(tmp_path, 30)
    reader = SpoolReadAhead(spool, batch_size=5, max_batches=None, settle=_every_row, executor=preparing_process)
    with reader:
        for _ in reader:
            break  # the database refused the first batch: the two batches prepared ahead are dropped
    assert spool.depth() == 30
    again = SpoolReadAhead(spool, batch_size=5, max_batches=None, settle=_every_row, executor=preparing_process)
    batches = _drain(spool, again)
    assert [made for batch in batches for made in batch] == [b"record %d" % n for n in range(30)]


def test_the_spool_is_read_by_the_ingesting_thread_only(tmp_path) -> None:
    spool = _spool(tmp_path, 12)
    readers = set()
    read_rows = spool.read_rows

    def reading(limit: int, *, after: int = 0) -> list[SpoolRow]:
        readers.add(threading.current_thread())
        return read_rows(limit, after=after)

    spool.read_rows = reading  # type: ignore[method-assign]
    _drain(spool, SpoolReadAhead(spool, batch_size=5, max_batches=None, settle=_every_row))
    assert readers == {threading.current_thread()}  # no SQLite connection opened per pass by another thread


def test_records_appended_while_the_last_batch_is_written_go_in_the_same_pass(
    tmp_path, executor: Executor | None
) -> None:
    # The ingester polls; a pass ends only when a read after its last write finds nothing, as before read-ahead.
    spool = _spool(tmp_path, 5)
    batches = []
    with SpoolReadAhead(spool, batch_size=5, max_batches=None, settle=_every_row, executor=executor) as reader:
        for ready in reader:
            batches.append([made for _, made in ready])
            if len(batches) == 1:
                spool.append(b"late 1")
                spool.append(b"late 2")
            spool.delete_through(ready[-1][0].id)
    assert batches == [[b"record %d" % n for n in range(5)], [b"late 1", b"late 2"]]
    assert spool.depth() == 0


def test_the_backlog_counts_the_waiting_records_from_their_ids(tmp_path) -> None:
    spool = _spool(tmp_path, 12)
    assert spool.backlog() == spool.depth() == 12
    spool.delete_through(spool.read_rows(5)[-1].id)
    assert spool.backlog() == spool.depth() == 7
    spool.delete_through(spool.read_rows(7)[-1].id)
    assert spool.backlog() == spool.depth() == 0
    spool.append(b"after")
    assert spool.backlog() == 1
