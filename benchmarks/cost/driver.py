"""kube-scheduler's side of the cost-per-pod benchmark: the candidates it sends and the extender calls it makes.

What an extender pays per pod depends on what kube-scheduler sends it, so ``benchmarks/cost`` drives
schedlens as kube-scheduler v1.28 does: ``Candidates`` reproduces ``numFeasibleNodesToFind`` and the goroutines'
windows of the node list (a new window and order per pod), ``make_pods`` builds the ``ExtenderArgs`` bodies before
anything is timed, ``schedule`` runs one cycle's filter -> prioritize on the serial loop's keep-alive connection and
``post_binds`` the binds on a pool, as a goroutine per pod would. No process is started and no CPU read here: that
is ``stack`` and ``measure``.
"""

from __future__ import annotations

import argparse
import json
import random
import threading
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import msgspec

from benchmarks.load.client import Connection
from scheduler_core.cli.simulator import SyntheticCluster, make_pod

# --- kube-scheduler's candidates ----------------------------------------------------------------------------------

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
DEFAULT_PARALLELISM = 16


def num_feasible_nodes_to_find(num_all_nodes: int, percentage_of_nodes_to_score: int = 0) -> int:
    """``Scheduler.numFeasibleNodesToFind`` (``pkg/scheduler/schedule_one.go``): how many feasible nodes end the
    search, i.e. how many names the extender's filter is sent when every node passes the in-tree filters."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    percentage = percentage_of_nodes_to_score
    if percentage == 0:
        percentage = max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND, 50 - num_all_nodes // 125)
    return max(MIN_FEASIBLE_NODES_TO_FIND, num_all_nodes * percentage // 100)


def chunk_size_for(pieces: int, parallelism: int) -> int:
    """``parallelize.chunkSizeFor``: max(1, min(sqrt(n), n/parallelism + 1))."""
    size = int(pieces**0.5)
    return max(1, min(size, pieces // parallelism + 1))


class Candidates:
    """The NodeNames kube-scheduler sends to an extender's filter, pod after pod.

    ``findNodesThatPassFilters``: checks nodes from ``nextStartNodeIndex`` on ``parallelism`` goroutines, each taking
    the next chunk of ``chunkSizeFor(n)`` nodes, and keeps feasible nodes in the order they were found until
    ``numFeasibleNodesToFind``; the next pod starts after the nodes processed. The goroutines' interleaving is
    random here (on a real scheduler it depends on timing), which is what matters to an extender: no two pods send
    the same list.
    """

    def __init__(
        self,
        names: Sequence[str],
        rng: random.Random,
        parallelism: int = DEFAULT_PARALLELISM,
        *,
        fixed: bool = False,
    ) -> None:
        """``fixed``: the same first names in node order for every pod instead (what a lean benchmark sends)."""
        self.names = list(names)
        self.rng = rng
        self.parallelism = parallelism
        self.count = num_feasible_nodes_to_find(len(self.names))
        self.chunk = chunk_size_for(len(self.names), parallelism)
        self.next_start = 0
        self.fixed = fixed

    def next(self) -> list[str]:
        if self.fixed:
            return self.names[: self.count]
        n = len(self.names)
        start, chunk = self.next_start, self.chunk
        chunks = iter(range(0, n, chunk))
        workers: list[list[int]] = []
        for _ in range(self.parallelism):  # each goroutine starts on a chunk of its own
            first = next(chunks, None)
            if first is None:
                break
            workers.append(list(range(first, min(first + chunk, n))))
        found: list[str] = []
        while len(found) < self.count and workers:
            worker = self.rng.randrange(len(workers))
            piece = workers[worker].pop(0)
            found.append(self.names[(start + piece) % n])
            if not workers[worker]:
                following = next(chunks, None)
                if following is None:
                    workers.pop(worker)
                else:
                    workers[worker] = list(range(following, min(following + chunk, n)))
        self.next_start = (start + len(found)) % n  # processedNodes: every node checked was feasible
        return found


# --- the client: kube-scheduler's side ---------------------------------------------------------------------------


class _FilterAnswer(msgspec.Struct):
    NodeNames: list[str] | None = None
    Error: str = ""


class _Host(msgspec.Struct):
    Host: str
    Score: int


_filter_answer = msgspec.json.Decoder(_FilterAnswer)
_priorities = msgspec.json.Decoder(list[_Host])
_bind_answer = msgspec.json.Decoder(dict[str, Any])


@dataclass
class Pod:
    pod: dict[str, Any]
    filter_body: bytes
    pod_json: bytes
    names: int


_GENERATED = "bcdfghjklmnpqrstvwxz2456789"
"""Kubernetes' ``SimpleNameGenerator`` alphabet, as controllers name pods and ReplicaSets."""


def _workload_pod(pod: dict[str, Any], owner: str, rng: random.Random) -> dict[str, Any]:
    """``pod`` made by the ReplicaSet ``owner``: named ``<owner>-<5 characters>`` as its controller names them."""
    name = f"{owner}-" + "".join(rng.choice(_GENERATED) for _ in range(5))
    meta = pod["metadata"]
    meta.update(name=name, generateName=f"{owner}-")
    meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "controller": True}]
    return pod


