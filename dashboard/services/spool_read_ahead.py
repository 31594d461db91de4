"""Prepare the spool's next batch while the ingester writes the current one to the database.

Preparing a batch (decoding records, building bodies) and writing one (COPY, commit) take about as long as each
other, and the writing mostly waits for PostgreSQL (zstd and SQLite release the GIL too): one thread preparing the
next batch keeps the process busy during those waits. Nothing changes for the records: batches are the same rows in
the same order, prepared in arrival order by one thread at a time, and a row leaves the spool only after its batch
committed. The spool is read by the ingester's own thread (and its own SQLite connection), as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

from dashboard.spool import Spool, SpoolRow

T = TypeVar("T")

Settle = Callable[[list[SpoolRow]], list[tuple[SpoolRow, T]]]
"""Rows in spool order → the leading rows ready for the database, each with what was made of it."""


class SpoolReadAhead(Generic[T]):
    """Batches of the spool as ``settle`` makes them, each settled by a thread while the one before is written.

    Use as a context manager and iterate; delete a batch's rows from the spool before taking the next batch. The
    batches end at the first one that ``settle`` cut short (a row held back) or left empty, after ``max_batches``,
    or when the spool is drained. Leaving early waits for the batch being settled and drops it: its rows stay in the
    spool (the next pass reads and prepares them again).
    """

    def __init__(self, spool: Spool, *, batch_size: int, max_batches: int | None, settle: Settle[T]) -> None:
        self._spool = spool
        self._batch_size = batch_size
        self._max_batches = max_batches
        self._settle = settle
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spool-prepare")

    def __enter__(self) -> SpoolReadAhead[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __iter__(self) -> Iterator[list[tuple[SpoolRow, T]]]:
        rows = self._spool.read_rows(self._batch_size)
        pending: Future[list[tuple[SpoolRow, T]]] | None = self._pool.submit(self._settle, rows)
        batches = 0
        while pending is not None:
            ready = pending.result()  # raises what settling raised, after the batches before it were written
            if not ready:
                return
            batches += 1
            # A batch cut short stops the pass: a row is held back behind an answer still being written.
            last = len(ready) < len(rows) or (self._max_batches is not None and batches >= self._max_batches)
            pending = None
            if not last:
                # This batch is still the spool's first rows (deleted once written): read past it.
                after = ready[-1][0].id
                rows = [r for r in self._spool.read_rows(self._batch_size + len(ready)) if r.id > after]
                rows = rows[: self._batch_size]
                if rows:
                    pending = self._pool.submit(self._settle, rows)
            yield ready
            if not last and pending is None:
                # Nothing to read ahead: read again now that the batch is written, as a pass without read-ahead does
                # (records appended meanwhile go now, not a polling interval later); nothing there ends the pass.
                rows = self._spool.read_rows(self._batch_size)
                pending = self._pool.submit(self._settle, rows)
