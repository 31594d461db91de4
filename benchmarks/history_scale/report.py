"""The Markdown report of a run: the load, pages and endpoints, the export, retention and verification, sizes."""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from benchmarks.common import machine, now, percentile, table
from benchmarks.history_scale.load import LoadResult
from benchmarks.history_scale.templates import SIZES, candidates_scored


def write(args: argparse.Namespace, load: LoadResult | None, results: dict[str, Any]) -> None:
    """The report so far: a run cut short still leaves what it measured."""
    if args.out:
        args.out.write_text(report(args, load, results))


def _ms(value: float) -> str:
    return f"{value:.1f}"


def report(args: argparse.Namespace, load: LoadResult | None, results: dict[str, Any]) -> str:
    command = f"flock /tmp/bench.lock .venv/bin/python -m benchmarks.history_scale --cycles {args.cycles}"
    if args.days != 30:
        command += f" --days {args.days}"
    command += " --out benchmarks/results-scale.md"
    sizes, database = results["sizes"]
    cycles = next(rows for name, _, rows, _, _ in sizes if name == "dashboard_schedulingcycle")
    lines = [
        "# History at scale (issue 20)",
        "",
        f"Measured {now()} on {machine()}, PostgreSQL 15 on the same machine, with `{command}`"
        + (f" (scale reached: {args.cycles:,} cycles)." if args.cycles != 10_000_000 else "."),
        "",
        f"Disk check before loading: {results['disk']}.",
        "",
    ]
    if load is not None:
        lines += [
            "## Load",
            "",
            "Loaded by this run."
            if not args.reuse
            else "Loaded by the same command before this measurement (`--reuse`).",
            "",
            "",
            *table(
                ["what", "value"],
                [
                    ["cycles", f"{load.cycles:,}"],
                    ["verb calls (chain valid, linked in id order)", f"{load.calls:,}"],
                    ["node posting rows", f"{load.postings:,}"],
                    ["span", f"{load.first_day} 00:00 to {load.end:%Y-%m-%d %H:%M} UTC ({args.days} day partitions)"],
                    [
                        "cluster sizes (cycles)",
                        ", ".join(
                            f"{size} nodes, {candidates_scored(size)} candidates: {load.sizes[size]:,}"
                            for size in SIZES
                        ),
                    ],
                    ["outcomes", ", ".join(f"{k}: {v:,}" for k, v in load.outcomes.most_common())],
                    [
                        "template cycles recorded through the verbs and the ingester",
                        f"{args.templates * len(SIZES)} in {results['templates_seconds']:.0f} s",
                    ],
                    ["load time (COPY, chain, postings, tallies, then VACUUM ANALYZE)", f"{load.seconds:.0f} s"],
                    ["load rate", f"{load.cycles / load.seconds:,.0f} cycles/s"],
                ],
            ),
            "",
        ]
    lines += [
        "## Pages and endpoints",
        "",
        f"Server time of one GET through Django (middleware, view, queries, template or serializer), milliseconds, "
        f"{args.repeat} requests per row spread over its variants (after one warm-up each; a row whose requests "
        f"took over {args.page_budget:.0f} s in all stopped early, its n says where). Target: p99 ≤ 100 ms.",
        "",
        *table(
            ["page", "variants", "p50", "p95", "p99", "max", "n", "p99 ≤ 100 ms"],
            [
                [
                    label,
                    variants,
                    _ms(statistics.median(t)),
                    _ms(percentile(t, 95)),
                    _ms(percentile(t, 99)),
                    _ms(max(t)),
                    len(t),
                    "yes" if percentile(t, 99) <= 100 else "**no**",
                ]
                for label, t, variants in results.get("pages", [])
            ],
        ),
        "",
        "## NDJSON export",
        "",
        "`/api/v1/cycles/export.ndjson?started_after=…&started_before=…` read to the end through the test client. "
        "Target: ≥ 20,000 cycles/s in constant memory. RSS is the process's (sampled every 1,000 lines); the traced "
        "peak is tracemalloc's over the request (those runs are slower by the tracing).",
        "",
        *table(
            ["window", "cycles", "MB", "s", "cycles/s", "RSS before MB", "RSS peak MB", "traced peak MB"],
            [
                [
                    f"{r['hours']} h"
                    + (", include=calls" if r["calls"] else "")
                    + (" (traced)" if r["traced_peak"] else ""),
                    f"{r['cycles']:,}",
                    f"{r['bytes'] / 1e6:.1f}",
                    f"{r['seconds']:.2f}",
                    f"{r['rate']:,.0f}",
                    f"{r['rss_before']:.0f}",
                    f"{r['rss_peak']:.0f}",
                    f"{r['traced_peak']:.1f}" if r["traced_peak"] is not None else "",
                ]
                for r in results.get("exports", [])
            ],
        ),
        "",
    ]
    retention = results.get("retention")
    if retention:
        lines += [
            "## Retention and verification",
            "",
            *table(
                ["what", "value"],
                [
                    [
                        f"`cycles_prune(older_than=<end of {retention['day']}>)` in all: verify that day's calls, "
                        "then under the chain lock checkpoint and drop its partitions",
                        f"{retention['drop_seconds']:.1f} s",
                    ],
                    ["of which verifying, before the chain lock", f"{retention['verified_seconds']:.1f} s"],
                    ["of which holding the chain lock (ingest waits)", f"{retention['locked_seconds']:.1f} s"],
                    ["cycles and calls dropped", f"{retention['cycles_deleted']:,} and {retention['calls_deleted']:,}"],
                    ["partitions dropped", ", ".join(retention["partitions"]) or "none"],
                    ["held back", retention["held_back"] or "nothing"],
                    [
                        f"verify one day ({retention['verify_day']}) from the checkpoint: `chain_walk` over its ids",
                        f"{retention['verify_seconds']:.1f} s, {retention['verify_calls']:,} calls, "
                        + ("chain valid" if retention["verify_ok"] else "**broken**"),
                    ],
                    [
                        "verify rate",
                        f"{retention['verify_calls'] / retention['verify_seconds']:,.0f} calls/s",
                    ],
                ],
            ),
            "",
        ]
    lines += [
        "## Sizes",
        "",
        "Measured after the load and before retention (`pg_partition_tree`: the sum of the leaf partitions; rows as "
        "estimated by ANALYZE).",
        "",
        *table(
            ["table", "partitions", "rows", "table MB", "index MB", "bytes per cycle"],
            [
                [
                    name,
                    leaves,
                    f"{rows:,}",
                    f"{table_bytes / 1e6:,.0f}",
                    f"{index_bytes / 1e6:,.0f}",
                    f"{(table_bytes + index_bytes) / max(1, cycles):,.0f}",
                ]
                for name, leaves, rows, table_bytes, index_bytes in sizes
            ],
        ),
        "",
        f"Database: {database / 1e9:.2f} GB, {database / max(1, cycles):,.0f} bytes per cycle.",
        "",
    ]
    return "\n".join(lines)
