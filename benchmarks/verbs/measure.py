"""Verb latency: filter and prioritize at 100 and 1000 nodes, NodeNames and full Nodes, with/without recording.

Two views of the same work:
- in process: the core's verb function alone ("without recording"), and the same plus encoding the record and
  appending it to the spool ("with recording"), which is everything the Django view adds but HTTP;
- over HTTP: a kube-scheduler-like client on one keep-alive connection against gunicorn (recording on).

    .venv/bin/python -m benchmarks.verbs --nodes 100 1000 --pods 200 --out benchmarks/results.md
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from benchmarks.common import REPO, machine, now, percentile

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from dashboard.spool import Spool
from scheduler_core.cli.simulator import ExtenderClient, SyntheticCluster, make_cluster, make_pod
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import StaticCluster
from scheduler_core.extender.record.spool_codec import encode_event
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from scheduler_core.traffic.store import TrafficStore
from scheduler_core.traffic.synthetic import SyntheticTrafficSource

PROFILES = (REPO / "deploy" / "profiles.demo.yaml").read_text()


def bodies(cluster, pods: int, names: bool) -> list[bytes]:
    rng = random.Random(1)
    out = []
    for _ in range(pods):
        pod = make_pod(rng)
        if names:
            out.append(msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": cluster.node_names}))
        else:
            node_list = {"metadata": {}, "items": cluster.nodes}
            out.append(msgspec.json.encode({"Pod": pod, "Nodes": node_list, "NodeNames": None}))
    return out


def time_calls(fn: Callable[[bytes], object], payloads: list[bytes]) -> list[float]:
    for body in payloads[:5]:
        fn(body)  # warm-up
    samples = []
    for body in payloads:
        started = time.perf_counter()
        fn(body)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def demo_extender(node_count: int) -> tuple[SyntheticCluster, Extender]:
    """The simulator's cluster of ``node_count`` nodes and an extender over it: demo profiles, synthetic traffic."""
    cluster = make_cluster(node_count)
    view = StaticCluster.from_document(cluster.document())
    profiles = load_profiles(PROFILES)
    store = TrafficStore()
    for query in profiles["default"].traffic_queries():
        store.put(SyntheticTrafficSource(view.node_names).fetch(query))
    return cluster, Extender(profiles, cluster=view, traffic=store, binder=SimulatedBinder())


def in_process(node_count: int, pods: int) -> list[tuple[str, str, str, list[float]]]:
    cluster, extender = demo_extender(node_count)
    spool = Spool(tempfile.mkdtemp(prefix="schedlens-bench-"))
    rows = []
    for mode, names in (("NodeNames", True), ("Nodes", False)):
        payloads = bodies(cluster, pods if names or node_count <= 100 else max(30, pods // 4), names)
        for verb in ("filter", "prioritize"):
            handler = getattr(extender, verb)
            rows.append((mode, verb, "off", time_calls(lambda b, h=handler: h("default", b), payloads)))

            def recorded(body: bytes, h=handler) -> None:
                spool.append(encode_event(h("default", body).event))

            rows.append((mode, verb, "on", time_calls(recorded, payloads)))
    return rows


def over_http(node_count: int, pods: int) -> list[tuple[str, str, str, list[float]]]:
    from tests.support.live_server import LiveServer

    workdir = Path(tempfile.mkdtemp(prefix="schedlens-bench-http-"))
    cluster = make_cluster(node_count)
    (workdir / "cluster.json").write_bytes(msgspec.json.encode(cluster.document()))
    server = LiveServer(
        {
            "SCHEDLENS_SPOOL_DIR": str(workdir / "spool"),
            "SCHEDLENS_INGEST_IN_PROCESS": "false",
            "SCHEDLENS_BIND_MODE": "simulated",
            "SCHEDLENS_CONFIG": str(REPO / "deploy" / "profiles.demo.yaml"),
            "SCHEDLENS_CLUSTER_FILE": str(workdir / "cluster.json"),
            "WEB_WORKERS": "1",
        }
    )
    rows = []
    try:
        client = ExtenderClient(f"{server.url}/extender/default", timeout=30)
        for mode, names in (("NodeNames", True), ("Nodes", False)):
            payloads = bodies(cluster, pods if names or node_count <= 100 else max(30, pods // 4), names)
            for verb in ("filter", "prioritize"):
                rows.append((mode, verb, "on", time_calls(lambda b, v=verb: client.call(v, b), payloads)))
        client.close()
        assert client.connections_opened == 1
    finally:
        server.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.verbs")
    parser.add_argument("--nodes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results.md")
    args = parser.parse_args()
    lines = [
        "## Verb latency (issue 2)",
        "",
        f"Measured {now()} on {machine()} with `.venv/bin/python -m benchmarks.verbs "
        f"--nodes {' '.join(map(str, args.nodes))} --pods {args.pods}`. Profile: `deploy/profiles.demo.yaml` "
        "(2 filters, 3 score plugins). Milliseconds.",
        "",
        "| nodes | where | mode | verb | recording | p50 | p99 | max | n |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for node_count in args.nodes:
        measured = (("in process", in_process(node_count, args.pods)), ("HTTP", over_http(node_count, args.pods)))
        for where, rows in measured:
            for mode, verb, recording, samples in rows:
                lines.append(
                    f"| {node_count} | {where} | {mode} | {verb} | {recording} | {statistics.median(samples):.2f} | "
                    f"{percentile(samples, 99):.2f} | {max(samples):.2f} | {len(samples)} |"
                )
                print(lines[-1], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    existing = args.out.read_text() if args.out.exists() else "# schedlens benchmarks\n\n"
    marker = "## Verb latency (issue 2)"
    if marker in existing:
        head, _, tail = existing.partition(marker)
        rest = tail.split("\n## ", 1)
        existing = head + ("## " + rest[1] if len(rest) > 1 else "")
    args.out.write_text(existing.rstrip() + "\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
