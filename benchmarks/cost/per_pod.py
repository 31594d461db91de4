"""Cost per scheduled pod as kube-scheduler pays it: CPU of every schedlens process, and the round trips.

The client does what kube-scheduler v1.28 does for each pod (``pkg/scheduler/schedule_one.go``, ``extender.go``):

* **Candidates.** ``numFeasibleNodesToFind``: every node below 100 nodes; otherwise ``percentageOfNodesToScore``
  (default 0: adaptive, max(5, 50 - nodes/125) percent) of them, at least 100: 100 of 100 nodes, 420 of 1000, 500 of
  5000. The in-tree filters run on 16 goroutines (``parallelism``) from ``nextStartNodeIndex`` in chunks of
  min(sqrt(n), n/16 + 1) nodes and stop once that many nodes are feasible; the index then moves on by the nodes
  processed. So every pod sends another window of the node list, in the order the goroutines found its nodes:
  emulated here by interleaving the chunks' nodes at random (all nodes pass the in-tree filters).
* **Verbs.** ``filter`` with those NodeNames (``nodeCacheCapable``), ``prioritize`` with the names the filter kept
  (skipped when one is left), on one keep-alive connection (the scheduling loop is serial), then ``bind`` of the
  best-scored node from a goroutine per pod: here a pool of ``--bind-pool`` keep-alive connections.

Against the deployed process layout: gunicorn as ``config/gunicorn_conf.py`` configures it (``WEB_WORKERS`` 2 x
``WEB_THREADS`` 8, metrics in ``PROMETHEUS_MULTIPROC_DIR``), ``manage.py ingest_spool --follow`` into PostgreSQL,
``SCHEDLENS_BIND_MODE=kubernetes`` with a kubeconfig for the Kubernetes-shaped API server of the tests
(``tests/support/fake_kube_api``, in a process of its own per stack, holding every pod, answering with TCP_NODELAY as
kube-apiserver does; it also takes the ingester's ``Explained`` Events). The cluster view is the simulator's
(``SCHEDLENS_CLUSTER_SOURCE=file``), traffic the synthetic source.

Phases, so that the web processes' CPU can be charged to a verb: (1) filter -> prioritize for every pod, binds held
back; (2) the binds, on the pool; (3) the ingester (running throughout, as deployed) drains the spool. CPU is utime +
stime from ``/proc/<pid>/stat`` of the gunicorn master, each worker, the ingester (with any process it started;
reaped children count through cutime + cstime) and the PostgreSQL backends of its database, read before and after
each phase. *Verbs* is the web processes' CPU in phase 1, *bind* theirs in phase 2. Then a *concurrent* run at
kube-scheduler's own pace: binds from a separate process while the loop goes on and the ingester ingests. It gives
the round trip of filter + prioritize as kube-scheduler waits for it, the CPU of everything at once, and *ingest*:
there a pod's three records reach the ingester together, as they do from kube-scheduler, while in the phases it has
to join each held-back bind to a cycle stored already (reported too, as the cost of a burst). Afterwards every call
sent must be stored in PostgreSQL and the processes' logs free of exceptions, or the run reports errors.

An *HTTP floor* closes each size: the same gunicorn configuration serving the same requests with an empty WSGI app
(``benchmarks/load/floor_wsgi.py``), the CPU any verb pays before schedlens does anything.

A/B: ``--variant`` as in ``benchmarks/ab.py`` (a comma-separated ``NAME=value`` list; ``checkout=DIR`` runs that
checkout's code, which needs its own ``.venv``: a link to this one will do). Every variant gets its own stack; rounds
alternate them (A B, then B A, ...), so machine drift hits both alike.

    .venv/bin/python -m benchmarks.cost --nodes 100 1000 5000 --pods 1000 --write benchmarks/results-cost.md
    .venv/bin/python -m benchmarks.cost --nodes 1000 --pods 2400 --rounds 8 --concurrent-pods 0 \\
        --variant checkout=/tmp/before --variant "" --variant SCHEDLENS_BIND_MODE=simulated --variant candidates=fixed

``candidates=fixed`` (a client setting, not an environment variable) sends the same NodeNames for every pod, as the
lean benchmarks do; ``workloads=N`` (another) sends the pods of N Deployments, named as their ReplicaSets name them,
instead of each pod a ReplicaSet of its own: a rollout's backlog, whose bursts ``SCHEDLENS_POD_EVENT_BURST_SECONDS``
gives one ``Explained`` Event each; ``extender=noop`` runs the no-op extender in Go instead of schedlens
(``benchmarks/cost/noop.py``).
``--write FILE`` writes the results file, ``--append --title T`` adds a run to it as a section.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from benchmarks.common import PY, parse_variant
from benchmarks.cost.measure import (
    Concurrent,
    Profiler,
    SizeResult,
    http_floor,
    measure_concurrent,
    measure_phases,
)
from benchmarks.cost.noop import NoopStack
from benchmarks.cost.report import markdown, profile_markdown, write_results
from benchmarks.cost.stack import DATABASE_PREFIX, Stack
from benchmarks.load.client import BIND_THREADS
from scheduler_core.cli.simulator import make_cluster


def run_size(
    nodes: int,
    variants: Sequence[tuple[str, Path, dict[str, str]]],
    *,
    pods: int,
    rounds: int,
    concurrent_pods: int,
    bind_threads: int,
    workdir: Path,
    database_prefix: str = DATABASE_PREFIX,
    database_url: str | None = None,
    progress: Callable[[str], None] = print,
    floor_requests: int = 0,
    profile_dir: Path | None = None,
) -> SizeResult:
    cluster = make_cluster(nodes)
    size_dir = workdir / f"nodes-{nodes}"
    size_dir.mkdir(parents=True, exist_ok=True)
    cluster_file = size_dir / "cluster.json"
    cluster_file.write_bytes(msgspec.json.encode(cluster.document()))
    stacks: list[Stack] = []
    profiler = Profiler(profile_dir / f"nodes-{nodes}") if profile_dir else None
    try:
        for number, (label, checkout, env) in enumerate(variants):
            progress(f"{nodes} nodes: starting {label}")
            if env.get("extender") == "noop":
                fixed = env.get("candidates", "kube-scheduler") == "fixed"
                workloads = int(env.get("workloads", "0"))
                stacks.append(
                    NoopStack(label, size_dir / f"variant-{number}", fixed_candidates=fixed, workloads=workloads)
                )
                continue
            database = None if database_url else f"{database_prefix}_{nodes}_{number}"
            stacks.append(
                Stack(
                    label,
                    checkout,
                    env,
                    size_dir / f"variant-{number}",
                    cluster_file,
                    database=database,
                    database_url=database_url,
                )
            )
        progress(f"{nodes} nodes: phases ({pods} pods per variant in {rounds} rounds)")
        phases = measure_phases(stacks, cluster, pods=pods, rounds=rounds, bind_threads=bind_threads, profiler=profiler)
        concurrent: list[Concurrent] = []
        if concurrent_pods:
            progress(f"{nodes} nodes: concurrent run ({concurrent_pods} pods per variant)")
            concurrent = measure_concurrent(stacks, cluster, pods=concurrent_pods, profiler=profiler)
    finally:
        for stack in stacks:
            stack.stop()
    floor = {}
    if floor_requests:
        progress(f"{nodes} nodes: HTTP floor ({floor_requests} requests of each kind)")
        floor = http_floor(cluster, size_dir, requests=floor_requests, bind_threads=bind_threads)
    profiles = {key: profiler.top(*key) for key in profiler.files} if profiler else {}
    noop = next((label for label, _, env in variants if env.get("extender") == "noop"), None)
    return SizeResult(nodes, phases, concurrent, [v[0] for v in variants], floor, profiles, noop)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--pods", type=int, default=1000, help="pods per variant and node count (phases 1-3)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds the pods are split into (variants alternate)")
    parser.add_argument(
        "--concurrent-pods", type=int, default=500, help="pods of the concurrent run per variant (0: none)"
    )
    parser.add_argument(
        "--concurrent-nodes", type=int, nargs="*", default=None, help="node counts with a concurrent run (all)"
    )
    parser.add_argument("--bind-pool", type=int, default=BIND_THREADS, help="concurrent binds (phase 2)")
    parser.add_argument("--floor-requests", type=int, default=1000, help="requests of the HTTP floor (0: none)")
    parser.add_argument("--variant", action="append", default=None, help="NAME=value[,...]; checkout=DIR (repeat)")
    parser.add_argument("--database-prefix", default=DATABASE_PREFIX, help="scratch databases <prefix>_<nodes>_<n>")
    parser.add_argument("--write", type=Path, default=None, help="write the results file (Markdown) here")
    parser.add_argument("--append", action="store_true", help="add this run to the --write file as a section")
    parser.add_argument("--title", default="As deployed", help="the run's section heading in the --write file")
    parser.add_argument(
        "--py-spy", type=Path, default=None, help="profile every phase with py-spy into this directory (profiles only)"
    )
    args = parser.parse_args()
    texts = args.variant or [""]
    variants = [(text or "as configured", *parse_variant(text)) for text in texts]
    for text, _, env in variants:
        if env.get("extender", "noop") != "noop":
            raise SystemExit(
                f"--variant {text!r}: extender= takes noop (the no-op extender in Go), got {env['extender']!r}"
            )
    command = "$ " + shlex.join([PY, "-m", "benchmarks.cost", *sys.argv[1:]])
    workdir = Path(tempfile.mkdtemp(prefix="schedlens-cost-"))
    clock = time.perf_counter()
    results = []
    for nodes in args.nodes:
        with_concurrent = args.concurrent_nodes is None or nodes in args.concurrent_nodes
        results.append(
            run_size(
                nodes,
                variants,
                pods=args.pods,
                rounds=args.rounds,
                concurrent_pods=args.concurrent_pods if with_concurrent else 0,
                bind_threads=args.bind_pool,
                workdir=workdir,
                database_prefix=args.database_prefix,
                floor_requests=args.floor_requests,
                profile_dir=args.py_spy,
            )
        )
        shown = profile_markdown(results[-1:]) if args.py_spy else markdown(results[-1:], command, 0, args.bind_pool)
        print("\n".join(shown), flush=True)
    seconds = time.perf_counter() - clock
    lines = profile_markdown(results) if args.py_spy else markdown(results, command, seconds, args.bind_pool)
    if args.write:
        write_results(args.write, lines, command.removeprefix("$ "), seconds, title=args.title, append=args.append)
        print(f"wrote {args.write}")


if __name__ == "__main__":
    main()
