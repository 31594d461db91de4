"""``manage.py simulate``: a synthetic cluster and a kube-scheduler-like client against a running schedlens."""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.placements.models import ObservationKind
from dashboard.placements.services import placements_record, placements_waiting_sync
from dashboard.selectors.profiles import profile_configuration
from scheduler_core.cli.simulator import (
    ExtenderClient,
    KubeSchedulerSimulator,
    SyntheticCluster,
    failed_scheduling_message,
    make_cluster,
    make_pod,
)
from scheduler_core.kube.placement_watch import WaitingPod as WatchedPod

GPU = "example.com/gpu"
NO_GPU_SELECTOR = "node(s) didn't match Pod's node affinity/selector"


def leave_waiting(simulator: KubeSchedulerSimulator, cluster: SyntheticCluster, count: int, *, seed: int) -> list[str]:
    """Pods no node takes, recorded as ``watch_placements`` records what it sees (the demo has no API server): each
    one's attempt through our filter where kube-scheduler's own left nodes for it, its FailedScheduling message as
    kube-scheduler v1.28 writes it, and the pod in the live pending list. Returns their names."""
    rng = random.Random(seed + 101)  # noqa: S311  (demo pods, as the simulator makes them)
    total = len(cluster.nodes)
    without_gpu = [n for n in cluster.nodes if GPU not in n["status"]["capacity"]]
    waiting: list[WatchedPod] = []
    for index in range(count):
        pod = make_pod(rng)
        meta = pod["metadata"]
        requests = pod["spec"]["containers"][0]["resources"]["requests"]
        answer: dict[str, Any] | None = None
        own: dict[str, int]
        if index % 2 == 0 and without_gpu:  # a GPU pod pinned away from the GPU nodes: our filter refuses the rest
            requests[GPU] = "1"
            answer = simulator.refuse(pod, without_gpu)
            if answer.get("NodeNames") or (answer.get("Nodes") or {}).get("items"):
                continue  # this profile's filter passes GPU-less nodes: the pod would be placed
            own = {NO_GPU_SELECTOR: total - len(without_gpu)} if total > len(without_gpu) else {}
        else:  # more memory than any node has: kube-scheduler's own filters refuse every node, ours is never asked
            requests["memory"] = "512Gi"
            own = {"Insufficient memory": total}
        now = time.time()
        placements_record(
            key=f"event:demo-{meta['uid']}:1",
            kind=ObservationKind.FAILED_SCHEDULING,
            pod_uid=meta["uid"],
            pod_namespace=meta["namespace"],
            pod_name=meta["name"],
            scheduler_name=pod["spec"]["schedulerName"],
            reason="FailedScheduling",
            message=failed_scheduling_message(total, answer, own),
            occurred_at=now,
        )
        waiting.append(
            WatchedPod(meta["uid"], meta["namespace"], meta["name"], pod["spec"]["schedulerName"], now - 60 * index)
        )
    placements_waiting_sync(waiting, complete=False)  # the pods left waiting by earlier runs stay listed
    return [f"{pod.namespace}/{pod.name}" for pod in waiting]


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
            "--leave-waiting",
            type=int,
            default=0,
            metavar="N",
            help="then leave N pods no node takes, in the pending list, as the placement watcher would see them: a GPU "
            "pod kube-scheduler's filters left only GPU-less nodes for, a pod no node has the memory for (demo only)",
        )
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
        if options["leave_waiting"] > 0:
            left = leave_waiting(simulator, cluster, options["leave_waiting"], seed=options["seed"])
            pods = f"{len(left)} pod{'' if len(left) == 1 else 's'}"
            self.stdout.write(f"left {pods} waiting for a node: {', '.join(left)}")
