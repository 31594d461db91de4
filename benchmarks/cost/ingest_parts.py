"""The ingester's CPU in process, without HTTP or the ``Explained`` Event: where the cost study's *ingest* column goes.

``python -m benchmarks.cost.ingest_parts`` spools real cycles of a 1000-node cluster (``benchmarks.record.path``'s
templates: the verbs' own records, the filter sent kube-scheduler's window of names for each pod unless
``--full-lists``), then drains them with ``spool_ingest`` in batches of ``--batch`` calls (the cost study's ingester
takes a few dozen at a time), everything on this thread (no builder process, no read-ahead thread), into a scratch
PostgreSQL database, and reads this process's CPU (``time.process_time``) per cycle and, beside it, the CPU of the
PostgreSQL backend serving its connection (``/proc/<pid>/stat``, so the database must run on this machine). ``--profile
N`` prints the N most expensive functions (cProfile, which slows what it measures: its figures are shares, not times).
For an A/B, run it in each checkout, alternately.

``--floor`` drains the same backlog the least way any ingester of this spool could: each batch's rows read, their
bytes copied into a table as they were spooled, each linked into a SHA-256 chain over its bytes, one commit, the rows
deleted; no decoding, no cycles, no counts, no ``Explained`` Event. What a design that stores and seals every record
as spooled, and does everything else at read time, would still spend.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import tempfile
import time
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ["SCHEDLENS_INGEST_IN_PROCESS"] = "false"

DATABASE = "schedlens_bench_ingest_parts"


class _OnThisThread(Executor):
    """Settles each batch where it is asked for, so that one thread's CPU (and profile) holds the whole ingest."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(fn(*args, **kwargs))
        return future


def _floor_ingest(spool: Any, batch: int) -> None:
    """Every row of ``spool`` stored as spooled and chained (``--floor``), ``batch`` rows a transaction, on Django's
    connection (the backend whose CPU is read)."""
    from django.db import connection, transaction

    from dashboard.audit.chain import GENESIS, chain_link

    link = GENESIS
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE IF NOT EXISTS floor_calls "
            "(id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, data bytea NOT NULL, chain_hash text NOT NULL)"
        )
    while rows := spool.read_rows(batch):
        with (
            transaction.atomic(),
            connection.cursor() as cursor,
            cursor.cursor.copy("COPY floor_calls (data, chain_hash) FROM STDIN") as copy,
        ):
            for row in rows:
                link = chain_link(link, row.data)
                copy.write_row((row.data, link))
        spool.delete_through(rows[-1].id)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=1000, help="cycles per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=75, help="calls per ingest batch")
    parser.add_argument("--full-lists", action="store_true", help="every filter is sent all 1000 names")
    parser.add_argument("--profile", type=int, default=0, help="profile one more round; print the N top functions")
    parser.add_argument("--sort", default="cumulative", help="the profile's order (a pstats sort key)")
    parser.add_argument("--database", default=DATABASE, help="the scratch database (dropped and created again)")
    parser.add_argument("--floor", action="store_true", help="the least any ingester does: copy, chain, commit")
    args = parser.parse_args()

    from benchmarks.common import migrate, recreate_database
    from benchmarks.record.path import backlog, templates

    url = recreate_database(args.database)
    migrate(url)
    os.environ["DATABASE_URL"] = url
    import django

    django.setup()
    from dashboard.ingest.spool_ingest import spool_ingest
    from dashboard.spool import Spool

    cycles = templates(min(args.cycles, 400), windows=not args.full_lists)
    spent: list[float] = []
    backend: list[float] = []
    from django.db import connection

    from benchmarks.cost.stack import proc_table, seconds

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend_pid = cursor.fetchone()[0]
    profiler = cProfile.Profile(time.thread_time) if args.profile else None
    for round_number in range(args.rounds + (1 if profiler else 0)):
        spool_dir = Path(tempfile.mkdtemp(prefix="schedlens-ingest-parts-"))
        backlog(cycles, args.cycles, spool_dir, first_pod=round_number * args.cycles)
        spool = Spool(spool_dir)
        profiling = profiler is not None and round_number == args.rounds
        started, backend_started = time.process_time(), seconds(proc_table(), [backend_pid])
        if profiling:
            profiler.enable()  # type: ignore[union-attr]
        if args.floor:
            _floor_ingest(spool, args.batch)
        else:
            spool_ingest(spool=spool, confirm_grace_seconds=0, builders=_OnThisThread(), batch_size=args.batch)
        if profiling:
            profiler.disable()  # type: ignore[union-attr]
        elif round_number < args.rounds:
            spent.append((time.process_time() - started) / args.cycles * 1000)
            backend.append((seconds(proc_table(), [backend_pid]) - backend_started) / args.cycles * 1000)
    lists = "all 1000 names" if args.full_lists else "kube-scheduler's windows"
    lists += "; the floor: copy, chain, commit" if args.floor else ""
    print(
        f"ingester CPU ms per cycle ({args.cycles} cycles a round, 1000 nodes, {lists}, batches of {args.batch} "
        f"calls): median {statistics.median(spent):.3f} of {args.rounds} rounds ({min(spent):.3f}-{max(spent):.3f}); "
        f"its PostgreSQL backend: median {statistics.median(backend):.3f} ({min(backend):.3f}-{max(backend):.3f})"
    )
    if profiler is not None:
        pstats.Stats(profiler).sort_stats(args.sort).print_stats(args.profile)
    recreate_database(args.database, drop_only=True)


if __name__ == "__main__":
    main()
