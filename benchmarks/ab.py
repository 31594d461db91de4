"""A/B over HTTP: one kube-scheduler-like client per variant, pods alternated between them, on one machine at once.

This VM's speed drifts over an hour by more than the changes worth measuring, so two runs one after the other
cannot show them; runs side by side, pod by pod, see the same drift. Each variant is a schedlens under gunicorn
(2 workers, as deployed) with its own spool, started from this checkout or another one (``checkout=``), with extra
environment:

    .venv/bin/python benchmarks/ab.py --nodes 1000 --pods 1000 \\
        --variant WEB_KEEPALIVE_LINGER_MS=0 --variant WEB_KEEPALIVE_LINGER_MS=5
    .venv/bin/python benchmarks/ab.py --nodes 5000 --variant checkout=/tmp/before --variant ""
    .venv/bin/python benchmarks/ab.py --windows --variant checkout=/tmp/before --variant ""

``--windows``: each filter is sent the names kube-scheduler would send it (``benchmarks.cost.driver.Candidates``: a
new window of the node list for every pod, the same sequence of windows for each variant) instead of every node.

A variant is a comma-separated list of NAME=value (an empty string: as configured). Another checkout needs its own
``.venv`` (a link to this one will do). Round trips in milliseconds, as ``benchmarks.load`` measures them.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from benchmarks.common import p50, parse_variant, percentile
from benchmarks.cost.driver import Candidates
from benchmarks.load.client import Bodies, Run, Scheduler
from benchmarks.load.servers import server_env
from scheduler_core.cli.simulator import make_cluster

WARM_UP = 5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=1000, help="pods per variant")
    parser.add_argument("--variant", action="append", required=True, help="NAME=value[,…] (repeat: one per server)")
    parser.add_argument("--windows", action="store_true", help="filters sent kube-scheduler's windows of the nodes")
    args = parser.parse_args()
    variants = [parse_variant(text) for text in args.variant]

    import tests.support.live_server as live_server

    cluster = make_cluster(args.nodes)
    bodies = Bodies(cluster)
    workdir = Path(tempfile.mkdtemp(prefix="schedlens-ab-"))
    servers, schedulers = [], []
    try:
        for number, (checkout, extra) in enumerate(variants):
            directory = workdir / f"variant-{number}"
            database_url = f"sqlite:///{directory / 'db.sqlite3'}"
            env = server_env(directory, cluster, database_url=database_url, ingest=False)
            live_server.REPO = checkout  # gunicorn runs from the variant's checkout, importing its code
            servers.append(live_server.LiveServer({**env, **extra}, workers=2))
            schedulers.append(Scheduler(servers[-1].url))
        windows = [Candidates(cluster.node_names, random.Random(5)) if args.windows else None for _ in schedulers]

        def filter_body(number: int, pod_json: bytes) -> bytes:
            candidates = windows[number]
            return bodies.filter_body(pod_json, True, candidates.next() if candidates is not None else None)

        for number, scheduler in enumerate(schedulers):
            for _ in range(WARM_UP):  # per-process caches built before timing
                pod, pod_json = bodies.pod()
                scheduler.schedule(pod, filter_body(number, pod_json), pod_json, True)
            scheduler.run = Run()
        for _ in range(args.pods):
            for number, scheduler in enumerate(schedulers):
                pod, pod_json = bodies.pod()
                scheduler.schedule(pod, filter_body(number, pod_json), pod_json, True)
        for scheduler in schedulers:
            scheduler.close()
    finally:
        for server in servers:
            server.stop()
    for text, scheduler in zip(args.variant, schedulers, strict=True):
        run = scheduler.run
        size = f"{args.nodes} nodes{' (windows)' if args.windows else ''}"
        print(
            f"{size} [{text or 'as configured'}]: filter p50 {p50(run.filter_ms):.2f} p99 "
            f"{percentile(run.filter_ms, 99):.2f}  prioritize p50 {p50(run.prioritize_ms):.2f} p99 "
            f"{percentile(run.prioritize_ms, 99):.2f}  errors {run.errors}"
        )


if __name__ == "__main__":
    main()