def make_pods(
    cluster: SyntheticCluster, count: int, rng: random.Random, candidates: Candidates, workloads: int = 0
) -> list[Pod]:
    """Pods and their filter bodies, built before anything is timed (kube-scheduler encodes ``ExtenderArgs`` with
    ``encoding/json``: Go field names, ``Nodes`` null with ``nodeCacheCapable``). ``workloads`` > 0: the pods of that
    many Deployments (each pod's ReplicaSet drawn from them, as a rollout's backlog is), else each pod a ReplicaSet of
    its own."""
    names = random.Random(workloads)  # the same Deployments for every variant and round
    owners = [f"app{i}-" + "".join(names.choice(_GENERATED) for _ in range(10)) for i in range(workloads)]
    out = []
    for _ in range(count):
        pod = make_pod(rng)
        if owners:
            pod = _workload_pod(pod, rng.choice(owners), rng)
        pod_json = msgspec.json.encode(pod)
        names = candidates.next()
        body = b'{"Pod":' + pod_json + b',"Nodes":null,"NodeNames":' + msgspec.json.encode(names) + b"}\n"
        out.append(Pod(pod, body, pod_json, len(names)))
    return out


@dataclass
class Loop:
    """Round trips and counts of the scheduling loop (filter -> prioritize) and of the binds."""

    filter_ms: list[float] = field(default_factory=list)
    prioritize_ms: list[float] = field(default_factory=list)
    cycle_ms: list[float] = field(default_factory=list)
    """filter + prioritize, per pod: what the loop waits for before the next pod."""
    bind_ms: list[float] = field(default_factory=list)
    requests: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    prioritize_names: list[int] = field(default_factory=list)


def schedule(conn: Connection, prefix: str, pod: Pod, loop: Loop) -> bytes | None:
    """One scheduling cycle's extender calls; returns the bind body (``ExtenderBindingArgs``) or None."""
    status, data, took = conn.post(f"{prefix}/filter", pod.filter_body)
    loop.requests["filter"] += 1
    loop.filter_ms.append(took)
    answer = _filter_answer.decode(data) if status == 200 else None
    if answer is None or answer.Error:
        loop.errors.append(f"filter: {status} {data[:200]!r}")
        return None
    feasible = answer.NodeNames or []
    if not feasible:
        return None
    chosen, cycle = feasible[0], took
    if len(feasible) > 1:
        body = b'{"Pod":' + pod.pod_json + b',"Nodes":null,"NodeNames":' + msgspec.json.encode(feasible) + b"}\n"
        status, data, took = conn.post(f"{prefix}/prioritize", body)
        loop.requests["prioritize"] += 1
        loop.prioritize_ms.append(took)
        loop.prioritize_names.append(len(feasible))
        cycle += took
        if status != 200:
            loop.errors.append(f"prioritize: {status} {data[:200]!r}")
            return None
        hosts = _priorities.decode(data)
        if hosts:
            chosen = max(hosts, key=lambda h: h.Score).Host
    loop.cycle_ms.append(cycle)
    meta = pod.pod["metadata"]
    bind = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": chosen}
    return msgspec.json.encode(bind) + b"\n"


def post_binds(port: int, prefix: str, bodies: Sequence[bytes], threads: int, loop: Loop) -> None:
    """The binds, concurrently on ``threads`` keep-alive connections (kube-scheduler: a goroutine per pod)."""
    local = threading.local()
    lock = threading.Lock()
    opened: list[Connection] = []
    counter = [0]

    def bind(body: bytes) -> None:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = Connection("127.0.0.1", port, counter, lock)
            with lock:
                opened.append(conn)
        status, data, took = conn.post(f"{prefix}/bind", body)
        error = _bind_answer.decode(data).get("Error") if status == 200 else f"HTTP {status}"
        with lock:
            loop.requests["bind"] += 1
            loop.bind_ms.append(took)
            if error:
                loop.errors.append(f"bind: {error}")

    with ThreadPoolExecutor(threads, thread_name_prefix="bind") as pool:
        list(pool.map(bind, bodies))
    for conn in opened:
        conn.close()


def main() -> None:
    """``python -m benchmarks.cost.driver``: the NodeNames kube-scheduler would send for the first pods, as JSON, to
    see (and check) what the benchmark drives without running it."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cost.driver", description=main.__doc__)
    parser.add_argument("--nodes", type=int, required=True, help="cluster size (node-0000, node-0001, ...)")
    parser.add_argument("--pods", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    names = [f"node-{i:04d}" for i in range(args.nodes)]
    candidates = Candidates(names, random.Random(args.seed))
    pods = [candidates.next() for _ in range(args.pods)]
    print(json.dumps({"nodes": args.nodes, "count": candidates.count, "chunk": candidates.chunk, "pods": pods}))


if __name__ == "__main__":
    main()
