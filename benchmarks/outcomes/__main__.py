"""Placement outcomes: the outcome job's cost per 1000 bound pods against a real Prometheus (issue 32).

Writes, with promtool, the node counters of a simulated cluster and each pod's cAdvisor network counters (receive
on the sandbox's ``container="POD"`` series, transmit on ``container=""``) and kube-state-metrics' owner and info
gauges; starts Prometheus on them; records ``--pods`` bound cycles through the real extender and ingest into a
scratch PostgreSQL database, bound 17 minutes before "now", so that every window (1, 5, 15 min) has passed; then
times ``outcomes_refresh`` following all of them at once (one run: rows started from the decoded records, three
windows each read, facts read, rows written, one balance sample), in its parts:

- start: the rows of the newly bound cycles (their calls read and decoded, the estimate taken);
- windows: node, runner-up and pod traffic of every passed window, and the pods' facts, from Prometheus, and the rows
  updated;
- balance: one spread sample per profile.

    .venv/bin/python -m benchmarks.outcomes --pods 1000 --nodes 100 --out benchmarks/results-outcomes.md
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO, machine, migrate, now, recreate_database, table

WORKDIR = Path(tempfile.mkdtemp(prefix="schedlens-outcomes-bench-"))
DATABASE = "schedlens_bench_outcomes"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ["DATABASE_URL"] = recreate_database(DATABASE)
os.environ["SCHEDLENS_INGEST_IN_PROCESS"] = "false"
os.environ["SCHEDLENS_PROMETHEUS_TIMEOUT_SECONDS"] = "30"
migrate(os.environ["DATABASE_URL"])

import django

django.setup()


import msgspec
from django.conf import settings

from dashboard.ingest.cycles import cycles_ingest_events
from dashboard.outcomes import services
from dashboard.outcomes.models import BalanceSample, PlacementOutcome
from dashboard.outcomes.sources import outcome_source
from scheduler_core.cli.simulator import make_cluster
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import StaticCluster
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from scheduler_core.traffic import TrafficSnapshot
from scheduler_core.traffic.store import TrafficStore
from tests.support.prometheus_data import counter_samples
from tests.support.prometheus_server import Series, start_prometheus

PROFILES = (REPO / "deploy" / "profiles.demo.yaml").read_text()
BOUND_BEFORE_SECONDS = 17 * 60


def gauge(anchor: int, metric: str, labels: dict[str, str]) -> Series:
    return Series(metric, labels, [(float(t), 1.0) for t in range(anchor - 1200, anchor + 601, 15)], kind="gauge")


def series(anchor: int, nodes: list[str], pods: list[str]) -> list[Series]:
    rng = random.Random(3)
    found = [
        Series(
            "node_network_receive_bytes_total",
            {"device": "eth0", "instance": f"10.3.{i // 250}.{i % 250}:9100", "kubernetes_node": node},
            counter_samples(anchor, rng.uniform(1e5, 1e8)),
        )
        for i, node in enumerate(nodes)
    ]
    for pod in pods:
        labels = {"namespace": "bench", "pod": pod, "interface": "eth0"}
        found.append(
            Series(
                "container_network_receive_bytes_total",
                {**labels, "container": "POD"},
                counter_samples(anchor, rng.uniform(1e3, 1e7)),
            )
        )
        found.append(
            Series(
                "container_network_transmit_bytes_total",
                {**labels, "container": ""},
                counter_samples(anchor, rng.uniform(1e3, 1e7)),
            )
        )
        found.append(
            gauge(anchor, "kube_pod_owner", {"namespace": "bench", "pod": pod, "owner_kind": "Job", "owner_name": pod})
        )
        found.append(gauge(anchor, "kube_pod_info", {"namespace": "bench", "pod": pod, "host_network": "false"}))
    return found


def record(anchor: int, cluster, pods: list[str]) -> None:
    """``pods`` bound through the real extender (NodeNames, every node a candidate) and folded by the ingest."""
    profiles = load_profiles(PROFILES)
    static = StaticCluster.from_document(cluster.document())
    rng = random.Random(5)
    at = anchor - BOUND_BEFORE_SECONDS
    store = TrafficStore()
    for query in profiles["default"].traffic_queries():
        traffic = {n: rng.uniform(1e7, 1e10) for n in cluster.node_names}
        store.put(TrafficSnapshot(query, traffic, at, "bench"))
    extender = Extender(profiles, cluster=static, traffic=store, binder=SimulatedBinder(), clock=lambda: at)
    events = []
    for i, pod in enumerate(pods):
        body = {
            "metadata": {"name": pod, "namespace": "bench", "uid": f"uid-{i}", "resourceVersion": "1"},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.25.4"}]},
        }
        args = {"Pod": body, "Nodes": None, "NodeNames": cluster.node_names}
        filtered = extender.filter("default", msgspec.json.encode(args))
        passed = msgspec.json.decode(filtered.body)["NodeNames"]
        scored = extender.prioritize("default", msgspec.json.encode({**args, "NodeNames": passed}))
        best = max(msgspec.json.decode(scored.body), key=lambda h: h["Score"])["Host"]
        binding = {"PodName": pod, "PodNamespace": "bench", "PodUID": f"uid-{i}", "Node": best}
        events += [filtered.event, scored.event, extender.bind("default", msgspec.json.encode(binding)).event]
        if len(events) >= 600:
            cycles_ingest_events(events=events)
            events = []
    if events:
        cycles_ingest_events(events=events)


def run_once(anchor: int) -> dict[str, float]:
    PlacementOutcome.objects.all().delete()
    BalanceSample.objects.all().delete()
    source = outcome_source()
    windows = services._windows_seconds()
    limit = settings.SCHEDLENS_OUTCOME_BATCH
    times: dict[str, float] = {}
    started = time.perf_counter()
    times["rows started"] = services._start_following(now=anchor, windows=windows, limit=limit)
    times["start"] = time.perf_counter() - started
    rows = list(services._incomplete(now=anchor, windows=windows, limit=limit))
    started = time.perf_counter()
    times["rows updated"] = services._update_outcomes(rows=rows, source=source, now=anchor, windows=windows)
    times["windows"] = time.perf_counter() - started
    started = time.perf_counter()
    services._balance_samples(source=source, now=anchor)
    times["balance"] = time.perf_counter() - started
    times["requests"] = getattr(source, "requests", 0)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results-outcomes.md")
    args = parser.parse_args()
    settings.SCHEDLENS_OUTCOME_BATCH = args.pods
    cluster = make_cluster(args.nodes)
    pods = [f"bench-{i:05}" for i in range(args.pods)]
    anchor = int(time.time())
    server = start_prometheus(series(anchor, cluster.node_names, pods), WORKDIR / "prometheus")
    try:
        settings.PROMETHEUS_URL = server.url
        record(anchor, cluster, pods)
        runs = [run_once(anchor) for _ in range(args.runs)]
    finally:
        server.stop()
    measured = PlacementOutcome.objects.filter(status="measured", complete=True).count()
    assert measured == args.pods, (measured, args.pods)
    per = 1000 / args.pods
    rows = []
    for part in ("start", "windows", "balance"):
        values = sorted(r[part] * 1000 for r in runs)
        rows.append(
            (part, f"{values[len(values) // 2]:.0f}", f"{values[-1]:.0f}", f"{values[len(values) // 2] * per:.0f}")
        )
    totals = sorted(sum(r[p] for p in ("start", "windows", "balance")) * 1000 for r in runs)
    rows.append(
        ("whole run", f"{totals[len(totals) // 2]:.0f}", f"{totals[-1]:.0f}", f"{totals[len(totals) // 2] * per:.0f}")
    )
    version = subprocess.run(["prometheus", "--version"], capture_output=True, text=True, check=False).stdout.split()
    lines = [
        "# schedlens benchmarks: placement outcomes (issue 32)",
        "",
        f"Measured {now()} on {machine()} with `.venv/bin/python -m benchmarks.outcomes --pods {args.pods} "
        f"--nodes {args.nodes} --runs {args.runs}`. Prometheus {version[2] if len(version) > 2 else '?'} on loopback, "
        "PostgreSQL on loopback. Milliseconds.",
        "",
        f"One run of the outcome job following {args.pods} bound cycles whose three windows (1, 5, 15 min) have all "
        f"passed: {args.nodes} nodes (every one a candidate, `deploy/profiles.demo.yaml`), each pod with a receive "
        "and a transmit counter and two kube-state-metrics gauges. Each run starts from no outcome row. "
        f"Prometheus requests per run: {int(runs[0]['requests'])} (asks joined by `or` up to 60,000 characters).",
        "",
        *table(("part", "p50", "max", "p50 per 1000 pods"), rows),
        "",
    ]
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))
    recreate_database(DATABASE, drop_only=True)


if __name__ == "__main__":
    sys.exit(main())
