"""Dashboard server time at 1,000,000 recorded cycles: history (first, filtered, deep keyset page) and decision.

Creates (and afterwards drops, unless ``--keep``) a PostgreSQL database, records a few dozen real cycles through the
verbs and the ingester and bulk-loads ``--cycles`` copies of them (``benchmarks.dashboard.history``).

Server time is the Django handler's wall time for one GET through the test client (middleware, view,
queries, template rendering), measured ``--repeat`` times per page after one warm-up.

    .venv/bin/python -m benchmarks.dashboard --cycles 1000000 --out benchmarks/results-dashboard.md
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.common import machine, now, percentile, recreate_database
from benchmarks.dashboard.history import bulk_load, record_templates, setup_django, superuser_client


def measure(client: Any, url: str, repeat: int) -> list[float]:
    response = client.get(url)  # warm-up (and a check)
    assert response.status_code == 200, (url, response.status_code)
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(url)
        timings.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.dashboard", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=1_000_000)
    parser.add_argument("--nodes", type=int, default=40, help="cluster size of the recorded templates")
    parser.add_argument("--templates", type=int, default=48)
    parser.add_argument("--days", type=int, default=30, help="the history spans this many days")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--database", default="schedlens_bench")
    parser.add_argument("--keep", action="store_true", help="keep the database (re-use it with --reuse)")
    parser.add_argument("--reuse", action="store_true", help="measure an existing database without loading")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    if not args.reuse:
        recreate_database(args.database)
    setup_django(args.database)
    from django.core.management import call_command
    from django.db import connection

    from dashboard.models import SchedulingCycle
    from dashboard.selectors.cycles import Cursor

    load_seconds = None
    try:
        if not args.reuse:
            call_command("migrate", verbosity=0)
            record_templates(args.nodes, args.templates)
            print(f"recorded {args.templates} template cycles; loading {args.cycles:,} …", flush=True)
            load_seconds = bulk_load(args.cycles, span_days=args.days)
        client = superuser_client()
        total = SchedulingCycle.objects.order_by("-id").values_list("id", flat=True).first() or 0
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_size_pretty(pg_database_size(current_database()))")
            size = cursor.fetchone()[0]
        deep_row = SchedulingCycle.objects.order_by("-started_at", "-id").values_list("started_at", "id")[
            int(total * 0.9)
        ]
        deep = Cursor(deep_row[0], deep_row[1]).encode()
        sample = SchedulingCycle.objects.filter(prioritize_ms__isnull=False).order_by("-started_at", "-id")
        decision_ids = list(sample.values_list("id", flat=True)[:2000:97])
        common = SchedulingCycle.objects.order_by("-id").values_list("chosen_node", flat=True)[:500]
        node = next(n for n in common if n)
        pages: list[tuple[str, list[str]]] = [
            ("history, first page", ["/"]),
            ("history, namespace=payments", ["/?namespace=payments"]),
            ("history, outcome=unschedulable (no row matches)", ["/?outcome=unschedulable"]),
            (f"history, chosen_node={node}", [f"/?chosen_node={node}"]),
            ("history, pod name contains 'web-'", ["/?pod=web-"]),
            ("history, deep keyset page (90 % down)", [f"/?before={deep}"]),
            ("history, poll for new rows", [f"/history/new/?after={total - 3}"]),
            ("decision page", [f"/cycles/{i}/" for i in decision_ids]),
            ("decision, why not (htmx partial)", [f"/cycles/{i}/why-not/?why_not={node}" for i in decision_ids]),
            ("what-if replay", [f"/cycles/{i}/what-if/?mode=profile&profile=gpu-aware" for i in decision_ids]),
            ("nodes page (latest 200 cycles)", ["/nodes/"]),
            ("health page", ["/health/"]),
            ("audit API: cycles list, first page", ["/api/v1/cycles/"]),
            ("audit API: cycles list, namespace=payments", ["/api/v1/cycles/?namespace=payments"]),
            ("audit API: cycles list, oldest first", ["/api/v1/cycles/?ordering=started_at"]),
            ("audit API: one cycle with its calls", [f"/api/v1/cycles/{i}/" for i in decision_ids]),
            (
                f"audit API: cycles list, node_considered={node} (every cycle)",
                [f"/api/v1/cycles/?node_considered={node}"],
            ),
            (
                "audit API: cycles list, node_considered=node-none (no cycle)",
                ["/api/v1/cycles/?node_considered=node-none"],
            ),
        ]
        rows = []
        for label, urls in pages:
            timings: list[float] = []
            per_url = max(1, args.repeat // len(urls))
            for url in urls:
                timings += measure(client, url, per_url)
            rows.append(
                (
                    label,
                    statistics.median(timings),
                    percentile(timings, 95),
                    percentile(timings, 99),
                    max(timings),
                    len(timings),
                )
            )
            print(f"{label:45s} p50 {rows[-1][1]:8.1f} ms  p99 {rows[-1][3]:8.1f} ms", flush=True)
    finally:
        connection.close()
        if not args.keep and not args.reuse:
            recreate_database(args.database, drop_only=True)

    lines = [
        "# Dashboard benchmark (issue 4)",
        "",
        f"Measured {now()} on {machine()} with "
        f"`.venv/bin/python -m benchmarks.dashboard --cycles {args.cycles} --nodes {args.nodes}`: "
        f"{total:,} cycles (about {args.days} days of history, 3 verb calls each, {args.nodes}-node candidates; "
        f"database {size}) in PostgreSQL on the same machine.",
        "",
        (
            f"Bulk load (COPY of cycles and calls, indexes in place, then VACUUM (ANALYZE)): {load_seconds:.0f} s."
            if load_seconds
            else "Loaded earlier (--reuse)."
        ),
        "",
        "Server time of one GET through Django (middleware, view, queries, template), milliseconds:",
        "",
        "| page | p50 | p95 | p99 | max | n |",
        "| --- | --- | --- | --- | --- | --- |",
        *(
            f"| {label} | {p50:.1f} | {p95:.1f} | {p99:.1f} | {worst:.1f} | {n} |"
            for label, p50, p95, p99, worst, n in rows
        ),
        "",
        "Every history page is one keyset query on the `cycle_newest` index ((-started_at, -id)) with LIMIT 51 and",
        "no COUNT(*). Outcome and chosen node have their own (value, started_at, id) indexes (migration 0004), so",
        "a value no row has costs one index probe; a filter on a column without one (pod substring) walks the",
        "newest-first index until it has 51 matches. Node considered reads the node's postings (one bit per cycle,",
        "256 cycles per row): a rare node's cycles are listed from them, a common node is checked row by row as the",
        "walk meets its cycles (dashboard.filters).",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
