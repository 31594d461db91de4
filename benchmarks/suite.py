"""``make bench``: the whole benchmark suite, written to ``benchmarks/results.md`` (machine, date, commands).

    .venv/bin/python benchmarks/suite.py --quick   # fewer pods, 1-minute sustained runs, 100k cycles
    .venv/bin/python benchmarks/suite.py --full    # the issue's figures: 10-minute sustained runs, 1,000,000 cycles

Runs the studies (``benchmarks/<study>/``) and checks each against its own ``targets`` module: ``load``
(kube-scheduler-like client, floors, sustained), ``record`` (in a subprocess), ``dashboard`` (history, decision and
audit API at N cycles, in a subprocess), ``verbs`` (in process), ``cost`` (CPU per scheduled pod of every schedlens
process; its own full run writes ``results-cost.md``). ``prefetch`` (needs Prometheus) and the other studies run on
their own and write their own results files.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from benchmarks.common import PY, REPO, machine, ms, now, p50, percentile, phase, run_child, table
from benchmarks.cost import targets as cost_targets
from benchmarks.load import targets as load_targets
from benchmarks.load.client import BIND_THREADS
from benchmarks.load.measure import LatencyResult, latency, sustained
from benchmarks.record import path as record_path
from benchmarks.record import targets as record_targets


def verdict(value: float, target: float) -> str:
    return "met" if value <= target else f"missed ({value / target:.1f}×)"


def latency_section(results: list[LatencyResult], command: str) -> tuple[list[str], list[list[object]]]:
    rows, floor_rows, summary = [], [], []
    for r in results:
        target = load_targets.LATENCY_MS[(r.nodes, r.mode)]
        for verb, samples in (("filter", r.run.filter_ms), ("prioritize", r.run.prioritize_ms)):
            if not samples:
                continue
            own = r.verb_ms.get(verb, [])
            rows.append(
                [
                    r.nodes,
                    "NodeNames" if r.mode == "names" else "Nodes",
                    verb,
                    ms(p50(samples)),
                    ms(percentile(samples, 99)),
                    ms(max(samples)),
                    len(samples),
                    f"{ms(p50(own))} / {ms(percentile(own, 99))}" if own else "",
                    f"{target[0]} / {target[1]}",
                ]
            )
            summary.append(
                [
                    f"{verb}, {r.nodes} nodes, {'NodeNames' if r.mode == 'names' else 'full Nodes'}, p50 / p99",
                    f"{target[0]} / {target[1]} ms",
                    f"{ms(p50(samples))} / {ms(percentile(samples, 99))} ms",
                    "p50 " + verdict(p50(samples), target[0]) + ", p99 " + verdict(percentile(samples, 99), target[1]),
                ]
            )
        decode = r.decode_ms["msgspec"]
        server_floor = r.floor_wsgi_ms or r.floor_view_ms  # the verbs are answered before Django
        floor = p50(server_floor) + p50(decode)
        floor_rows.append(
            [
                r.nodes,
                "NodeNames" if r.mode == "names" else "Nodes",
                f"{r.body_bytes / 1024:.0f} KB",
                ms(p50(decode)),
                ms(p50(r.decode_ms["orjson"])) if "orjson" in r.decode_ms else "",
                f"{ms(p50(r.floor_view_ms))} / {ms(percentile(r.floor_view_ms, 99))}",
                f"{ms(p50(r.floor_wsgi_ms))} / {ms(percentile(r.floor_wsgi_ms, 99))}" if r.floor_wsgi_ms else "",
                ms(floor),
                f"{p50(r.run.filter_ms) / floor:.2f}×",
            ]
        )
    lines = [
        "## Verb latency over HTTP (kube-scheduler-like client, recording on)",
        "",
        f"`{command}`. gunicorn as deployed (`config/gunicorn_conf.py`, 2 workers × 8 threads), "
        "`deploy/profiles.demo.yaml` (2 filters, 3 score plugins), the simulator's cluster and pods, every call "
        "spooled (ingest off during this table). One keep-alive connection for filter → prioritize per pod, binds "
        "posted from a child process on a pool of 4 connections (off the loop, like kube-scheduler's bind "
        "goroutines). *Round trip*: request sent → last byte of the answer read, on loopback (an upper bound of "
        "the server's time; in full-Nodes mode it includes sending the nodes and receiving the echo). *In verb*: "
        "the verb's own time from its spooled record (decode → answer encoded). Milliseconds.",
        "",
        *table(
            [
                "nodes",
                "mode",
                "verb",
                "round trip p50",
                "p99",
                "max",
                "n",
                "in verb p50 / p99",
                "target p50 / p99",
            ],
            rows,
        ),
        "",
        "### Floors (same run, same bodies)",
        "",
        "*msgspec* / *orjson*: decoding the filter body into Python objects, nothing else. *Empty view*: the same "
        "body POSTed to an empty Django view behind the production middleware and gunicorn configuration "
        "(`benchmarks/load/floor_urls.py`, served only by the benchmark). *Empty WSGI app*: the same body to a WSGI "
        "callable answering before Django under the same gunicorn, as the verbs are answered "
        "(`benchmarks/load/floor_wsgi.py`). *Decode floor* = empty WSGI app + msgspec decode (p50); the last column is "
        f"the filter's round trip p50 over it (target for full Nodes: ≤ {load_targets.FILTER_OVER_FLOOR}×).",
        "",
        *table(
            [
                "nodes",
                "mode",
                "filter body",
                "msgspec p50",
                "orjson p50",
                "empty view p50 / p99",
                "empty WSGI app p50 / p99",
                "decode floor",
                "filter / floor",
            ],
            floor_rows,
        ),
        "",
    ]
    return lines, summary


def _sustained(nodes: int, target: int, seconds: int, flag: str, workdir: Path) -> tuple[list[str], list[Any], float]:
    result = sustained(nodes, seconds, workdir)
    run = result.run
    rate = run.pods / run.seconds
    lost = run.requests - result.calls_stored
    section = [
        f"## Sustained: {nodes} nodes, NodeNames, ingest on",
        "",
        f"`make bench BENCH={flag}` ({seconds / 60:.0f} min). One kube-scheduler-like client as above against "
        "the deployed layout: gunicorn answering and spooling, a separate `manage.py ingest_spool --follow` "
        "moving records to PostgreSQL (same machine, 2 cores shared by client, server, ingester and "
        "PostgreSQL). The client is serial like kube-scheduler's scheduling loop, so pods/s is bounded by "
        "1 / (filter + prioritize round trip + the client's own work per pod). Afterwards the spool is waited "
        "on until empty and every call counted in the database.",
        "",
        *table(
            ["pods", "seconds", "pods/s", "requests", "errors", "calls stored", "lost", "cycles", "drain after"],
            [
                [
                    run.pods,
                    f"{run.seconds:.0f}",
                    f"{rate:.0f}",
                    run.requests,
                    run.errors,
                    result.calls_stored,
                    max(0, lost),
                    result.cycles_stored,
                    f"{result.drain_seconds:.0f} s",
                ]
            ],
        ),
        "",
        *(["First error: `" + run.first_error[:200] + "`", ""] if run.first_error else []),
        "Round trip during the run (ms): "
        f"filter p50 {ms(p50(run.filter_ms))} p99 {ms(percentile(run.filter_ms, 99))}, prioritize p50 "
        f"{ms(p50(run.prioritize_ms))} p99 {ms(percentile(run.prioritize_ms, 99))}, bind p50 "
        f"{ms(p50(run.bind_ms))}; {run.connections} connections.",
        "",
    ]
    met = rate >= target and not run.errors and lost <= 0
    row = [
        f"sustained pods/s, {nodes} nodes, NodeNames ({seconds / 60:.0f} min)",
        f"≥ {target}, zero errors, zero lost",
        f"{rate:.0f} pods/s, {run.errors} errors, {max(0, lost)} lost",
        "met"
        if met
        else f"missed ({rate / target:.2f}× of the rate)"
        + ("" if not run.errors else f", {run.errors} errors")
        + ("" if lost <= 0 else f", {lost} lost"),
    ]
    return section, row, rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="the default")
    mode.add_argument("--full", action="store_true")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results.md")
    parser.add_argument(
        "--skip", nargs="*", default=[], choices=["latency", "sustained", "record", "dashboard", "verbs", "cost"]
    )
    args = parser.parse_args()
    full = args.full
    flag = "--full" if full else "--quick"
    workdir = Path(tempfile.mkdtemp(prefix="schedlens-suite-"))
    started = time.perf_counter()
    sections: list[str] = []
    summary: list[list[object]] = []

    if "latency" not in args.skip:
        names_pods = {100: 500, 1000: 500, 5000: 100} if full else {100: 200, 1000: 200, 5000: 40}
        nodes_pods = {100: 100, 1000: 30, 5000: 6} if full else {100: 40, 1000: 12, 5000: 3}
        pods = {**{(n, "names"): c for n, c in names_pods.items()}, **{(n, "nodes"): c for n, c in nodes_pods.items()}}
        with phase("latency"):
            results = latency([100, 1000, 5000], pods, workdir)
        lines, rows = latency_section(results, f"make bench BENCH={flag}")
        sections += lines
        summary += rows
        requests = sum(r.run.requests for r in results)
        connections = sum(r.run.connections for r in results)
        reconnections = sum(r.run.reconnections for r in results)
        summary.append(
            [
                "new connections per 1000 requests",
                "≈ 0",
                f"{reconnections / requests * 1000:.2f} ({connections} connections for {requests} requests over "
                f"{len(results)} runs: each run's filter/prioritize connection and ≤ {BIND_THREADS} bind "
                f"connections, {reconnections} reopened)",
                "met" if reconnections == 0 else "missed",
            ]
        )

    sustained_rate = 200.0
    if "sustained" not in args.skip:
        seconds = 600 if full else 60
        for nodes, target in load_targets.SUSTAINED_PODS_PER_SECOND.items():
            with phase(f"sustained ({nodes} nodes)"):
                section, row, rate = _sustained(nodes, target, seconds, flag, workdir)
            sections += section
            summary.append(row)
            if nodes == 1000:
                sustained_rate = rate

    if "record" not in args.skip:
        cycles = 10000 if full else 2000
        with phase("record"):
            result_r = record_path.in_subprocess(cycles, workdir)
        timings = result_r.append_ms
        append = [percentile(timings, 50), percentile(timings, 99), max(timings)]
        ingest_rate = result_r.cycles / result_r.ingest_seconds
        outage = record_targets.OUTAGE_MINUTES * 60 * sustained_rate
        drain = outage / ingest_rate
        stored = result_r.stored
        sections += [
            "## Record path at 1000 nodes",
            "",
            f"`{PY} -m benchmarks.record --cycles {cycles}` (run by `make bench BENCH={flag}`): "
            f"{result_r.cycles} cycles (filter, prioritize, bind) each made by the verbs over a 1000-node "
            "cluster (one snapshot, herd estimate on), each its own pod.",
            "",
            *table(
                ["measure", "value"],
                [
                    [
                        "spool record sizes (filter / prioritize / bind)",
                        " / ".join(f"{b / 1024:.0f} KB" for b in result_r.record_bytes.values()),
                    ],
                    ["spool append p50 / p99 / max", f"{append[0]:.3f} / {append[1]:.3f} / {append[2]:.2f} ms"],
                    [
                        "ingest (spool → PostgreSQL, as `ingest_spool --follow`: "
                        f"{os.environ.get('SCHEDLENS_INGEST_PREPARERS', '2')} preparing processes and the writer)",
                        f"{ingest_rate:.0f} cycles/s ({result_r.ingest_seconds:.1f} s)",
                    ],
                    [
                        f"drain of a {record_targets.OUTAGE_MINUTES}-minute outage at {sustained_rate:.0f} pods/s "
                        f"({outage:,.0f} cycles)",
                        f"{drain:.0f} s projected from the ingest rate (nothing else running)",
                    ],
                ],
            ),
            "",
            "Bytes stored per 1000-node cycle (`pg_column_size`, per cycle):",
            "",
            *table(["part", "stored"], [[label, f"{value / 1024:.1f} KB"] for label, value in stored.items()]),
            "",
        ]
        summary += [
            [
                "record append p99",
                f"≤ {record_targets.APPEND_P99_MS} ms",
                f"{append[1]:.3f} ms",
                verdict(append[1], record_targets.APPEND_P99_MS),
            ],
            [
                "bytes stored per 1000-node cycle",
                f"≤ {record_targets.STORED_KB_PER_CYCLE} KB",
                f"{stored['stored per cycle (columns)'] / 1024:.1f} KB",
                verdict(stored["stored per cycle (columns)"] / 1024, record_targets.STORED_KB_PER_CYCLE),
            ],
            [
                "ingest rate",
                f"≥ {record_targets.INGEST_CYCLES_PER_SECOND} cycles/s",
                f"{ingest_rate:.0f} cycles/s",
                "met"
                if ingest_rate >= record_targets.INGEST_CYCLES_PER_SECOND
                else f"missed ({record_targets.INGEST_CYCLES_PER_SECOND / ingest_rate:.1f}× short)",
            ],
            [
                f"drain of a {record_targets.OUTAGE_MINUTES}-minute outage backlog",
                f"≤ {record_targets.DRAIN_MINUTES} min",
                f"{drain / 60:.1f} min",
                verdict(drain / 60, record_targets.DRAIN_MINUTES),
            ],
        ]

    if "dashboard" not in args.skip:
        cycles = 1_000_000 if full else 100_000
        out = workdir / "dashboard.md"
        command = [
            PY,
            "-m",
            "benchmarks.dashboard",
            "--cycles",
            str(cycles),
            "--repeat",
            "30" if full else "20",
            "--out",
            str(out),
        ]
        with phase("dashboard"):
            run_child(command, cwd=REPO)
        text = out.read_text()
        if full:
            (REPO / "benchmarks" / "results-dashboard.md").write_text(text)
        body = text.split("\n", 2)[2]
        sections += [
            f"## Dashboard and audit API at {cycles:,} cycles",
            "",
            f"`{' '.join(command[:7])}` (run by `make bench BENCH={flag}`).",
            body,
            "Projection to 10,000,000 cycles: every page above is a keyset read on an index ((-started_at, -id), "
            "pod UID, outcome, chosen node, the node tallies and postings) with LIMIT 51, so its cost grows with the "
            "index depth (one more B-tree level at most), not with the row count; the exception is the pod-name "
            "substring filter, which walks the newest-first index until 51 rows match: a substring no pod has "
            "walks all of it, 10× the time at 10× the cycles.",
            "",
        ]

    if "verbs" not in args.skip:
        from benchmarks.verbs import measure as verbs
        from benchmarks.verbs import record_encode

        pods = 400 if full else 100
        with phase("verbs"):
            measured = [(n, verbs.in_process(n, 200 if full else 60)) for n in (100, 1000)]
            encode_rows = [row for count in (100, 1000, 5000) for row in record_encode.measure(count, pods)]
        rows = [
            [count, mode_name, verb, recording, ms(p50(samples)), ms(percentile(samples, 99)), len(samples)]
            for count, runs in measured
            for mode_name, verb, recording, samples in runs
        ]
        sections += [
            "## In process (no HTTP): the verb alone, and with its record encoded and spooled",
            "",
            f"`{PY} -m benchmarks.verbs`'s in-process measurement (run by `make bench BENCH={flag}`). Milliseconds.",
            "",
            *table(["nodes", "mode", "verb", "recording", "p50", "p99", "n"], rows),
            "",
            "What recording adds to a verb, part by part (NodeNames; each pod new, so parts repeat as they do between "
            f"kube-scheduler's calls): `{PY} -m benchmarks.verbs.record_encode --pods {pods}`. Milliseconds.",
            "",
            *table(record_encode.COLUMNS, encode_rows),
            "",
        ]

    if "cost" not in args.skip:
        with phase("cost"):
            lines, rows = cost_section(full, flag, workdir)
        sections += lines
        summary += rows

    header = [
        "# schedlens benchmarks",
        "",
        f"Measured {now()} on {machine()}, PostgreSQL on the same machine, with `make bench BENCH={flag}` "
        f"(`{PY} benchmarks/suite.py {flag}`, {time.perf_counter() - started:.0f} s). "
        "Targets: each study's `targets` module (server side, loopback, 2 cores, recording on).",
        "",
        "## Targets",
        "",
        *table(["measure", "target", "now", ""], summary),
        "",
    ]
    args.out.write_text("\n".join(header + sections))
    print("\n".join(header + sections))


def cost_section(full: bool, flag: str, workdir: Path) -> tuple[list[str], list[list[object]]]:
    """``benchmarks.cost`` at 100, 1000 and 5000 nodes, as deployed beside the no-op extender, and its targets."""
    from benchmarks.cost import per_pod as cost_per_pod
    from benchmarks.cost import report as cost_report

    pods, concurrent = (1000, 500) if full else (300, 200)
    variants = [("extender=noop", REPO, {"extender": "noop"}), ("as configured", REPO, {})]
    results = [
        cost_per_pod.run_size(
            nodes,
            variants,
            pods=pods,
            rounds=2,
            concurrent_pods=concurrent,
            bind_threads=BIND_THREADS,
            workdir=workdir / "cost",
            floor_requests=pods,
        )
        for nodes in (100, 1000, 5000)
    ]
    command = (
        f"{PY} -m benchmarks.cost --pods {pods} --rounds 2 --concurrent-pods {concurrent} --floor-requests {pods} "
        "--variant extender=noop --variant ''"
    )
    lines = [
        "## Cost per scheduled pod (kube-scheduler's calls, every schedlens process)",
        "",
        f"`{command}` (run by `make bench BENCH={flag}`; the standalone run with its A/B is "
        "[results-cost.md](results-cost.md)).",
        "",
        *cost_report.markdown(results, command, 0.0, BIND_THREADS),
    ]
    at_1000 = next(r for r in results if r.nodes == 1000)
    schedlens = next(p for p in at_1000.phases if p.label == "as configured")
    figures = cost_report.figures(at_1000, schedlens)
    total, ratio, cycle = figures["total"], figures["versus no-op"], figures["round trip"]
    rows: list[list[object]] = [
        [
            "CPU per scheduled pod, 1000 nodes, everything schedlens runs, over the no-op extender's",
            f"≤ {cost_targets.CPU_VERSUS_NOOP}×",
            f"{ratio:.1f}× ({total:.2f} ms: verbs {figures['verbs']:.2f}, bind {figures['bind']:.2f}, ingest "
            f"{figures['ingest']:.2f}, PostgreSQL {figures['postgres']:.2f})",
            verdict(ratio, cost_targets.CPU_VERSUS_NOOP),
        ],
        [
            "filter + prioritize round trip p50, 1000 nodes (420 names), binds and ingest concurrent",
            f"≤ {cost_targets.ROUND_TRIP_P50_MS} ms",
            f"{cycle:.2f} ms",
            verdict(cycle, cost_targets.ROUND_TRIP_P50_MS),
        ],
    ]
    return lines, rows


if __name__ == "__main__":
    main()
