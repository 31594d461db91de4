"""Build the spool's next batches while the ingester writes the current one to the database.

Building a batch's calls (decoding records, building bodies) takes longer than writing them (COPY, commit), which
mostly waits for PostgreSQL. A thread building the next batch keeps the process busy during those waits; a process
of its own (``dashboard.ingest.call_builders``) builds beside the writing on another core, and is kept batches
ahead so that it never waits for the ingester to read the spool. Nothing changes for the records: batches are the
same rows in the same order, handed over in arrival order, and a row leaves the spool only after its batch
committed. The spool is read by the ingester's own thread (and its own SQLite connection), as before.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor, wait
from typing import Generic, TypeVar

from dashboard.spool import Spool, SpoolRow

T = TypeVar("T")

Settle = Callable[[list[SpoolRow]], list[T]]
"""Rows in spool order → what was made of each of the leading rows ready for the database, in order (the rows
themselves stay with the reader: from a builder process, only what was made of them travels back)."""


class SpoolReadAhead(Generic[T]):
    """Batches of the spool as ``settle`` makes them, settled ahead while the one before is written.

    Use as a context manager and iterate; delete a batch's rows from the spool before taking the next batch. The
    batches end at the first one that ``settle`` cut short (a row held back) or left empty, after ``max_batches``,
    or when the spool is drained. Leaving early waits for the batches being settled and drops them: their rows stay
    in the spool (the next pass reads and settles them again).

    ``executor``: where batches are settled, each by one worker, handed over in order: by default a thread of this
    reader's own, one batch ahead; a given executor (builder processes, which need ``settle`` picklable) is kept
    ``ahead`` batches ahead.
    """

    def __init__(
        self,
        spool: Spool,
        *,
        batch_size: int,
        max_batches: int | None,
        settle: Settle[T],
        executor: Executor | None = None,
        ahead: int = 2,
    ) -> None:
        self._spool = spool
        self._batch_size = batch_size
        self._max_batches = max_batches
        self._settle = settle
        self._own_pool = executor is None
        self._pool = executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="spool-prepare")
        # A thread shares the GIL with the writing: more than one batch ahead would only hold more memory.
        self._ahead = 1 if executor is None else max(1, ahead)
        self._in_flight: deque[tuple[list[SpoolRow], Future[list[T]]]] = deque()
        self._submitted = 0

    def __enter__(self) -> SpoolReadAhead[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._own_pool:
            self._pool.shutdown(wait=True, cancel_futures=True)
        else:  # the next pass's batches are settled after these, as with a thread of its own
            wait([future for _, future in self._in_flight])
        self._in_flight.clear()

    def _read_ahead(self, after: int) -> None:
        """Submit batches of the rows past ``after`` until ``ahead`` are in flight (or the spool has no more)."""
        while len(self._in_flight) < self._ahead and (self._max_batches is None or self._submitted < self._max_batches):
            rows = self._spool.read_rows(self._batch_size, after=after)
            if not rows:
                return
            self._in_flight.append((rows, self._pool.submit(self._settle, rows)))
            self._submitted += 1
            after = rows[-1].id

    def __iter__(self) -> Iterator[list[tuple[SpoolRow, T]]]:
        self._read_ahead(0)
        while self._in_flight:
            rows, future = self._in_flight.popleft()
            made = future.result()  # raises what settling raised, after the batches before it were written
            ready = list(zip(rows, made, strict=False))  # strict=False: the leading rows only
            if not ready:
                return
            # A batch cut short ends the pass (a row held back behind an answer still being written); the batches
            # settled after it are dropped on leaving, their rows read again by the next pass.
            if len(ready) < len(rows):
                yield ready
                return
            # These rows are still the spool's first ones until written and deleted: read past what is in flight.
            self._read_ahead(self._in_flight[-1][0][-1].id if self._in_flight else ready[-1][0].id)
            yield ready
            if not self._in_flight:
                # Nothing was there to read ahead: read again now that the batch is written, as a pass without
                # read-ahead does (records appended meanwhile go now, not a polling interval later).
                self._read_ahead(0)
