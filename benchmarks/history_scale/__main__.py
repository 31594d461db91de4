"""History at scale (issue 20): ten million cycles over a month, day-partitioned, every page's p50/p99, the NDJSON
export, retention of one day and verification of one day of the audit chain, table sizes.

Checks free disk space first, then creates (and afterwards drops, unless ``--keep``) its own PostgreSQL database,
migrates it, and records real template cycles through the verbs and the ingester at three cluster sizes (100, 300
and 1000 nodes, each with the candidates kube-scheduler's adaptive ``percentageOfNodesToScore`` hands an extender):
mostly bound, some unschedulable (every candidate filtered out), a few errors (a bind to a node gone from the
cluster). The templates are read back, their rows removed, the day partitions covering the span created, and
``--cycles`` copies bulk-loaded by ``COPY`` in id order over ``--days`` days, each a template with a new id, pod, UID
and time (``benchmarks/dashboard``'s approach). Unlike that benchmark the audit chain is valid: each call's
``chain_hash`` is linked in id order from the genesis, with the content ``dashboard.audit.chain`` hashes,
and each call's ``recorded_at`` is its cycle's end plus an ingest lag, growing with the id. The node postings (a bit
per cycle), the shared parts the bodies refer to and the per-node tallies are loaded too, the tallies computed from
the templates times their copies. The cluster size changes every posting block (256 cycles), so every page sees the
sizes mixed while each block's postings are those of one cluster.

Server time is the Django handler's wall time for one GET through the test client, as in
``benchmarks/dashboard``, over ``--repeat`` requests per page spread over varied parameters.

    flock /tmp/bench.lock .venv/bin/python -m benchmarks.history_scale --out benchmarks/results-scale.md
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.common import database_url, recreate_database
from benchmarks.dashboard import history as bench_dashboard
from benchmarks.history_scale.load import BYTES_PER_CYCLE, LoadResult, bulk_load, check_disk, read_load, save_load
from benchmarks.history_scale.measure import measure_exports, measure_pages, measure_retention, sizes_report
from benchmarks.history_scale.report import report, write
from benchmarks.history_scale.templates import SIZES, read_templates, record_templates


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.history_scale",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--cycles", type=int, default=10_000_000)
    parser.add_argument("--days", type=int, default=30, help="the history spans this many days, ending now")
    parser.add_argument("--templates", type=int, default=48, help="template cycles recorded per cluster size")
    parser.add_argument("--repeat", type=int, default=200, help="requests per page (p99 over them)")
    parser.add_argument(
        "--page-budget", type=float, default=60.0, help="seconds of requests per page before it stops early"
    )
    parser.add_argument("--bytes-per-cycle", type=int, default=BYTES_PER_CYCLE, help="disk estimate per cycle")
    parser.add_argument("--database", default="schedlens_h20c")
    parser.add_argument("--keep", action="store_true", help="keep the database (measure it again with --reuse)")
    parser.add_argument("--reuse", action="store_true", help="measure an existing database without loading")
    parser.add_argument("--no-retention", action="store_true", help="skip the retention step (keeps all days)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if not args.database.startswith("schedlens_h20c"):
        raise SystemExit("--database: the name starts with schedlens_h20c")

    disk = check_disk(args.cycles, args.bytes_per_cycle) if not args.reuse else ""
    print(disk, flush=True)
    if not args.reuse:
        recreate_database(args.database)
    url = database_url(args.database)
    bench_dashboard.setup_django(args.database)
    from django.core.management import call_command
    from django.db import connection

    from dashboard.services.partitions import partitions_ensure

    load: LoadResult | None = None
    results: dict[str, Any] = {"disk": disk}
    try:
        if not args.reuse:
            call_command("migrate", verbosity=0)
            began = time.perf_counter()
            for seed, size in enumerate(SIZES, start=11):
                record_templates(size, args.templates, seed)
            templates, cycle_columns, call_columns, counts = read_templates()
            for index, template in enumerate(templates):
                template.size = SIZES[index // args.templates]
            results["templates_seconds"] = time.perf_counter() - began
            print(
                f"recorded {len(templates)} templates in {results['templates_seconds']:.0f} s: "
                f"{Counter((t.size, t.outcome) for t in templates)}",
                flush=True,
            )
            with connection.cursor() as cursor:
                # The copies start the record (and the chain) afresh; the shared parts stay, the bodies refer to them.
                cursor.execute(
                    "TRUNCATE dashboard_schedulingcycle, dashboard_verbcall, dashboard_nodeposting, "
                    "dashboard_nodetally, dashboard_nodereasontally"
                )
            end = datetime.now(tz=UTC).replace(microsecond=0)
            first_day = end.date() - timedelta(days=args.days - 1)
            partitions_ensure(today=first_day, days_ahead=args.days)
            print(f"loading {args.cycles:,} cycles from {first_day} to {end:%Y-%m-%d %H:%M} …", flush=True)
            load = bulk_load(
                templates,
                cycle_columns,
                call_columns,
                counts,
                total=args.cycles,
                first_day=first_day,
                end=end,
                url=url,
            )
            print(f"loaded in {load.seconds:.0f} s", flush=True)
            save_load(load, results["templates_seconds"])
        else:
            load, results["templates_seconds"] = read_load()
        results["sizes"] = sizes_report()
        write(args, load, results)
        results["pages"] = measure_pages(args.repeat, args.page_budget)
        write(args, load, results)
        results["exports"] = measure_exports()
        write(args, load, results)
        if not args.no_retention:
            results["retention"] = measure_retention()
    finally:
        connection.close()
        if not args.keep and not args.reuse:
            recreate_database(args.database, drop_only=True)
    text = report(args, load, results)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
