"""A load client that behaves like kube-scheduler, against schedlens under gunicorn (recording on).

Like ``pkg/scheduler/extender.go`` and ``schedule_one.go``: one keep-alive connection carries filter then
prioritize for one pod at a time (kube-scheduler's scheduling loop is serial), and binds run concurrently on a
small pool of their own keep-alive connections (kube-scheduler binds in a goroutine per pod). Bodies are built
from the simulator's cluster (``scheduler_core.cli.simulator``: 100 / 1000 / 5000 nodes, NodeNames or full Node
objects) before timing starts; a call's time is from sending the request to reading the last byte of the answer
on loopback (an upper bound of server time), and the verb's own time comes from its spooled record.

Floors in the same run, on the same bodies: the generic msgspec (and orjson) decode, and an empty Django view
behind the production middleware under the same gunicorn configuration (``benchmarks/load/floor_urls.py``).

The client is :mod:`benchmarks.load.client`, the servers it runs against :mod:`benchmarks.load.servers`; this
module runs the two measurements (``latency``, ``sustained``) and keeps the names its users import from it.

    .venv/bin/python -m benchmarks.load latency --nodes 100 1000 5000
    .venv/bin/python -m benchmarks.load sustained --nodes 1000 --seconds 600
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from benchmarks.common import migrate, p50, percentile, recreate_database
from benchmarks.load.client import Bodies, Connection, Run, Scheduler
from benchmarks.load.servers import server_env, start_server
from scheduler_core.cli.simulator import make_cluster

# --- latency --------------------------------------------------------------------------------------------------


def _spooled_durations(spool_dir: Path) -> dict[tuple[str, str], list[float]]:
    """The verbs' own time (``duration_ms`` of each spooled record), by (verb, node mode)."""
    import sqlite3

    from scheduler_core.extender.record.spool_codec import decode_event

    out: dict[tuple[str, str], list[float]] = {}
    conn = sqlite3.connect(spool_dir / "spool.sqlite3")
    try:
        for (data,) in conn.execute("SELECT data FROM events"):
            event = decode_event(bytes(data))
            out.setdefault((event.verb, event.node_mode), []).append(event.duration_ms)
    finally:
        conn.close()
    return out


def decode_floor(body: bytes, repeat: int) -> dict[str, list[float]]:
    """Decoding the same body with msgspec alone (generic: every object built), and orjson when installed."""
    out: dict[str, list[float]] = {"msgspec": []}
    decoders: list[tuple[str, Any]] = [("msgspec", msgspec.json.decode)]
    try:
        import orjson

        decoders.append(("orjson", orjson.loads))
        out["orjson"] = []
    except ImportError:
        pass
    for _ in range(repeat):
        for label, decode in decoders:
            started = time.perf_counter()
            decode(body)
            out[label].append((time.perf_counter() - started) * 1000)
    return out


@dataclass
class LatencyResult:
    nodes: int
    mode: str
    run: Run
    verb_ms: dict[str, list[float]]
    floor_view_ms: list[float]
    decode_ms: dict[str, list[float]]
    body_bytes: int
    floor_wsgi_ms: list[float] = field(default_factory=list)
    """The same body to an empty WSGI app under the same gunicorn: the floor of the verbs' fast path."""


def latency(node_counts: list[int], pods_for: dict[tuple[int, str], int], workdir: Path) -> list[LatencyResult]:
    results: list[LatencyResult] = []
    for count in node_counts:
        cluster = make_cluster(count)
        bodies = Bodies(cluster)
        size_dir = workdir / f"latency-{count}"
        server = start_server(size_dir, cluster, database_url=f"sqlite:///{size_dir / 'db.sqlite3'}", ingest=False)
        floor = start_server(size_dir / "floor", cluster, database_url="sqlite:///:memory:", ingest=False, floor=True)
        try:
            for mode in ("names", "nodes"):
                pods = pods_for[(count, mode)]
                scheduler = Scheduler(server.url)
                floor_conn = Connection("127.0.0.1", floor.port, [0], threading.Lock())
                floor_times: list[float] = []
                wsgi_times: list[float] = []
                warm = [bodies.pod() for _ in range(3)]
                for pod, pod_json in warm:  # warm-up (not timed): first calls build per-process caches
                    scheduler.schedule(pod, bodies.filter_body(pod_json, mode == "names"), pod_json, mode == "names")
                scheduler.run = Run()
                started = time.perf_counter()
                for _ in range(pods):
                    pod, pod_json = bodies.pod()
                    body = bodies.filter_body(pod_json, mode == "names")
                    scheduler.schedule(pod, body, pod_json, mode == "names")
                    floor_times.append(floor_conn.post("/floor/", body)[2])
                    wsgi_times.append(floor_conn.post("/floor/wsgi", body)[2])
                scheduler.run.seconds = time.perf_counter() - started
                scheduler.close()
                floor_conn.close()
                _, sample_json = bodies.pod()
                sample = bodies.filter_body(sample_json, mode == "names")
                decode = decode_floor(sample, max(5, min(50, pods)))
                results.append(
                    LatencyResult(count, mode, scheduler.run, {}, floor_times, decode, len(sample), wsgi_times)
                )
                print(
                    f"{count:5d} nodes {mode:5s}: filter p50 {p50(scheduler.run.filter_ms):.2f} p99 "
                    f"{percentile(scheduler.run.filter_ms, 99):.2f}  prioritize p50 "
                    f"{p50(scheduler.run.prioritize_ms):.2f}"
                    f" p99 {percentile(scheduler.run.prioritize_ms or [0], 99):.2f}  floor view p50 "
                    f"{p50(floor_times):.2f}  floor wsgi p50 {p50(wsgi_times):.2f}  decode p50 "
                    f"{p50(decode['msgspec']):.2f}  pods {scheduler.run.pods} requests {scheduler.run.requests} "
                    f"prioritize {len(scheduler.run.prioritize_ms)} binds {len(scheduler.run.bind_ms)} "
                    f"errors {scheduler.run.errors} connections {scheduler.run.connections} "
                    f"reconnections {scheduler.run.reconnections}",
                    flush=True,
                )
        finally:
            server.stop()
            floor.stop()
        durations = _spooled_durations(size_dir / "spool")
        for result in results:
            if result.nodes == count:
                result.verb_ms = {verb: durations.get((verb, result.mode), []) for verb in ("filter", "prioritize")}
    return results


