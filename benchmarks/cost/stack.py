"""The deployed process layout the cost-per-pod benchmark measures, and the /proc CPU of each of its processes.

``benchmarks/cost`` charges CPU to every schedlens process as deployed, so it needs the processes
themselves: gunicorn as ``config/gunicorn_conf.py`` configures it, ``manage.py ingest_spool --follow`` into a
scratch PostgreSQL database, and the tests' Kubernetes-shaped API server (``tests/support/fake_kube_api``) in a child
process of its own. This module starts and stops them (``Stack``, ``KubeAPIProcess``, ``Process``), reads their CPU
seconds from ``/proc/<pid>/stat`` (``proc_table``, ``descendants``, ``seconds``), and checks afterwards that every
call sent was stored and the logs are free of exceptions; the client and the phases live in ``driver`` and
``measure``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import PY, REPO, recreate_database, server_modules
from tests.support.processes import Process, free_port

# --- processes and their CPU -----------------------------------------------------------------------------------------

TICK = os.sysconf("SC_CLK_TCK")
DATABASE_PREFIX = os.environ.get("BENCH_COST_DATABASE_PREFIX", "schedlens_bench_cost")
"""Scratch databases ``<prefix>_<nodes>_<variant>``, created and dropped by each run (``make bench`` included)."""
KUBE_API = "Kubernetes-shaped API server"
"""The tests' API server (Python), each stack's own: what schedlens's requests (the Bindings, the ``Explained``
Events) cost it, beside what the no-op extender's cost it. Not kube-apiserver's or etcd's CPU, which only a real
control plane shows; reported beside the stack's own processes, never in its total."""


def proc_table() -> dict[int, tuple[int, int, int]]:
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


def descendants(table_: dict[int, tuple[int, int, int]], pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for child, (parent, _, _) in table_.items():
        children.setdefault(parent, []).append(child)
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(children.get(child, []))
    return sorted(found)


def seconds(table_: dict[int, tuple[int, int, int]], pids: Iterable[int]) -> float:
    """CPU seconds of ``pids`` so far, with the children they reaped (a dead worker stays in its parent's sum)."""
    return sum(table_[p][1] + table_[p][2] for p in pids if p in table_) / TICK


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
    from tests.support.fake_kube_api import FakeKubeAPI
    from tests.support.fake_kube_api.http_handler import RequestHandler

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
    """``tests/support/fake_kube_api`` in a child process, so its threads share no GIL with the client."""

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

    def cpu_seconds(self, procs: dict[int, tuple[int, int, int]]) -> float:
        pid = self._process.pid
        return seconds(procs, [pid, *descendants(procs, pid)]) if pid is not None else 0.0

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


class Stack:
    """schedlens as deployed, for one variant: gunicorn (the verbs), ``ingest_spool --follow``, ``watch_placements``
    (as ``make serve`` and the chart's workers run it), its database."""

    explains = True
    """Its ingester writes an ``Explained`` Event per bind (unless ``SCHEDLENS_POD_EVENTS`` says otherwise): the
    drain waits for them."""

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
        self.workloads = int(extra_env.pop("workloads", "0"))
        modules = server_modules(checkout)
        assert modules is not None, checkout  # parse_variant checked it
        settings = modules["settings"]  # the checkout's own, not this process's
        self.kube = KubeAPIProcess()
        kubeconfig = self.kube.write_kubeconfig(workdir / "kubeconfig")
        self.database = database
        if database_url is None:
            assert database is not None
            database_url = recreate_database(database)
            migrate_env = {
                **os.environ,
                "DJANGO_SETTINGS_MODULE": settings,
                "DATABASE_URL": database_url,
                "SCHEDLENS_INGEST_IN_PROCESS": "false",
            }
            subprocess.run(
                [str(checkout / PY), "manage.py", "migrate", "--verbosity", "0"],
                cwd=checkout,
                env=migrate_env,
                check=True,
            )
        self.database_url = database_url
        metrics = workdir / "prometheus-multiproc"
        metrics.mkdir(exist_ok=True)
        self.port = free_port()
        self.env = {
            "DJANGO_SETTINGS_MODULE": settings,
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
        gunicorn = [str(checkout / ".venv" / "bin" / "gunicorn"), "--config", modules["gunicorn_conf"]]
        self.gunicorn = Process(
            [*gunicorn, "--no-control-socket", modules["wsgi"]],
            self.env,
            workdir / "gunicorn.log",
            checkout,
        )
        self.ingester = Process(
            [str(checkout / PY), "manage.py", "ingest_spool", "--follow"], self.env, workdir / "ingest.log", checkout
        )
        self.watcher = Process(
            [str(checkout / PY), "manage.py", "watch_placements"], self.env, workdir / "watch.log", checkout
        )
        self._wait_ready()
        self.prefix = "/extender/default"
        self.worker_pids: list[int] = []
        self.sent = 0
        """Requests sent to this schedlens so far: each must end up as a stored call."""

    def _wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for process in (self.gunicorn, self.ingester, self.watcher):
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
        procs = proc_table()
        workers = [p for p in descendants(procs, self.gunicorn.pid) if procs[p][0] == self.gunicorn.pid]
        if not self.worker_pids:
            self.worker_pids = workers
        out = {"gunicorn master": procs[self.gunicorn.pid][1] / TICK if self.gunicorn.pid in procs else 0.0}
        # A worker gunicorn had to restart would show as a new pid: its predecessor is in the master's cutime.
        out["gunicorn master"] += procs.get(self.gunicorn.pid, (0, 0, 0))[2] / TICK
        for number, pid in enumerate(self.worker_pids, 1):
            out[f"gunicorn worker {number}"] = seconds(procs, [pid, *descendants(procs, pid)])
        out["ingester"] = procs[self.ingester.pid][1] / TICK if self.ingester.pid in procs else 0.0
        ingest_children = descendants(procs, self.ingester.pid)
        out["ingester's preparing processes"] = (
            seconds(procs, ingest_children) + procs.get(self.ingester.pid, (0, 0, 0))[2] / TICK
        )
        out["placement watcher"] = seconds(procs, [self.watcher.pid, *descendants(procs, self.watcher.pid)])
        out["PostgreSQL backends"] = seconds(procs, backends)
        out[KUBE_API] = self.kube.cpu_seconds(procs)
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
        for process in (self.gunicorn, self.ingester, self.watcher):
            text = process.log.read_text(errors="replace") if process.log.exists() else ""
            raised = re.findall(r"^(?:[\w.]+(?:Error|Exception)): .*$", text, re.M)
            if raised:
                problems.append(f"{process.log.name}: {len(raised)} exceptions, the last: {raised[-1][:200]}")
        return problems

    def backends(self) -> list[int]:
        """The PostgreSQL backends connected to this stack's database (the ingester's, its preparing processes', the
        placement watcher's)."""
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
        self.watcher.stop()
        self.kube.stop()
        if drop and self.database is not None:
            with contextlib.suppress(Exception):
                recreate_database(self.database, drop_only=True)
