"""``manage.py simulate``: a synthetic cluster and a kube-scheduler-like client against a running schedlens."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.selectors.profiles import profile_configuration
from scheduler_core.simulator import ExtenderClient, KubeSchedulerSimulator, make_cluster


class Command(BaseCommand):
    help = "Simulate kube-scheduler calling schedlens over HTTP (filter → prioritize → bind) for N pods."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", default="http://127.0.0.1:8000/extender/default", help="the extender urlPrefix")
        parser.add_argument("--nodes", type=int, default=50)
        parser.add_argument("--pods", type=int, default=100)
        parser.add_argument(
            "--mode",
            choices=("names", "nodes"),
            default="names",
            help="names = nodeCacheCapable: true; nodes = full Node objects",
        )
        parser.add_argument("--weight", type=int, default=5, help="the extender's weight in the scheduler config")
        parser.add_argument("--no-bind", action="store_true", help="leave binding to kube-scheduler's default binder")
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument(
            "--list-profiles",
            action="store_true",
            help="print the names of the profiles SCHEDLENS_CONFIG defines, one a line, and exit",
        )
        parser.add_argument(
            "--write-cluster",
            metavar="PATH",
            help="write the synthetic cluster (nodes + NodeResources) for SCHEDLENS_CLUSTER_FILE and exit",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["list_profiles"]:
            configured = profile_configuration()
            if configured.error is not None:
                raise CommandError(f"the profiles cannot be read: {configured.problem}")
            names = list(configured.profiles)
            self.stdout.write("\n".join(names))
            return
        if options["nodes"] < 1:
            raise CommandError("--nodes must be at least 1")
        cluster = make_cluster(options["nodes"], seed=options["seed"])
        if options["write_cluster"]:
            path = Path(options["write_cluster"])
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(cluster.document()), encoding="utf-8")
            tmp.replace(path)  # atomic: a server re-reading the file never sees half of it
            self.stdout.write(
                f"wrote {len(cluster.nodes)} nodes and {len(cluster.node_resources)} NodeResources to {path}"
            )
            return
        client = ExtenderClient(options["url"])
        simulator = KubeSchedulerSimulator(
            client,
            cluster,
            node_cache_capable=options["mode"] == "names",
            weight=options["weight"],
            bind=not options["no_bind"],
            seed=options["seed"] + 1,
        )
        progress = sys.stderr if sys.stderr.isatty() else None
        stats = simulator.run(options["pods"], progress=progress)
        client.close()
        self.stdout.write(
            f"{stats.pods} pods: {stats.bound} bound, {stats.unschedulable} unschedulable, {stats.errors} errors; "
            f"{len(stats.placements)} nodes received pods; {client.connections_opened} connection(s) opened"
        )
        if stats.errors:
            raise CommandError(f"{stats.errors} scheduling calls failed")
