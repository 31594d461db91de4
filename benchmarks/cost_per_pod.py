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

Against the deployed process layout: gunicorn as ``dashboard/gunicorn_conf.py`` configures it (``WEB_WORKERS`` 2 x
``WEB_THREADS`` 8, metrics in ``PROMETHEUS_MULTIPROC_DIR``), ``manage.py ingest_spool --follow`` into PostgreSQL,
``SCHEDLENS_BIND_MODE=kubernetes`` with a kubeconfig for the Kubernetes-shaped API server of the tests
(``tests/fake_kube_api``, in a process of its own per stack, holding every pod, answering with TCP_NODELAY as
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
(``benchmarks/floor_wsgi.py``), the CPU any verb pays before schedlens does anything.

A/B: ``--variant`` as in ``benchmarks/ab.py`` (a comma-separated ``NAME=value`` list; ``checkout=DIR`` runs that
checkout's code, which needs its own ``.venv``: a link to this one will do). Every variant gets its own stack; rounds
alternate them (A B, then B A, ...), so machine drift hits both alike.

    .venv/bin/python benchmarks/cost_per_pod.py --nodes 100 1000 5000 --pods 1000 --write benchmarks/results-cost.md
    .venv/bin/python benchmarks/cost_per_pod.py --nodes 1000 --pods 2400 --rounds 8 --concurrent-pods 0 \\
        --variant checkout=/tmp/before --variant "" --variant SCHEDLENS_BIND_MODE=simulated --variant candidates=fixed

``candidates=fixed`` (a client setting, not an environment variable) sends the same NodeNames for every pod, as the
lean benchmarks do. ``--write FILE`` writes the results file, ``--append --title T`` adds a run to it as a section.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import secrets
import shlex
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import PY, REPO, machine, now, p50, percentile, recreate_database, table
from benchmarks.load_client import BIND_THREADS, BindProcess, Connection
from scheduler_core.simulator import SyntheticCluster, make_cluster, make_pod

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


# --- processes and their CPU -----------------------------------------------------------------------------------------

TICK = os.sysconf("SC_CLK_TCK")
DATABASE_PREFIX = os.environ.get("BENCH_COST_DATABASE_PREFIX", "schedlens_bench_cost")
"""Scratch databases ``<prefix>_<nodes>_<variant>``, created and dropped by each run (``make bench`` included)."""


def _proc_table() -> dict[int, tuple[int, int, int]]:
    """pid -> (ppid, own CPU ticks utime + stime, reaped children's cutime + cstime), for every process."""
    out: dict[int, tuple[int, int, int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                text = handle.read()
        except OSError:
            continue
        fields = text[text.rindex(b")") + 2 :].split()
        # fields[0] is field 3 (state) of proc(5): ppid 4, utime 14, stime 15, cutime 16, cstime 17.
        out[int(entry.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14]))
    return out


def _descendants(table_: dict[int, tuple[int, int, int]], pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for child, (parent, _, _) in table_.items():
        children.setdefault(parent, []).append(child)
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(children.get(child, []))
    return sorted(found)


def _seconds(table_: dict[int, tuple[int, int, int]], pids: Iterable[int]) -> float:
    """CPU seconds of ``pids`` so far, with the children they reaped (a dead worker stays in its parent's sum)."""
    return sum(table_[p][1] + table_[p][2] for p in pids if p in table_) / TICK


class _Process:
    """A subprocess run from a checkout, its output in a log file; stopped by its own pid."""

    def __init__(self, command: Sequence[str], env: dict[str, str], log: Path, cwd: Path) -> None:
        self.log = log
        self._handle = log.open("ab")
        self.process = subprocess.Popen(
            list(command),
            cwd=cwd,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            stdout=self._handle,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._handle.close()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- the Kubernetes-shaped API server, in a process of its own ------------------------------------------------------

_KINDS = (
    ("POST", re.compile(r"/api/v1/namespaces/[^/]+/pods/[^/]+/binding"), "bindings"),
    ("GET", re.compile(r"/api/v1/namespaces/[^/]+/pods/[^/]+"), "pod reads"),
    ("POST", re.compile(r"/apis/events\.k8s\.io/v1/namespaces/[^/]+/events"), "events"),
)


def _kind(method: str, path: str) -> str:
    for want, pattern, kind in _KINDS:
        if method == want and pattern.fullmatch(path):
            return kind
    return f"other ({method})"


def _kube_api_main(conn: Any) -> None:
    """The child process: a FakeKubeAPI answering over HTTP, driven by commands on ``conn``."""
    sys.path.insert(0, str(REPO))
    from tests.fake_kube_api import FakeKubeAPI
    from tests.fake_kube_api.http_handler import RequestHandler

    # Its answers are written as headers, then body: without TCP_NODELAY (which Go's net/http server sets, as
    # kube-apiserver is) the body waits for the client's delayed ACK, 40 ms per request.
    RequestHandler.disable_nagle_algorithm = True
    api = FakeKubeAPI().start()
    conn.send(api.url)
    while True:
        command, argument = conn.recv()
        if command == "pods":
            for name, namespace, uid in argument:
                api.add_pod(name, namespace, uid=uid, scheduler_name="schedlens-scheduler")
            conn.send(len(argument))
        elif command == "requests":
            with api.lock:
                counts = Counter(_kind(r.method, r.path) for r in api.requests)
                bound = sum(1 for pod in api.pods.values() if pod["spec"].get("nodeName"))
            conn.send((dict(counts), bound))
        else:
            api.stop()
            conn.send("stopped")
            return


class KubeAPIProcess:
    """``tests/fake_kube_api`` in a child process, so its threads share no GIL with the client."""

    def __init__(self) -> None:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_kube_api_main, args=(child,), daemon=True, name="fake-kube-api")
        self._process.start()
        self._lock = threading.Lock()
        self.url: str = self._receive()

    def _receive(self, timeout: float = 120.0) -> Any:
        if not self._conn.poll(timeout):
            raise RuntimeError(f"the fake API server did not answer (exit code {self._process.exitcode})")
        return self._conn.recv()

    def _ask(self, command: str, argument: Any = None) -> Any:
        with self._lock:
            self._conn.send((command, argument))
            return self._receive()

    def add_pods(self, pods: Sequence[dict[str, Any]]) -> None:
        self._ask("pods", [(p["metadata"]["name"], p["metadata"]["namespace"], p["metadata"]["uid"]) for p in pods])

    def requests(self) -> tuple[Counter[str], int]:
        counts, bound = self._ask("requests")
        return Counter(counts), bound

    def write_kubeconfig(self, path: Path) -> Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
            "current-context": "fake",
        }
        path.write_text(json.dumps(config))
        return path

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._ask("stop")
        self._process.join(timeout=10)


# --- one schedlens: gunicorn, the ingester, a database, a spool -----------------------------------------------------


def parse_variant(text: str) -> tuple[Path, dict[str, str]]:
    """``NAME=value[,NAME=value...]``; ``checkout=DIR`` names the checkout to run (as ``benchmarks/ab.py``);
    ``candidates=fixed`` makes the client send the same NodeNames for every pod (the lean benchmarks' way)."""
    env: dict[str, str] = {}
    for item in filter(None, text.split(",")):
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"--variant {text!r}: expected NAME=value[,NAME=value...], got {item!r}")
        env[name] = value
    checkout = Path(env.pop("checkout", str(REPO))).resolve()
    if not (checkout / "dashboard" / "gunicorn_conf.py").exists():
        raise SystemExit(f"--variant {text!r}: {checkout} is not a schedlens checkout")
    return checkout, env


class Stack:
    """schedlens as deployed, for one variant: gunicorn (the verbs), ``ingest_spool --follow``, its database."""

    def __init__(
        self,
        label: str,
        checkout: Path,
        extra_env: dict[str, str],
        workdir: Path,
        cluster_file: Path,
        *,
        database: str | None = None,
        database_url: str | None = None,
    ) -> None:
        self.label = label
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        extra_env = dict(extra_env)
        self.fixed_candidates = extra_env.pop("candidates", "kube-scheduler") == "fixed"
        self.kube = KubeAPIProcess()
        kubeconfig = self.kube.write_kubeconfig(workdir / "kubeconfig")
        self.database = database
        if database_url is None:
            assert database is not None
            database_url = recreate_database(database)
            migrate_env = {**os.environ, "DATABASE_URL": database_url, "SCHEDLENS_INGEST_IN_PROCESS": "false"}
            subprocess.run(
                [str(checkout / PY), "manage.py", "migrate", "--verbosity", "0"],
                cwd=checkout,
                env=migrate_env,
                check=True,
            )
        self.database_url = database_url
        metrics = workdir / "prometheus-multiproc"
        metrics.mkdir(exist_ok=True)
        self.port = _free_port()
        self.env = {
            "DATABASE_URL": database_url,
            "DJANGO_DEBUG": "false",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "SCHEDLENS_SPOOL_DIR": str(workdir / "spool"),
            "SCHEDLENS_INGEST_IN_PROCESS": "false",
            "SCHEDLENS_BIND_MODE": "kubernetes",
            "KUBECONFIG": str(kubeconfig),
            "SCHEDLENS_CLUSTER_SOURCE": "file",
            "SCHEDLENS_CLUSTER_FILE": str(cluster_file),
            "SCHEDLENS_CONFIG": str(REPO / "deploy" / "profiles.demo.yaml"),
            "SCHEDLENS_TRAFFIC_BACKEND": "inprocess",
            "PROMETHEUS_URL": "",
            "PROMETHEUS_MULTIPROC_DIR": str(metrics),
            "WEB_WORKERS": os.environ.get("WEB_WORKERS", "2"),
            "WEB_THREADS": os.environ.get("WEB_THREADS", "8"),
            "PORT": str(self.port),
            # The ingester's PostgreSQL backend lives as long as its connection: one connection for the whole run
            # (instead of a new one a minute) keeps the backend's CPU readable in /proc.
            "DATABASE_CONN_MAX_AGE": "3600",
            **extra_env,
        }
        gunicorn = [str(checkout / ".venv" / "bin" / "gunicorn"), "--config", "python:dashboard.gunicorn_conf"]
        self.gunicorn = _Process(
            [*gunicorn, "--no-control-socket", "dashboard.wsgi:application"],
            self.env,
            workdir / "gunicorn.log",
            checkout,
        )
        self.ingester = _Process(
            [str(checkout / PY), "manage.py", "ingest_spool", "--follow"], self.env, workdir / "ingest.log", checkout
        )
        self._wait_ready()
        self.prefix = "/extender/default"
        self.worker_pids: list[int] = []
        self.sent = 0
        """Requests sent to this schedlens so far: each must end up as a stored call."""

    def _wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for process in (self.gunicorn, self.ingester):
                if not process.alive():
                    raise RuntimeError(f"{process.log} exited:\n{process.log.read_text(errors='replace')[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=1) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)  # polling for start-up, bounded by the deadline
        raise RuntimeError(f"schedlens ({self.label}) did not become ready within {timeout:.0f} s")

    def cpu(self, backends: Sequence[int] = ()) -> dict[str, float]:
        """CPU seconds so far of each of this stack's processes (and of the PostgreSQL backends given)."""
        procs = _proc_table()
        workers = [p for p in _descendants(procs, self.gunicorn.pid) if procs[p][0] == self.gunicorn.pid]
        if not self.worker_pids:
            self.worker_pids = workers
        out = {"gunicorn master": procs[self.gunicorn.pid][1] / TICK if self.gunicorn.pid in procs else 0.0}
        # A worker gunicorn had to restart would show as a new pid: its predecessor is in the master's cutime.
        out["gunicorn master"] += procs.get(self.gunicorn.pid, (0, 0, 0))[2] / TICK
        for number, pid in enumerate(self.worker_pids, 1):
            out[f"gunicorn worker {number}"] = _seconds(procs, [pid, *_descendants(procs, pid)])
        out["ingester"] = procs[self.ingester.pid][1] / TICK if self.ingester.pid in procs else 0.0
        ingest_children = _descendants(procs, self.ingester.pid)
        out["ingester's preparing processes"] = (
            _seconds(procs, ingest_children) + procs.get(self.ingester.pid, (0, 0, 0))[2] / TICK
        )
        out["PostgreSQL backends"] = _seconds(procs, backends)
        return out

    def spool_left(self) -> int:
        path = Path(self.env["SCHEDLENS_SPOOL_DIR"]) / "spool.sqlite3"
        if not path.exists():
            return 0
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)) as conn:
            return int(conn.execute("SELECT count(*) FROM events").fetchone()[0])

    def check(self) -> list[str]:
        """What went wrong so far: calls sent but not stored in PostgreSQL, exceptions in the processes' logs."""
        import psycopg

        problems = []
        try:
            with psycopg.connect(self.database_url) as conn:
                stored = int(conn.execute("SELECT count(*) FROM dashboard_verbcall").fetchone()[0])
        except psycopg.Error as exc:
            problems.append(f"could not count the stored calls: {exc}")
        else:
            if stored < self.sent:
                problems.append(f"{self.sent - stored} of {self.sent} calls not stored")
        for process in (self.gunicorn, self.ingester):
            text = process.log.read_text(errors="replace") if process.log.exists() else ""
            raised = re.findall(r"^(?:[\w.]+(?:Error|Exception)): .*$", text, re.M)
            if raised:
                problems.append(f"{process.log.name}: {len(raised)} exceptions, the last: {raised[-1][:200]}")
        return problems

    def backends(self) -> list[int]:
        """The PostgreSQL backends connected to this stack's database (the ingester's, its preparing processes')."""
        if self.database is None:
            return []
        import psycopg

        from benchmarks.common import ADMIN_URL

        with contextlib.suppress(Exception), psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", (self.database,)
            ).fetchall()
            return [int(r[0]) for r in rows]
        return []

    def stop(self, drop: bool = True) -> None:
        self.gunicorn.stop()
        self.ingester.stop()
        self.kube.stop()
        if drop and self.database is not None:
            with contextlib.suppress(Exception):
                recreate_database(self.database, drop_only=True)


