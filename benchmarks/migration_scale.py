"""Upgrading a stored history in place (issue 20): migrations 0008, 0009 and 0010 timed one by one over ``--cycles``
cycles stored at 0007, each then with the ``partitions_ensure`` that ``migrate``'s post_migrate hook runs (called apart
here), and that task's run on the next day. The templates are recorded by the current code at the latest migration,
then the schema goes back to 0007 over empty tables; ``bulk_load`` writes 0008's ``recorded_at`` into a scratch
column dropped after. Connections of their own sample the locks held and whether the ingester's would be granted.

    flock /tmp/bench.lock .venv/bin/python benchmarks/migration_scale.py --out benchmarks/results-migration.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from django.apps import apps  # none of these needs the settings before it is used
from django.core.management import call_command
from django.db import connection
from django.db.models.signals import post_migrate

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import dashboard as bench_dashboard
from benchmarks.common import machine, now, recreate_database, table
from benchmarks.history_scale.load import BYTES_PER_CYCLE, LoadResult, bulk_load, check_disk
from benchmarks.history_scale.measure import bench_client, measure_page, sizes_report
from benchmarks.history_scale.templates import SIZES, read_templates, record_templates
from dashboard.apps import _ensure_partitions

STEPS = ("0008_day_partitions", "0009_audit_verification_day_tallies", "0010_pod_name_trigrams", "next day")
PROBES = {  # what the ingester needs of the record: the table locks of its reads and inserts, the tally rows it upserts
    "read cycles": "LOCK TABLE dashboard_schedulingcycle IN ACCESS SHARE MODE NOWAIT",
    "read calls": "LOCK TABLE dashboard_verbcall IN ACCESS SHARE MODE NOWAIT",
    "insert cycles": "LOCK TABLE dashboard_schedulingcycle IN ROW EXCLUSIVE MODE NOWAIT",
    "insert calls": "LOCK TABLE dashboard_verbcall IN ROW EXCLUSIVE MODE NOWAIT",
    "update node tallies": "SELECT count(*) FROM (SELECT FROM dashboard_nodetally FOR UPDATE NOWAIT) t",
}
FILES = "SELECT relname, pg_relation_filenode(oid) FROM pg_class WHERE relkind = 'r' AND relname LIKE 'dashboard%'"


def sql(query: str) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(query)
        return cursor.fetchall() if cursor.description else []


def watched(label: str, url: str, work: Callable[[], object]) -> dict:
    """``work`` timed while the locks of this session are sampled, and whether the probes would get theirs."""
    (pid,) = sql("SELECT pg_backend_pid()")[0]
    blocked, locks, done = Counter[str](), dict[str, set[str]](), threading.Event()

    def watch() -> None:
        with psycopg.connect(url) as probe, psycopg.connect(url, autocommit=True) as watcher:
            last = time.perf_counter()
            while not done.wait(0.2):
                dt, last = time.perf_counter() - last, time.perf_counter()
                for probe_label, statement in PROBES.items():
                    try:
                        probe.execute(statement)
                    except psycopg.Error as exc:  # only a lock not granted counts
                        blocked[probe_label] += dt * isinstance(exc, psycopg.errors.LockNotAvailable)
                    finally:
                        probe.rollback()
                for name, mode in watcher.execute(
                    "SELECT coalesce(c.relname, '(new)'), replace(l.mode, 'Lock', '') FROM pg_locks l LEFT JOIN "
                    "pg_class c ON c.oid = l.relation WHERE l.pid = %s AND l.locktype = 'relation' AND l.granted "
                    "AND coalesce(c.relkind, 'r') IN ('r', 'p') AND coalesce(c.relname, '') NOT LIKE 'pg%%'",
                    [pid],
                ):
                    locks.setdefault(name, set()).add(mode)

    def timer(execute: Callable, statement: str, params: object, many: bool, context: dict) -> object:
        began, result = time.perf_counter(), execute(statement, params, many, context)
        spent[" ".join(statement.split())[:100]] += time.perf_counter() - began
        return result

    (thread := threading.Thread(target=watch, daemon=True)).start()
    began, spent = time.perf_counter(), Counter[str]()
    with connection.execute_wrapper(timer):
        result = work()
    seconds = time.perf_counter() - began
    done.set()
    thread.join()
    print(f"{label}: {seconds:.1f} s, {result or ''} blocked {dict(blocked)}, locks {locks}", flush=True)
    return {"label": label, "seconds": seconds, "result": result, "blocked": blocked, "locks": locks, "spent": spent}


def step(target: str, url: str) -> list[dict]:
    from dashboard.services.partitions import partitions_ensure

    before, phases = dict(sql(FILES)), []
    if target != "next day":
        phases.append(watched(target, url, lambda: call_command("migrate", "dashboard", target, verbosity=0)))
    day = datetime.now(tz=UTC).date() + timedelta(days=target == "next day")
    phases.append(watched(f"{target}: partitions_ensure", url, lambda: partitions_ensure(today=day)))
    after = {node for _, node in sql(FILES)}
    phases[0]["rewrote"] = [name for name, node in before.items() if node not in after]  # a new heap file
    return phases


def sanity() -> dict:
    from dashboard.audit.chain import GENESIS, ChainWalk, chain_walk

    client = bench_client()
    page, history = (statistics.median(measure_page(client, [url], 5, 30)) for url in ("/api/v1/cycles/", "/"))
    walk, began = ChainWalk(previous=GENESIS), time.perf_counter()
    chain_walk(walk, after_id=0, before_id=100_001)
    return {"api": page, "history": history, "walk": walk, "walk_seconds": time.perf_counter() - began}


def report(args: argparse.Namespace, load: LoadResult, steps: list[list[dict]], sizes: list, check: dict) -> str:
    scale, walk = 10_000_000 / load.cycles, check["walk"]
    command = f"flock /tmp/bench.lock .venv/bin/python benchmarks/migration_scale.py --cycles {args.cycles}"
    head = ["step", "migrate s", "partitions_ensure s", "cycles/s", f"× {scale:g}: 10 M (linear)", "rewrote", "created"]
    times, locks, slow = [], [], []
    for phases in steps:
        total, created = sum(p["seconds"] for p in phases), ", ".join(phases[-1]["result"])
        migrate = f"{phases[0]['seconds']:.1f}" if len(phases) == 2 else ""
        times.append([phases[0]["label"], migrate, f"{phases[-1]['seconds']:.1f}", f"{load.cycles / total:,.0f}"])
        times[-1] += [f"{total * scale / 60:.1f} min", ", ".join(phases[0]["rewrote"]) or "none", created]
        for p in phases:
            held = "; ".join(f"{k}: {', '.join(sorted(v))}" for k, v in sorted(p["locks"].items()))
            locks.append([p["label"], f"{p['seconds']:.1f}", *(f"{p['blocked'][n]:.1f}" for n in PROBES), held])
            slow += [[p["label"], f"`{q}`", f"{t:.1f}"] for q, t in p["spent"].most_common(5) if t >= 0.05 * total]
    size_rows = [
        [name, f"{rows:,}", f"{t / 1e6:,.0f} + {i / 1e6:,.0f}", leaves, f"{t2 / 1e6:,.0f} + {i2 / 1e6:,.0f}"]
        for (name, _, rows, t, i), (_, leaves, _, t2, i2) in zip(sizes[0][0], sizes[1][0], strict=True)
    ]
    text = [
        "# Migrating a stored history in place (issue 20)\n",
        f"Measured {now()} on {machine()}, PostgreSQL 15 on the same machine (settings as installed), with `{command} "
        f"--out benchmarks/results-migration.md`: {load.cycles:,} cycles, {load.calls:,} calls, {load.postings:,} "
        f"node posting rows over 30 days, bulk-loaded at migration 0007 in {load.seconds:.0f} s. Each step timed "
        "alone: `migrate dashboard <step>`, then the `partitions_ensure()` that migrate runs after it; the last row "
        "is that task's run on the next day (one more day partition each).\n",
        *table(head, times),
        "\nSeconds of each phase during which a reader or a writer of the record could not get its lock (probed "
        "every 0.2 s, NOWAIT), and the locks the migrating session was seen holding on the tables:\n",
        *table(["phase", "s", *PROBES, "locks held"], locks),
        "\nWhere the time went: the statements of each phase that took 5 % of its step or more (text cut at 100):\n",
        *table(["phase", "statement", "s"], slow),
        "\nSizes (`pg_partition_tree` leaves; rows: ANALYZE estimates) before the first step and after the last:\n",
        *table(["table", "rows", "MB before (table + index)", "partitions after", "MB after (same)"], size_rows),
        f"\nDatabase: {sizes[0][1] / 1e9:.2f} GB before, {sizes[1][1] / 1e9:.2f} GB after.\n",
        f"Serving afterwards (median of 5 after a warm-up): `GET /api/v1/cycles/` {check['api']:.0f} ms, history first "
        f"page {check['history']:.0f} ms; `chain_walk` over the first {walk.checked:,} calls in "
        f"{check['walk_seconds']:.1f} s: {'chain valid' if walk.broken_id is None else '**broken**'}.\n",
    ]
    return "\n".join(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=2_000_000)
    parser.add_argument("--templates", type=int, default=48, help="template cycles recorded per cluster size")
    parser.add_argument("--database", default="schedlens_h20c_migrate")
    parser.add_argument("--keep", action="store_true", help="keep the database")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if not args.database.startswith("schedlens_h20c_"):  # never the 10 M database of history_scale
        raise SystemExit("--database: the name starts with schedlens_h20c_")
    print(check_disk(args.cycles, BYTES_PER_CYCLE), flush=True)
    url = recreate_database(args.database)
    bench_dashboard.setup_django(args.database)
    try:
        call_command("migrate", verbosity=0)
        for seed, size in enumerate(SIZES, start=11):  # by the current code, which writes 0008's columns
            record_templates(size, args.templates, seed)
        templates, cycle_columns, call_columns, counts = read_templates()
        for index, template in enumerate(templates):
            template.size = SIZES[index // args.templates]
        # The copies start the record (and the chain) afresh; the shared parts stay, the bodies refer to them.
        sql(
            "TRUNCATE dashboard_schedulingcycle, dashboard_verbcall, dashboard_nodeposting, dashboard_nodetally, "
            "dashboard_nodereasontally, dashboard_nodedaytally, dashboard_nodedayreasontally"
        )
        call_command("migrate", "dashboard", "0007", verbosity=0)  # back over empty tables
        sql("ALTER TABLE dashboard_verbcall ADD COLUMN recorded_at timestamptz")  # bulk_load writes it
        end = datetime.now(tz=UTC).replace(microsecond=0)
        days = {"total": args.cycles, "first_day": end.date() - timedelta(days=29), "end": end, "url": url}
        load = bulk_load(templates, cycle_columns, call_columns, counts, **days)
        sql("ALTER TABLE dashboard_verbcall DROP COLUMN recorded_at")  # 0008 adds its own
        post_migrate.disconnect(_ensure_partitions, sender=apps.get_app_config("dashboard"))
        sizes = [sizes_report()]
        steps = [step(target, url) for target in STEPS]
        text = report(args, load, steps, [*sizes, sizes_report()], sanity())
    finally:
        connection.close()
        if not args.keep:
            recreate_database(args.database, drop_only=True)
    print(text) if args.out is None else args.out.write_text(text)


if __name__ == "__main__":
    main()
