"""Traffic prefetch: refresh time at 100/1000/5000 nodes against a real Prometheus, and verb latency on the
snapshot path (Redis) next to the in-process path.

For each size it writes one eth0 counter per node (plus a lo counter, so the device matcher has work to do)
into TSDB blocks with promtool, starts Prometheus on them, and measures:

- refresh: the ``traffic_refresh`` service end to end, as a Celery worker runs it (lock, one PromQL query,
  parse, snapshot write to Redis, statistics, one ``TrafficRefresh`` row in a throw-away SQLite database),
  and the Prometheus fetch alone;
- verbs: filter and prioritize (NodeNames mode, every node a candidate, ``deploy/profiles.demo.yaml``) called
  in process, reading traffic from a ``TrafficStore`` (in-process mode) or through ``RedisTrafficView`` (one
  pipelined Redis round trip per call, with 50 recent binds in the herd log), and the Redis read alone.

    .venv/bin/python -m benchmarks.prefetch --nodes 100 1000 5000 --out benchmarks/results-prefetch.md

Needs ``prometheus`` and ``promtool`` on PATH and a Redis at ``REDIS_URL`` (default db 15 on loopback); keys are
written under a random prefix and deleted afterwards.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import msgspec

from benchmarks.common import REPO, machine, now, percentile, row

WORKDIR = Path(tempfile.mkdtemp(prefix="schedlens-prefetch-bench-"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")
os.environ["DATABASE_URL"] = f"sqlite:///{WORKDIR / 'bench.sqlite3'}"
os.environ["SCHEDLENS_REDIS_PREFIX"] = f"schedlens-bench:{uuid.uuid4().hex[:8]}:"
os.environ["SCHEDLENS_PROMETHEUS_TIMEOUT_SECONDS"] = "30"

import django

django.setup()

from django.conf import settings
from django.core.management import call_command

from dashboard.traffic.clients import keys, verb_client, worker_client
from dashboard.traffic.services import traffic_refresh
from dashboard.traffic.snapshots import encode_snapshot
from dashboard.traffic.view import RedisTrafficView
from scheduler_core.cli.simulator import make_cluster, make_pod
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import StaticCluster
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from scheduler_core.traffic import TrafficQuery
from scheduler_core.traffic.prometheus import PrometheusTrafficSource
from scheduler_core.traffic.store import TrafficStore
from tests.support.prometheus_server import Series, start_prometheus

PROFILES = (REPO / "deploy" / "profiles.demo.yaml").read_text()
STEP = 15
HISTORY = 8 * 60
FUTURE = 4 * 60
"""Samples from 8 minutes before to 4 minutes after now: every 5-minute window of the run is covered."""


def series_for(names: list[str], anchor: int) -> list[Series]:
    rng = random.Random(3)
    out = []
    for i, name in enumerate(names):
        for device, rate in (("eth0", 10 ** rng.uniform(4, 8)), ("lo", 1000.0)):
            samples = [
                (float(ts), 1e9 + rate * (ts - anchor + HISTORY))
                for ts in range(anchor - HISTORY, anchor + FUTURE + 1, STEP)
            ]
            labels = {"device": device, "instance": f"10.{i // 65536}.{i // 256 % 256}.{i % 256}:9100"}
            out.append(Series("node_network_receive_bytes_total", {**labels, "kubernetes_node": name}, samples))
    return out


def timed(fn: Callable[[], object], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def ms(values: list[float]) -> tuple[str, str, str]:
    return f"{statistics.median(values):.2f}", f"{percentile(values, 99):.2f}", f"{max(values):.2f}"


def bench_size(nodes: int, calls: int, refreshes: int) -> tuple[list[str], list[str]]:
    cluster = make_cluster(nodes)
    names = cluster.node_names
    prom_dir = WORKDIR / f"prometheus-{nodes}"
    started = time.perf_counter()
    server = start_prometheus(series_for(names, int(time.time())), prom_dir)
    print(f"{nodes} nodes: Prometheus ready in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    try:
        settings.PROMETHEUS_URL = server.url
        query = TrafficQuery()
        source = PrometheusTrafficSource(server.url, timeout_seconds=30.0)
        fetches = timed(lambda: source.fetch(query), refreshes)
        snapshot = source.fetch(query)
        assert len(snapshot.bytes_by_node) == nodes, (len(snapshot.bytes_by_node), nodes)
        size_kb = len(encode_snapshot(snapshot)) / 1024
        first = timed(lambda: traffic_refresh(query=query), 1)  # stores the per-node values on its row
        later = timed(lambda: traffic_refresh(query=query), refreshes)  # summary rows only
        refresh_rows = [
            row(nodes, "Prometheus fetch (query + parse)", *ms(fetches), len(fetches)),
            row(nodes, "refresh, per-node values kept (1 per minute)", *ms(first), 1),
            row(nodes, "refresh, summary row only", *ms(later), len(later)),
            row(nodes, "snapshot size in Redis", f"{size_kb:.0f} KiB", "", "", ""),
        ]

        profiles = load_profiles(PROFILES)
        static = StaticCluster.from_document(cluster.document())
        store = TrafficStore()
        for q in profiles["default"].traffic_queries():
            store.put(source.fetch(q))
        view = RedisTrafficView(
            verb_client(), keys(), refresh_seconds=15.0, herd_horizon_seconds=60.0, retry_after_seconds=1.0
        )
        now = time.time()
        for i in range(50):
            view.record_bind(node=names[i % len(names)], pod=f"bench-{i}", at=now - i * 0.1)
        in_process = Extender(profiles, cluster=static, traffic=store, binder=SimulatedBinder())
        via_redis = Extender(profiles, cluster=static, traffic=store, binder=SimulatedBinder(), inputs=view)
        rng = random.Random(1)
        bodies = [
            msgspec.json.encode({"Pod": make_pod(rng), "Nodes": None, "NodeNames": names})
            for _ in range(min(calls, 50))
        ]
        n = calls if nodes <= 1000 else max(20, calls // 5)
        verb_rows = []
        reads = timed(lambda: view.for_call(profiles["default"], time.time()), n)
        verb_rows.append(row(nodes, "Redis read alone (MGET + binds, decode)", "-", *ms(reads), n))
        for verb in ("filter", "prioritize"):
            for label, extender in (("in-process store", in_process), ("Redis snapshot + herd", via_redis)):
                fn = getattr(extender, verb)
                results = []
                for i in range(n):
                    body = bodies[i % len(bodies)]
                    started = time.perf_counter()
                    result = fn("default", body)
                    results.append((time.perf_counter() - started) * 1000)
                    assert result.status == 200
                verb_rows.append(row(nodes, verb, label, *ms(results), n))
        return refresh_rows, verb_rows
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.prefetch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--refreshes", type=int, default=10)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results-prefetch.md")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    refresh_rows: list[str] = []
    verb_rows: list[str] = []
    try:
        for nodes in args.nodes:
            r, v = bench_size(nodes, args.calls, args.refreshes)
            refresh_rows += r
            verb_rows += v
    finally:
        client = worker_client()
        stale = list(client.scan_iter(match=f"{settings.SCHEDLENS_REDIS_PREFIX}*"))
        if stale:
            client.delete(*stale)
    command = "`.venv/bin/python -m benchmarks.prefetch --nodes " + " ".join(map(str, args.nodes)) + "`"
    text = "\n".join(
        [
            "# schedlens benchmarks: traffic prefetch (issue 3)",
            "",
            f"Measured {now()} on {machine()} with {command}. Prometheus {server_version()}, Redis on loopback. "
            "Milliseconds.",
            "",
            "## Refresh (what one `schedlens.prefetch_traffic` task does)",
            "",
            'One PromQL query for all nodes (`sum by (kubernetes_node) (increase(...{device="eth0"}[5m]))`) over'
            " 2 series per node, the snapshot written to Redis, refresh statistics, and one `TrafficRefresh` row.",
            "",
            row("nodes", "what", "p50", "p99", "max", "n"),
            row("---", "---", "---", "---", "---", "---"),
            *refresh_rows,
            "",
            "## Verb latency on the snapshot path",
            "",
            "In process (no HTTP), every node a candidate, `deploy/profiles.demo.yaml` (2 filters, 3 scorers)."
            " `Redis snapshot + herd` is what a replica does in `SCHEDLENS_TRAFFIC_BACKEND=redis`: one pipelined"
            " round trip per call reading the profile's snapshot and the recent binds (50 here), then scoring.",
            "",
            row("nodes", "verb", "traffic from", "p50", "p99", "max", "n"),
            row("---", "---", "---", "---", "---", "---", "---"),
            *verb_rows,
            "",
        ]
    )
    args.out.write_text(text)
    print(text)


def server_version() -> str:
    import subprocess

    out = subprocess.run(["prometheus", "--version"], capture_output=True, text=True, check=False).stdout
    return out.split()[2] if len(out.split()) > 2 else "?"


if __name__ == "__main__":
    main()