WEB = ("gunicorn master", "gunicorn worker")
INGEST = ("ingester",)
POSTGRES = "PostgreSQL backends"


def _group(cpu: dict[str, float], prefixes: Sequence[str]) -> float:
    return sum(v for k, v in cpu.items() if k.startswith(tuple(prefixes)))


def _delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}


def _sum(*parts: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in parts:
        for k, v in part.items():
            out[k] = out.get(k, 0.0) + v
    return out


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


def make_pods(cluster: SyntheticCluster, count: int, rng: random.Random, candidates: Candidates) -> list[Pod]:
    """Pods and their filter bodies, built before anything is timed (kube-scheduler encodes ``ExtenderArgs`` with
    ``encoding/json``: Go field names, ``Nodes`` null with ``nodeCacheCapable``)."""
    out = []
    for _ in range(count):
        pod = make_pod(rng)
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


# --- where the CPU goes: py-spy ---------------------------------------------------------------------------------


class Profiler:
    """``py-spy record`` (the ``bench`` extra) on a stack's processes during a phase: collapsed stacks per phase.

    Sampling slows the processes it samples, so a run with a profiler reports only the profiles, not CPU figures.
    """

    def __init__(self, directory: Path, rate: int = 250) -> None:
        self.directory = directory
        self.rate = rate
        directory.mkdir(parents=True, exist_ok=True)
        self.files: dict[tuple[str, str], list[Path]] = {}
        self._running: list[subprocess.Popen[bytes]] = []

    def start(self, label: str, phase: str, pids: Sequence[int]) -> None:
        py_spy = str(Path(sys.executable).with_name("py-spy"))
        for pid in pids:
            path = self.directory / f"{re.sub(r'[^A-Za-z0-9]+', '_', label)}-{phase}-{pid}.txt"
            self.files.setdefault((label, phase), []).append(path)
            command = [py_spy, "record", "--rate", str(self.rate), "--format", "raw", "--output", str(path)]
            self._running.append(
                subprocess.Popen([*command, "--pid", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
        time.sleep(0.5)  # attached before the phase starts

    def stop(self) -> None:
        import signal

        for process in self._running:
            process.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        for process in self._running:
            process.wait(timeout=60)
        self._running = []

    WAITS = frozenset({"Queue.get", "SocketIO.readinto", "LingeringThreadWorker._next_request_within"})
    BLOCKING = frozenset({"wait", "select", "poll", "sleep", "accept"})
    """Leaf frames where a thread blocks (a lock, a socket, PostgreSQL, epoll, the keep-alive poll): not CPU."""
    PLUMBING = re.compile(
        r"\((?:threading|thread|manage|arbiter|wsgiapp|base|__init__)\.py\)|\(gunicorn\)|ManagementUtility|"
        r"execute_from_command_line|^Command\.handle|^LingeringThreadWorker\.handle "
    )
    """Frames every sample of a process sits in (threads, the command, the worker loop): left out of the list."""

    def top(self, label: str, phase: str, count: int = 14) -> list[tuple[str, float]]:
        """The frames in most samples (inclusive) of those not blocked, without the processes' plumbing."""
        samples, frames = 0, Counter[str]()
        for path in self.files.get((label, phase), []):
            if not path.exists():
                continue
            for line in path.read_text(errors="replace").splitlines():
                stack, _, number = line.rpartition(" ")
                if not stack or not number.isdigit():
                    continue
                names = []
                for frame in stack.split(";"):
                    match = re.match(r"(.*) \((?:.*/)?([^/:]+):\d+\)$", frame)
                    names.append(f"{match.group(1)} ({match.group(2)})" if match else frame)
                leaf = names[-1].split(" (")[0]
                if leaf in self.WAITS or leaf.rsplit(".", 1)[-1] in self.BLOCKING:
                    continue
                samples += int(number)
                for name in set(names):
                    if not self.PLUMBING.search(name):
                        frames[name] += int(number)
        return [(name, n / samples) for name, n in frames.most_common(count)] if samples else []


# --- measurements ----------------------------------------------------------------------------------------------------


@dataclass
class Phases:
    """One variant's CPU seconds per process in each phase, summed over the rounds, and what was done."""

    label: str
    pods: int = 0
    names: list[int] = field(default_factory=list)
    verbs: dict[str, float] = field(default_factory=dict)
    binds: dict[str, float] = field(default_factory=dict)
    rest: dict[str, float] = field(default_factory=dict)
    """Between and after the rounds: the ingester catching up, the drain, the web processes idling."""
    loop: Loop = field(default_factory=Loop)
    api: Counter[str] = field(default_factory=Counter)
    bound: int = 0
    rounds_verbs_ms: list[float] = field(default_factory=list)
    rounds_bind_ms: list[float] = field(default_factory=list)
    idle_per_second: dict[str, float] = field(default_factory=dict)
    drain_seconds: float = 0.0
    seconds: float = 0.0

    def per_pod(self, phase: dict[str, float], prefixes: Sequence[str]) -> float:
        return _group(phase, prefixes) / max(1, self.pods) * 1000

    @property
    def total(self) -> dict[str, float]:
        return _sum(self.verbs, self.binds, self.rest)

    def summary(self) -> dict[str, float]:
        return {
            "verbs": self.per_pod(self.verbs, WEB),
            "bind": self.per_pod(self.binds, WEB),
            "ingest": self.per_pod(self.total, INGEST),
            "web idle and other": self.per_pod(self.rest, WEB),
            "postgres": self.per_pod(self.total, (POSTGRES,)),
        }


def _wait_drained(stacks: Sequence[Stack], events: dict[str, int], timeout: float) -> float:
    """Until every spool is empty and each stack's API server has had ``events[label]`` Events in all (or they
    stopped arriving: a full queue drops them, with pod Events off none come); returns the seconds waited."""
    started = time.monotonic()
    deadline = started + timeout
    while time.monotonic() < deadline and any(s.spool_left() for s in stacks):
        time.sleep(0.25)  # waiting for the ingesters, bounded by the deadline
    last, stable_since = -1, time.monotonic()
    while time.monotonic() < deadline:
        counts = [s.kube.requests()[0]["events"] for s in stacks]
        if all(c >= events.get(s.label, 0) for c, s in zip(counts, stacks, strict=True)):
            break
        if sum(counts) != last:
            last, stable_since = sum(counts), time.monotonic()
        elif time.monotonic() - stable_since > 3:
            break  # nothing more is coming
        time.sleep(0.25)
    return time.monotonic() - started


def _idle(stacks: Sequence[Stack], seconds: float) -> dict[str, dict[str, float]]:
    before = {s.label: s.cpu() for s in stacks}
    time.sleep(seconds)
    return {s.label: {k: v / seconds * 1000 for k, v in _delta(s.cpu(), before[s.label]).items()} for s in stacks}


def _warm_up(stack: Stack, pods: Sequence[Pod], threads: int) -> None:
    """A few cycles through every worker, untimed: per-process caches, the binder's connections, the ingester.

    Four connections at once, so that both workers accept some (the phases' loop may land on either)."""
    stack.kube.add_pods([p.pod for p in pods])
    loop = Loop()
    bodies: list[bytes] = []

    def cycles(share: Sequence[Pod]) -> None:
        conn = Connection("127.0.0.1", stack.port, [0], threading.Lock())
        bodies.extend(b for p in share if (b := schedule(conn, stack.prefix, p, loop)) is not None)
        conn.close()

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(cycles, [pods[i::4] for i in range(4)]))
    post_binds(stack.port, stack.prefix, bodies, threads, loop)
    stack.sent += sum(loop.requests.values())
    if loop.errors:
        raise RuntimeError(f"warm-up of {stack.label}: {loop.errors[0]}")


def measure_phases(
    stacks: Sequence[Stack],
    cluster: SyntheticCluster,
    *,
    pods: int,
    rounds: int,
    bind_threads: int,
    seed: int = 11,
    drain_timeout: float = 900.0,
    profiler: Profiler | None = None,
) -> list[Phases]:
    """Phases 1-3 for every stack, rounds alternating the stacks; returns one ``Phases`` per stack."""
    rng = random.Random(seed)
    candidates = {s.label: Candidates(cluster.node_names, rng, fixed=s.fixed_candidates) for s in stacks}
    results = {s.label: Phases(s.label) for s in stacks}
    for stack in stacks:
        _warm_up(stack, make_pods(cluster, 24, rng, candidates[stack.label]), bind_threads)
    _wait_drained(stacks, {s.label: 24 for s in stacks}, 120)
    time.sleep(1.0)  # the ingesters' last polls
    for label, idle in _idle(stacks, 5.0).items():
        results[label].idle_per_second = idle
    started = {s.label: s.cpu(s.backends()) for s in stacks}
    api_before = {s.label: s.kube.requests() for s in stacks}
    clock = time.perf_counter()
    per_round = max(1, pods // rounds)
    for number in range(rounds):
        order = stacks if number % 2 == 0 else list(reversed(stacks))
        for stack in order:
            result = results[stack.label]
            batch = make_pods(cluster, per_round, rng, candidates[stack.label])
            stack.kube.add_pods([p.pod for p in batch])
            conn = Connection("127.0.0.1", stack.port, [0], threading.Lock())
            if profiler:
                profiler.start(stack.label, "verbs", stack.worker_pids)
            before = stack.cpu(stack.backends())
            binds = [b for p in batch if (b := schedule(conn, stack.prefix, p, result.loop)) is not None]
            middle = stack.cpu(stack.backends())
            conn.close()
            if profiler:
                profiler.stop()
                profiler.start(stack.label, "bind", stack.worker_pids)
            post_binds(stack.port, stack.prefix, binds, bind_threads, result.loop)
            after = stack.cpu(stack.backends())
            if profiler:
                profiler.stop()
            verbs, bound = _delta(middle, before), _delta(after, middle)
            result.verbs = _sum(result.verbs, verbs)
            result.binds = _sum(result.binds, bound)
            result.pods += len(batch)
            result.names += [p.names for p in batch]
            result.rounds_verbs_ms.append(_group(verbs, WEB) / len(batch) * 1000)
            result.rounds_bind_ms.append(_group(bound, WEB) / max(1, len(binds)) * 1000)
    seconds = time.perf_counter() - clock
    events = {s.label: api_before[s.label][0]["events"] + results[s.label].loop.requests["bind"] for s in stacks}
    waited = _wait_drained(stacks, events, drain_timeout)
    for stack in stacks:
        result = results[stack.label]
        ended = stack.cpu(stack.backends())
        result.rest = _delta(_delta(ended, started[stack.label]), _sum(result.verbs, result.binds))
        result.seconds = seconds
        result.drain_seconds = waited
        if stack.spool_left():
            result.loop.errors.append(f"{stack.spool_left()} records left in the spool after {waited:.0f} s")
        stack.sent += sum(result.loop.requests.values())
        result.loop.errors += stack.check()
        counts, bound = stack.kube.requests()
        result.api = counts - api_before[stack.label][0]
        result.bound = bound - api_before[stack.label][1]
    return [results[s.label] for s in stacks]


@dataclass
class Concurrent:
    """The loop at its own pace, binds from another process, the ingester ingesting: kube-scheduler's steady state."""

    label: str
    pods: int = 0
    seconds: float = 0.0
    filter_ms: list[float] = field(default_factory=list)
    prioritize_ms: list[float] = field(default_factory=list)
    cycle_ms: list[float] = field(default_factory=list)
    bind_ms: list[float] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def measure_concurrent(
    stacks: Sequence[Stack],
    cluster: SyntheticCluster,
    *,
    pods: int,
    seed: int = 23,
    profiler: Profiler | None = None,
) -> list[Concurrent]:
    rng = random.Random(seed)
    batches = {
        s.label: make_pods(cluster, pods, rng, Candidates(cluster.node_names, rng, fixed=s.fixed_candidates))
        for s in stacks
    }
    for stack in stacks:
        stack.kube.add_pods([p.pod for p in batches[stack.label]])
    results = {s.label: Concurrent(s.label) for s in stacks}
    loops = {s.label: Loop() for s in stacks}
    conns = {s.label: Connection("127.0.0.1", s.port, [0], threading.Lock()) for s in stacks}
    binders = {s.label: BindProcess("127.0.0.1", s.port, s.prefix) for s in stacks}
    if profiler:
        for stack in stacks:
            profiler.start(stack.label, "ingest", [stack.ingester.pid])
    started = {s.label: s.cpu(s.backends()) for s in stacks}
    events = {s.label: s.kube.requests()[0]["events"] for s in stacks}
    clock = time.perf_counter()
    for index in range(pods):  # pod by pod, alternating the stacks
        for stack in stacks:
            body = schedule(conns[stack.label], stack.prefix, batches[stack.label][index], loops[stack.label])
            if body is not None:
                binders[stack.label].send(body)
    seconds = time.perf_counter() - clock
    bind_results = {label: binder.finish() for label, binder in binders.items()}
    for conn in conns.values():
        conn.close()
    _wait_drained(stacks, {k: v + len(bind_results[k]["bind_ms"]) for k, v in events.items()}, 600)
    if profiler:
        profiler.stop()
    for stack in stacks:
        result, loop, binds = results[stack.label], loops[stack.label], bind_results[stack.label]
        result.pods, result.seconds = pods, seconds
        result.filter_ms, result.prioritize_ms, result.cycle_ms = loop.filter_ms, loop.prioritize_ms, loop.cycle_ms
        result.bind_ms = binds["bind_ms"]
        stack.sent += sum(loop.requests.values()) + binds["requests"]
        result.errors = loop.errors + ([binds["first_error"]] if binds["errors"] else []) + stack.check()
        result.cpu = _delta(stack.cpu(stack.backends()), started[stack.label])
    return [results[s.label] for s in stacks]


# --- a run, and its Markdown -----------------------------------------------------------------------------------


@dataclass
class SizeResult:
    nodes: int
    phases: list[Phases]
    concurrent: list[Concurrent]
    variants: list[str]
    floor: dict[str, float] = field(default_factory=dict)
    """CPU ms per request of an empty WSGI app under the same gunicorn (``http_floor``), by request kind."""
    profiles: dict[tuple[str, str], list[tuple[str, float]]] = field(default_factory=dict)
    """(variant, phase) -> the frames in most py-spy samples, when profiled."""


def http_floor(cluster: SyntheticCluster, workdir: Path, *, requests: int, bind_threads: int) -> dict[str, float]:
    """CPU ms per request of the web processes when the verbs' requests reach an empty WSGI app under the same
    gunicorn configuration (``benchmarks/floor_wsgi.py``: body read, ``{}`` answered, before Django): what any verb
    pays before schedlens does anything. Filter-sized bodies serially on one connection, bind bodies on the pool."""
    port = _free_port()
    env = {
        "DJANGO_SETTINGS_MODULE": "benchmarks.floor_settings",
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DATABASE_URL": "sqlite:///:memory:",
        "SCHEDLENS_SPOOL_DIR": str(workdir / "floor-spool"),
        "SCHEDLENS_INGEST_IN_PROCESS": "false",
        "PORT": str(port),
        "WEB_WORKERS": os.environ.get("WEB_WORKERS", "2"),
        "WEB_THREADS": os.environ.get("WEB_THREADS", "8"),
    }
    gunicorn = [str(REPO / ".venv" / "bin" / "gunicorn"), "--config", "python:dashboard.gunicorn_conf"]
    server = _Process(
        [*gunicorn, "--no-control-socket", "benchmarks.floor_wsgi:application"], env, workdir / "floor.log", REPO
    )
    try:
        deadline = time.monotonic() + 60
        conn = Connection("127.0.0.1", port, [0], threading.Lock())
        while True:
            try:
                conn.post("/floor/wsgi", b"{}")
                break
            except OSError:
                if time.monotonic() > deadline or not server.alive():
                    raise RuntimeError(f"the floor server did not start:\n{server.log.read_text()[-2000:]}") from None
                conn = Connection("127.0.0.1", port, [0], threading.Lock())
                time.sleep(0.1)  # polling for start-up, bounded by the deadline
        rng = random.Random(5)
        pods = make_pods(cluster, requests, rng, Candidates(cluster.node_names, rng))
        bodies = [
            msgspec.json.encode({"PodName": "p", "PodNamespace": "n", "PodUID": p.pod["metadata"]["uid"], "Node": "x"})
            for p in pods
        ]

        def cpu() -> float:
            procs = _proc_table()
            return _seconds(procs, [server.pid, *_descendants(procs, server.pid)])

        for pod in pods[:20]:  # warm-up
            conn.post("/floor/wsgi", pod.filter_body)
        before = cpu()
        for pod in pods:
            conn.post("/floor/wsgi", pod.filter_body)
        middle = cpu()
        conn.close()
        local = threading.local()
        lock = threading.Lock()
        opened: list[Connection] = []

        def bind(body: bytes) -> None:
            if getattr(local, "conn", None) is None:
                local.conn = Connection("127.0.0.1", port, [0], lock)
                with lock:
                    opened.append(local.conn)
            local.conn.post("/floor/wsgi", body)

        with ThreadPoolExecutor(bind_threads) as pool:
            list(pool.map(bind, bodies))
        after = cpu()
        for each in opened:
            each.close()
    finally:
        server.stop()
    return {"filter-sized request": (middle - before) / requests * 1000, "bind": (after - middle) / requests * 1000}


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
    return SizeResult(nodes, phases, concurrent, [v[0] for v in variants], floor, profiles)


def _f(value: float) -> str:
    return f"{value:.2f}"


def _spread(values: Sequence[float]) -> str:
    if len(values) < 2:
        return ""
    return f" ({min(values):.2f}-{max(values):.2f})"


def figures(size: SizeResult, ph: Phases) -> dict[str, float]:
    """CPU ms per pod of one variant at one size. *ingest* is the concurrent run's when there is one: there a pod's
    filter, prioritize and bind records reach the ingester together, as kube-scheduler sends them; in the phases
    the binds are held back, so the ingester joins each to a cycle it stored already (*ingest, binds held back*)."""
    phased = ph.summary()
    c = next((c for c in size.concurrent if c.label == ph.label), None)
    out = {
        "verbs": phased["verbs"],
        "bind": phased["bind"],
        "ingest": phased["ingest"],
        "ingest, binds held back": phased["ingest"],
        "postgres": phased["postgres"],
        "concurrent": float("nan"),
        "round trip": float("nan"),
    }
    if c is not None and c.pods:
        out["ingest"] = _group(c.cpu, INGEST) / c.pods * 1000
        out["postgres"] = _group(c.cpu, (POSTGRES,)) / c.pods * 1000
        out["concurrent"] = (_group(c.cpu, WEB) + _group(c.cpu, INGEST)) / c.pods * 1000
        out["round trip"] = p50(c.cycle_ms) if c.cycle_ms else float("nan")
    out["total"] = out["verbs"] + out["bind"] + out["ingest"]
    return out


def summary_rows(results: Sequence[SizeResult]) -> list[list[object]]:
    rows: list[list[object]] = []
    for size in results:
        for ph in size.phases:
            f = figures(size, ph)
            has_concurrent = f["concurrent"] == f["concurrent"]  # not NaN
            rows.append(
                [
                    size.nodes,
                    *([ph.label] if len(size.phases) > 1 else []),
                    f"{p50(ph.names):.0f} / {p50(ph.loop.prioritize_names or [0]):.0f}",
                    _f(f["verbs"]) + _spread(ph.rounds_verbs_ms),
                    _f(f["bind"]) + _spread(ph.rounds_bind_ms),
                    _f(f["ingest"]) + ("" if has_concurrent else " (binds held back)"),
                    f"**{f['total']:.2f}**",
                    _f(f["concurrent"]) if has_concurrent else "",
                    _f(f["ingest, binds held back"]),
                    _f(f["postgres"]),
                    f"{sum(ph.loop.requests.values()) / max(1, ph.pods):.2f}",
                    f"{sum(ph.api.values()) / max(1, ph.pods):.2f}",
                    _f(f["round trip"]) if has_concurrent else "",
                ]
            )
    return rows


def summary_header(multi: bool) -> list[str]:
    return [
        "nodes",
        *(["variant"] if multi else []),
        "names to filter / prioritize",
        "verbs: filter + prioritize",
        "bind",
        "ingest",
        "schedlens total",
        "all at once (concurrent run)",
        "ingest, binds held back",
        "PostgreSQL",
        "HTTP requests to schedlens",
        "API requests",
        "filter + prioritize round trip p50 (concurrent run)",
    ]


def process_rows(ph: Phases) -> list[list[object]]:
    rows = []
    for name in ph.total:
        per = [ph.verbs[name], ph.binds[name], ph.rest[name], ph.total[name]]
        if name == POSTGRES and not any(per):
            continue
        rows.append([name, *(_f(v / max(1, ph.pods) * 1000) for v in per), _f(ph.idle_per_second.get(name, 0.0))])
    return rows


def markdown(results: Sequence[SizeResult], command: str, seconds: float, bind_threads: int) -> list[str]:
    multi = any(len(r.phases) > 1 for r in results)
    lines = [
        "CPU milliseconds per scheduled pod (utime + stime from `/proc/<pid>/stat`; *verbs*: the gunicorn master and "
        "workers while filter and prioritize ran for every pod, binds held back, spool appends included; *bind*: "
        "the same processes while the binds ran; *ingest*: the ingester and any process it started, in the "
        "concurrent run (a pod's three records arrive together, as kube-scheduler sends them; until drained); "
        "*all at once*: web and ingester CPU per pod in that run, a check on the sum; *ingest, binds held back*: the "
        "ingester over the phases, where it joins each bind to a cycle it stored already, a burst's cost). "
        "*PostgreSQL*: the backends of the ingester's connections, not a schedlens process. Requests per pod: HTTP "
        "requests kube-scheduler sends schedlens, and requests schedlens sends the API server (Bindings, pod reads "
        "after a 409, `Explained` Events). The round trip is the concurrent run's (binds on their own process, the "
        "ingester ingesting): request sent to last byte read, filter plus prioritize, i.e. what kube-scheduler's "
        "serial loop waits on schedlens per pod."
        + (" With variants, the figures in parentheses are the range over the rounds." if multi else ""),
        "",
        *table(summary_header(multi), summary_rows(results)),
        "",
    ]
    floors = [
        f"{r.nodes} nodes: {r.floor['filter-sized request']:.2f} ms per filter-sized request, "
        f"{r.floor['bind']:.2f} ms per bind request"
        for r in results
        if r.floor
    ]
    if floors:
        lines += [
            "*HTTP floor*: CPU of the same gunicorn configuration serving the same requests with an empty WSGI app "
            "(`benchmarks/floor_wsgi.py`: the body read, `{}` answered, before Django), what every verb pays before "
            "schedlens does anything: " + "; ".join(floors) + ".",
            "",
        ]
    for size in results:
        for ph in size.phases:
            name = f"{size.nodes} nodes" + (f", {ph.label}" if multi else "")
            api = ", ".join(f"{k} {v / max(1, ph.pods):.2f}" for k, v in sorted(ph.api.items())) or "none"
            errors = f" **{len(ph.loop.errors)} errors**, first: `{ph.loop.errors[0][:200]}`." if ph.loop.errors else ""
            lines += [
                f"### {name}: every process, CPU ms per pod by phase",
                "",
                f"{ph.pods} pods ({ph.loop.requests['filter']} filter, {ph.loop.requests['prioritize']} prioritize, "
                f"{ph.loop.requests['bind']} bind calls; {ph.bound} pods bound in the API server; API requests per "
                f"pod: {api}). Binds on a pool of {bind_threads} connections. The drain after the last bind took "
                f"{ph.drain_seconds:.1f} s.{errors} *Idle* is each process's CPU with nothing to do, in ms per "
                "second (background threads: traffic refresh, bind-intent reconciler, spool polling).",
                "",
                *table(
                    ["process", "phase 1: filter + prioritize", "phase 2: binds", "between, drain", "all", "idle ms/s"],
                    process_rows(ph),
                ),
                "",
                "Round trips in phase 1 / 2 (ms, p50 / p99): filter "
                f"{p50(ph.loop.filter_ms):.2f} / {percentile(ph.loop.filter_ms, 99):.2f}, prioritize "
                f"{p50(ph.loop.prioritize_ms or [0]):.2f} / {percentile(ph.loop.prioritize_ms or [0], 99):.2f}, bind "
                f"{p50(ph.loop.bind_ms or [0]):.2f} / {percentile(ph.loop.bind_ms or [0], 99):.2f}.",
                "",
            ]
        for c in size.concurrent:
            name = f"{size.nodes} nodes" + (f", {c.label}" if multi else "")
            web = _group(c.cpu, WEB) / max(1, c.pods) * 1000
            ingest = _group(c.cpu, INGEST) / max(1, c.pods) * 1000
            errors = f" **{len(c.errors)} errors**, first: `{c.errors[0][:200]}`." if c.errors else ""
            lines += [
                f"### {name}: concurrent run",
                "",
                f"{c.pods} pods at the loop's own pace ({c.pods / c.seconds * len(size.concurrent):.0f} pods/s"
                + (", the variants' pods alternating" if multi else "")
                + "), binds posted from a separate process on 4 connections while the loop goes on, the ingester "
                f"ingesting. CPU per pod: web {web:.2f} ms, ingester {ingest:.2f} ms, total {web + ingest:.2f} ms."
                + errors,
                "",
                *table(
                    ["round trip (ms)", "p50", "p90", "p99"],
                    [
                        [label, _f(p50(v)), _f(percentile(v, 90)), _f(percentile(v, 99))]
                        for label, v in (
                            ("filter", c.filter_ms),
                            ("prioritize", c.prioritize_ms),
                            ("filter + prioritize", c.cycle_ms),
                            ("bind (concurrently)", c.bind_ms),
                        )
                        if v
                    ],
                ),
                "",
            ]
    return lines


def profile_markdown(results: Sequence[SizeResult]) -> list[str]:
    """The profiles of a ``--py-spy`` run: per size, variant and phase, the frames in most samples."""
    names = {"verbs": "web workers, filter + prioritize", "bind": "web workers, binds", "ingest": "ingester"}
    lines = [
        "Share of `py-spy record` samples (250 Hz) that were in each frame or below it (*inclusive*), of the samples "
        "not blocked (waiting on a lock, a socket, PostgreSQL or the keep-alive poll); the threads' and commands' "
        "own frames left out. The web workers in phase 1 (filter + prioritize) and phase 2 (binds), the ingester "
        "during the concurrent run. A thread waiting for the interpreter lock or a core counts as not blocked, so "
        "code that runs beside busy threads (a socket write returning) weighs more than its CPU. Sampling slows what "
        "it samples, so this run's CPU figures are not reported.",
        "",
    ]
    for size in results:
        for (label, phase), top in size.profiles.items():
            title = f"{size.nodes} nodes" + (f", {label}" if len(size.variants) > 1 else "") + f": {names[phase]}"
            lines += [
                f"### {title}",
                "",
                *table(["frame (file)", "samples"], [[f"`{n}`", f"{v:.0%}"] for n, v in top]),
                "",
            ]
    return lines


def write_results(path: Path, lines: list[str], command: str, seconds: float, *, title: str, append: bool) -> None:
    """The results file: a header (machine, date) and this run as a section; ``append`` adds the section to it."""
    section = [f"## {title}", "", f"`{command}` ({now()}, {seconds:.0f} s).", "", *lines]
    if append and path.exists():
        path.write_text(path.read_text().rstrip("\n") + "\n\n" + "\n".join(section))
        return
    header = [
        "# schedlens: cost per scheduled pod",
        "",
        f"Measured on {machine()}, PostgreSQL on the same machine, by `benchmarks/cost_per_pod.py` (what it measures "
        "and how: its docstring), one run per section below with its command. Guidance from these figures: "
        "[docs/performance.md](../docs/performance.md#cost-per-scheduled-pod).",
        "",
    ]
    path.write_text("\n".join(header + section))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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
    command = "$ " + shlex.join([PY, "benchmarks/cost_per_pod.py", *sys.argv[1:]])
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