# --- sustained ---------------------------------------------------------------------------------------------------


@dataclass
class SustainedResult:
    nodes: int
    seconds: float
    run: Run
    cycles_stored: int
    calls_stored: int
    drain_seconds: float
    spool_left: int


def _count(url: str, table: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # noqa: S608  (a constant)


def sustained(
    count: int, seconds: float, workdir: Path, database: str = "schedlens_bench_sustained"
) -> SustainedResult:
    """Pods/s for ``seconds`` at ``count`` nodes (NodeNames), ingest on; then every record counted in PostgreSQL.

    The deployed layout (``deploy/``): gunicorn answers and spools, a separate ``manage.py ingest_spool --follow``
    moves the records into PostgreSQL (an ingester thread inside a web process would share its GIL with the verbs).
    """
    from dashboard.spool import Spool
    from tests.support.processes import manage

    url = recreate_database(database)
    migrate(url)
    cluster = make_cluster(count)
    bodies = Bodies(cluster, seed=5)
    size_dir = workdir / f"sustained-{count}"
    server = start_server(size_dir, cluster, database_url=url, ingest=False)
    ingester = manage(
        ["ingest_spool", "--follow"],
        server_env(size_dir, cluster, database_url=url, ingest=False),
        size_dir / "ingest.log",
    )
    try:
        scheduler = Scheduler(server.url)
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            pod, pod_json = bodies.pod()
            scheduler.schedule(pod, bodies.filter_body(pod_json, True), pod_json, True)
        scheduler.close()
        scheduler.run.seconds = time.perf_counter() - started
        spool = Spool(size_dir / "spool")
        drain_started = time.perf_counter()
        calls = 0
        while time.perf_counter() - drain_started < 600:
            calls = _count(url, "dashboard_verbcall")
            if calls >= scheduler.run.requests and spool.depth() == 0:
                break
            time.sleep(0.5)  # waiting for the ingester, bounded
        drain = time.perf_counter() - drain_started
        left = spool.depth()
    finally:
        server.stop()
        ingester.stop()
    result = SustainedResult(
        count, seconds, scheduler.run, _count(url, "dashboard_schedulingcycle"), calls, drain, left
    )
    recreate_database(database, drop_only=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.load", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    lat = sub.add_parser("latency")
    lat.add_argument("--nodes", type=int, nargs="+", default=[100, 1000, 5000])
    lat.add_argument("--pods", type=int, default=200)
    sus = sub.add_parser("sustained")
    sus.add_argument("--nodes", type=int, default=1000)
    sus.add_argument("--seconds", type=float, default=60)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    workdir = Path(tempfile.mkdtemp(prefix="schedlens-load-"))
    if args.what == "latency":
        pods = {
            (n, m): args.pods if m == "names" else max(5, args.pods // (4 if n <= 1000 else 20))
            for n in args.nodes
            for m in ("names", "nodes")
        }
        latency(args.nodes, pods, workdir)
    else:
        result = sustained(args.nodes, args.seconds, workdir)
        run = result.run
        print(
            f"{result.nodes} nodes, {run.seconds:.0f} s: {run.pods} pods ({run.pods / run.seconds:.0f} pods/s), "
            f"{run.requests} requests, {run.errors} errors, {result.calls_stored} calls stored "
            f"({run.requests - result.calls_stored} missing), drain {result.drain_seconds:.0f} s; filter p50 "
            f"{p50(run.filter_ms):.2f} p99 {percentile(run.filter_ms, 99):.2f}, prioritize p50 "
            f"{p50(run.prioritize_ms):.2f} p99 {percentile(run.prioritize_ms, 99):.2f}"
        )


if __name__ == "__main__":
    main()
