"""A load client that behaves like kube-scheduler, against schedlens under gunicorn (recording on).

Like ``pkg/scheduler/extender.go`` and ``schedule_one.go``: one keep-alive connection carries filter then
prioritize for one pod at a time (kube-scheduler's scheduling loop is serial), and binds run concurrently on a
small pool of their own keep-alive connections (kube-scheduler binds in a goroutine per pod). Bodies are built
from the simulator's cluster (``scheduler_core.simulator``: 100 / 1000 / 5000 nodes, NodeNames or full Node
objects) before timing starts; a call's time is from sending the request to reading the last byte of the answer
on loopback (an upper bound of server time), and the verb's own time comes from its spooled record.

Floors in the same run, on the same bodies: the generic msgspec (and orjson) decode, and an empty Django view
behind the production middleware under the same gunicorn configuration (``benchmarks/floor_urls.py``).

    .venv/bin/python benchmarks/load.py latency --nodes 100 1000 5000
    .venv/bin/python benchmarks/load.py sustained --nodes 1000 --seconds 600
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import REPO, migrate, p50, percentile, recreate_database
from scheduler_core.simulator import SyntheticCluster, make_cluster, make_pod

BIND_THREADS = 4
JSON_HEADERS = {"Content-Type": "application/json", "User-Agent": "Go-http-client/1.1", "Accept-Encoding": "gzip"}


class _Items(msgspec.Struct):
    items: list[msgspec.Raw]


class _FilterAnswer(msgspec.Struct):
    Nodes: _Items | None = None
    NodeNames: list[str] | None = None
    Error: str = ""


class _Host(msgspec.Struct):
    Host: str
    Score: int


_filter_answer = msgspec.json.Decoder(_FilterAnswer)
_priorities = msgspec.json.Decoder(list[_Host])
_score = attrgetter("Score")


class Connection:
    """One keep-alive HTTP/1.1 connection that counts how often it had to (re)connect."""

    def __init__(self, host: str, port: int, counter: list[int], lock: threading.Lock) -> None:
        self.host, self.port = host, port
        self._conn: http.client.HTTPConnection | None = None
        self._counter, self._lock = counter, lock
        self.opened = 0

    def post(self, path: str, body: bytes) -> tuple[int, bytes, float]:
        for attempt in (1, 2):
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
                self.opened += 1
                with self._lock:
                    self._counter[0] += 1
            started = time.perf_counter()
            try:
                self._conn.request("POST", path, body=body, headers=JSON_HEADERS)
                response = self._conn.getresponse()
                data = response.read()
            except (http.client.HTTPException, ConnectionError):
                self._conn.close()
                self._conn = None
                if attempt == 2:
                    raise
                continue
            return response.status, data, (time.perf_counter() - started) * 1000
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


@dataclass
class Run:
    filter_ms: list[float] = field(default_factory=list)
    prioritize_ms: list[float] = field(default_factory=list)
    bind_ms: list[float] = field(default_factory=list)
    floor_ms: list[float] = field(default_factory=list)
    pods: int = 0
    requests: int = 0
    errors: int = 0
    connections: int = 0
    reconnections: int = 0
    """Connections opened again by a client connection that had one already (keep-alive failing)."""
    seconds: float = 0.0
    first_error: str = ""


class Scheduler:
    """kube-scheduler's side of the protocol, for one profile of one extender."""

    def __init__(self, url: str, profile: str = "default") -> None:
        host_port = url.split("://", 1)[1]
        host, port = host_port.split(":")
        self.host, self.port = host, int(port)
        self.prefix = f"/extender/{profile}"
        self._count = [0]
        self._lock = threading.Lock()
        self.main = Connection(self.host, self.port, self._count, self._lock)
        self.binds = BindProcess(self.host, self.port, self.prefix)
        self.run = Run()

    @property
    def connections(self) -> int:
        return self._count[0]

    def _error(self, message: str) -> None:
        with self._lock:
            self.run.errors += 1
            self.run.first_error = self.run.first_error or message

    def schedule(self, pod: dict[str, Any], filter_body: bytes, pod_json: bytes, names: bool) -> None:
        """filter → prioritize (two or more feasible nodes) → bind in the background, like one scheduling cycle."""
        run = self.run
        status, data, took = self.main.post(f"{self.prefix}/filter", filter_body)
        run.requests += 1
        run.filter_ms.append(took)
        if status != 200:
            self._error(f"filter: {status} {data[:200]!r}")
            return
        answer = _filter_answer.decode(data)
        if answer.Error:
            self._error(f"filter: {answer.Error}")
            return
        if names:
            feasible = answer.NodeNames or []
            candidates = msgspec.json.encode(feasible)
            body = b'{"Pod":' + pod_json + b',"Nodes":null,"NodeNames":' + candidates + b"}"
        else:
            items = answer.Nodes.items if answer.Nodes is not None else []
            feasible = [_node_name.decode(raw).metadata.name for raw in items]
            nodes = b'{"metadata":{},"items":' + msgspec.json.encode(items) + b"}"
            body = b'{"Pod":' + pod_json + b',"Nodes":' + nodes + b',"NodeNames":null}'
        run.pods += 1
        if not feasible:
            return
        chosen = feasible[0]
        if len(feasible) > 1:
            status, data, took = self.main.post(f"{self.prefix}/prioritize", body)
            run.requests += 1
            run.prioritize_ms.append(took)
            if status != 200:
                self._error(f"prioritize: {status} {data[:200]!r}")
                return
            hosts = _priorities.decode(data)
            chosen = max(hosts, key=_score).Host if hosts else chosen
        meta = pod["metadata"]
        bind = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": chosen}
        self.binds.send(msgspec.json.encode(bind))

    def close(self) -> None:
        binds = self.binds.finish()
        run = self.run
        run.bind_ms.extend(binds["bind_ms"])
        run.requests += binds["requests"]
        if binds["errors"]:
            run.errors += binds["errors"]
            run.first_error = run.first_error or binds["first_error"]
        run.connections = self.connections + binds["connections"]
        run.reconnections = max(0, self.main.opened - 1) + binds["reconnections"]
        self.main.close()


class BindProcess:
    """Binds posted from a child process, on a pool of keep-alive connections, while the loop goes on.

    kube-scheduler binds in a goroutine per pod, in parallel with the next scheduling cycle. Bind threads in
    this (Python) client would hold its GIL while they parse answers, and the next filter's round trip would
    count that wait as if it were the server's time; from a child process the loop only writes each body to a
    pipe.
    """

    def __init__(self, host: str, port: int, prefix: str) -> None:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        bodies_in, self._bodies_out = context.Pipe(duplex=False)  # (receiving end, sending end)
        self._results_in, results_out = context.Pipe(duplex=False)
        self._process = context.Process(
            target=_bind_forever, args=(host, port, prefix, bodies_in, results_out), daemon=True
        )
        self._process.start()

    def send(self, body: bytes) -> None:
        self._bodies_out.send_bytes(body)

    def finish(self) -> dict[str, Any]:
        self._bodies_out.send_bytes(b"")
        results: dict[str, Any] = self._results_in.recv()
        self._process.join(timeout=30)
        return results


def _bind_forever(host: str, port: int, prefix: str, bodies: Any, results: Any) -> None:
    """The bind process: post each body received until an empty one, then send back what happened."""
    lock = threading.Lock()
    count = [0]
    local = threading.local()
    conns: list[Connection] = []
    out: dict[str, Any] = {"bind_ms": [], "requests": 0, "errors": 0, "first_error": ""}

    def bind(body: bytes) -> None:
        conn: Connection | None = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = Connection(host, port, count, lock)
            with lock:
                conns.append(conn)
        try:
            status, data, took = conn.post(f"{prefix}/bind", body)
            error = "" if status == 200 and not json.loads(data).get("Error") else f"bind: {status} {data[:200]!r}"
        except (http.client.HTTPException, ConnectionError) as exc:
            status, took, error = 0, 0.0, f"bind: {exc}"
        with lock:
            if status:
                out["requests"] += 1
                out["bind_ms"].append(took)
            if error:
                out["errors"] += 1
                out["first_error"] = out["first_error"] or error

    with ThreadPoolExecutor(BIND_THREADS, thread_name_prefix="bind") as pool:
        while body := bodies.recv_bytes():
            pool.submit(bind, body)
    out["connections"] = count[0]
    out["reconnections"] = sum(max(0, c.opened - 1) for c in conns)
    for conn in conns:
        conn.close()
    results.send(out)


class _Meta(msgspec.Struct):
    name: str = ""


class _NodeName(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)


_node_name = msgspec.json.Decoder(_NodeName)


class Bodies:
    """Request bodies built once per cluster, pods made by the simulator's generator."""

    def __init__(self, cluster: SyntheticCluster, seed: int = 1) -> None:
        self.names_json = msgspec.json.encode(cluster.node_names)
        self.items_json = msgspec.json.encode(cluster.nodes)
        self.rng = random.Random(seed)

    def pod(self) -> tuple[dict[str, Any], bytes]:
        pod = make_pod(self.rng)
        return pod, msgspec.json.encode(pod)

    def filter_body(self, pod_json: bytes, names: bool) -> bytes:
        if names:
            return b'{"Pod":' + pod_json + b',"Nodes":null,"NodeNames":' + self.names_json + b"}"
        return b'{"Pod":' + pod_json + b',"Nodes":{"metadata":{},"items":' + self.items_json + b'},"NodeNames":null}'


# --- servers ------------------------------------------------------------------------------------------------


def start_server(workdir: Path, cluster: SyntheticCluster, *, database_url: str, ingest: bool, floor: bool = False):
    from tests.live_server import LiveServer

    env = server_env(workdir, cluster, database_url=database_url, ingest=ingest)
    if floor:
        return _FloorServer(env)
    return LiveServer(env, workers=int(os.environ.get("WEB_WORKERS", "2")))


def server_env(workdir: Path, cluster: SyntheticCluster, *, database_url: str, ingest: bool) -> dict[str, str]:
    """The environment of the benchmark's schedlens processes: demo profiles, the simulator's cluster, a spool."""
    workdir.mkdir(parents=True, exist_ok=True)
    cluster_file = workdir / "cluster.json"
    if not cluster_file.exists():
        cluster_file.write_bytes(msgspec.json.encode(cluster.document()))
    env = {
        "DATABASE_URL": database_url,
        "SCHEDLENS_SPOOL_DIR": str(workdir / "spool"),
        "SCHEDLENS_INGEST_IN_PROCESS": "true" if ingest else "false",
        "SCHEDLENS_BIND_MODE": "simulated",
        "SCHEDLENS_CONFIG": str(REPO / "deploy" / "profiles.demo.yaml"),
        "SCHEDLENS_CLUSTER_FILE": str(cluster_file),
        "SCHEDLENS_CLUSTER_SOURCE": "file",
        "PROMETHEUS_URL": "",
        "SCHEDLENS_TRAFFIC_BACKEND": "inprocess",
    }
    return env


class _FloorServer:
    """gunicorn with the production configuration serving only the empty view (``benchmarks/floor_urls.py``)."""

    def __init__(self, env: dict[str, str]) -> None:
        import subprocess

        from tests.live_server import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        full = {**os.environ, **env, "PORT": str(self.port), "DJANGO_SETTINGS_MODULE": "benchmarks.floor_settings"}
        gunicorn = Path(sys.executable).with_name("gunicorn")
        self.process = subprocess.Popen(
            [str(gunicorn), "--config", "python:dashboard.gunicorn_conf", "benchmarks.floor_wsgi:application"],
            cwd=REPO,
            env=full,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
                conn.request("POST", "/floor/", body=b"{}", headers=JSON_HEADERS)
                if conn.getresponse().status == 200:
                    conn.close()
                    return
            except (ConnectionError, OSError):
                time.sleep(0.05)  # polling for start-up, bounded by the deadline
        self.stop()
        raise RuntimeError("the floor server did not start")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


# --- latency --------------------------------------------------------------------------------------------------


def _spooled_durations(spool_dir: Path) -> dict[tuple[str, str], list[float]]:
    """The verbs' own time (``duration_ms`` of each spooled record), by (verb, node mode)."""
    import sqlite3

    from scheduler_core.record import decode_event

    out: dict[tuple[str, str], list[float]] = {}
    conn = sqlite3.connect(spool_dir / "spool.sqlite3")
    try:
        for (data,) in conn.execute("SELECT data FROM events"):
            event = decode_event(bytes(data))
            out.setdefault((event.verb, event.node_mode), []).append(event.duration_ms)
    finally:
        conn.close()
    return out


def decode_floor(body: bytes, repeat: int) -> dict[str, list[float]]:
    """Decoding the same body with msgspec alone (generic: every object built), and orjson when installed."""
    out: dict[str, list[float]] = {"msgspec": []}
    decoders: list[tuple[str, Any]] = [("msgspec", msgspec.json.decode)]
    try:
        import orjson

        decoders.append(("orjson", orjson.loads))
        out["orjson"] = []
    except ImportError:
        pass
    for _ in range(repeat):
        for label, decode in decoders:
            started = time.perf_counter()
            decode(body)
            out[label].append((time.perf_counter() - started) * 1000)
    return out


@dataclass
class LatencyResult:
    nodes: int
    mode: str
    run: Run
    verb_ms: dict[str, list[float]]
    floor_view_ms: list[float]
    decode_ms: dict[str, list[float]]
    body_bytes: int
    floor_wsgi_ms: list[float] = field(default_factory=list)
    """The same body to an empty WSGI app under the same gunicorn: the floor of the verbs' fast path."""


def latency(node_counts: list[int], pods_for: dict[tuple[int, str], int], workdir: Path) -> list[LatencyResult]:
    results: list[LatencyResult] = []
    for count in node_counts:
        cluster = make_cluster(count)
        bodies = Bodies(cluster)
        size_dir = workdir / f"latency-{count}"
        server = start_server(size_dir, cluster, database_url=f"sqlite:///{size_dir / 'db.sqlite3'}", ingest=False)
        floor = start_server(size_dir / "floor", cluster, database_url="sqlite:///:memory:", ingest=False, floor=True)
        try:
            for mode in ("names", "nodes"):
                pods = pods_for[(count, mode)]
                scheduler = Scheduler(server.url)
                floor_conn = Connection("127.0.0.1", floor.port, [0], threading.Lock())
                floor_times: list[float] = []
                wsgi_times: list[float] = []
                warm = [bodies.pod() for _ in range(3)]
                for pod, pod_json in warm:  # warm-up (not timed): first calls build per-process caches
                    scheduler.schedule(pod, bodies.filter_body(pod_json, mode == "names"), pod_json, mode == "names")
                scheduler.run = Run()
                started = time.perf_counter()
                for _ in range(pods):
                    pod, pod_json = bodies.pod()
                    body = bodies.filter_body(pod_json, mode == "names")
                    scheduler.schedule(pod, body, pod_json, mode == "names")
                    floor_times.append(floor_conn.post("/floor/", body)[2])
                    wsgi_times.append(floor_conn.post("/floor/wsgi", body)[2])
                scheduler.run.seconds = time.perf_counter() - started
                scheduler.close()
                floor_conn.close()
                _, sample_json = bodies.pod()
                sample = bodies.filter_body(sample_json, mode == "names")
                decode = decode_floor(sample, max(5, min(50, pods)))
                results.append(
                    LatencyResult(count, mode, scheduler.run, {}, floor_times, decode, len(sample), wsgi_times)
                )
                print(
                    f"{count:5d} nodes {mode:5s}: filter p50 {p50(scheduler.run.filter_ms):.2f} p99 "
                    f"{percentile(scheduler.run.filter_ms, 99):.2f}  prioritize p50 "
                    f"{p50(scheduler.run.prioritize_ms):.2f}"
                    f" p99 {percentile(scheduler.run.prioritize_ms or [0], 99):.2f}  floor view p50 "
                    f"{p50(floor_times):.2f}  floor wsgi p50 {p50(wsgi_times):.2f}  decode p50 "
                    f"{p50(decode['msgspec']):.2f}  errors {scheduler.run.errors}"
                    f" connections {scheduler.run.connections}",
                    flush=True,
                )
        finally:
            server.stop()
            floor.stop()
        durations = _spooled_durations(size_dir / "spool")
        for result in results:
            if result.nodes == count:
                result.verb_ms = {verb: durations.get((verb, result.mode), []) for verb in ("filter", "prioritize")}
    return results


# --- sustained ---------------------------------------------------------------------------------------------------


@dataclass
class SustainedResult:
    nodes: int
    seconds: float
    run: Run
    cycles_stored: int
    calls_stored: int
    drain_seconds: float
    spool_left: int


def _count(url: str, table: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # noqa: S608  (a constant)


def sustained(
    count: int, seconds: float, workdir: Path, database: str = "schedlens_bench_sustained"
) -> SustainedResult:
    """Pods/s for ``seconds`` at ``count`` nodes (NodeNames), ingest on; then every record counted in PostgreSQL.

    The deployed layout (``deploy/``): gunicorn answers and spools, a separate ``manage.py ingest_spool --follow``
    moves the records into PostgreSQL (an ingester thread inside a web process would share its GIL with the verbs).
    """
    from dashboard.spool import Spool
    from tests.faults.services import manage

    url = recreate_database(database)
    migrate(url)
    cluster = make_cluster(count)
    bodies = Bodies(cluster, seed=5)
    size_dir = workdir / f"sustained-{count}"
    server = start_server(size_dir, cluster, database_url=url, ingest=False)
    ingester = manage(
        ["ingest_spool", "--follow"],
        server_env(size_dir, cluster, database_url=url, ingest=False),
        size_dir / "ingest.log",
    )
    try:
        scheduler = Scheduler(server.url)
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            pod, pod_json = bodies.pod()
            scheduler.schedule(pod, bodies.filter_body(pod_json, True), pod_json, True)
        scheduler.close()
        scheduler.run.seconds = time.perf_counter() - started
        spool = Spool(size_dir / "spool")
        drain_started = time.perf_counter()
        calls = 0
        while time.perf_counter() - drain_started < 600:
            calls = _count(url, "dashboard_verbcall")
            if calls >= scheduler.run.requests and spool.depth() == 0:
                break
            time.sleep(0.5)  # waiting for the ingester, bounded
        drain = time.perf_counter() - drain_started
        left = spool.depth()
    finally:
        server.stop()
        ingester.stop()
    result = SustainedResult(
        count, seconds, scheduler.run, _count(url, "dashboard_schedulingcycle"), calls, drain, left
    )
    recreate_database(database, drop_only=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    lat = sub.add_parser("latency")
    lat.add_argument("--nodes", type=int, nargs="+", default=[100, 1000, 5000])
    lat.add_argument("--pods", type=int, default=200)
    sus = sub.add_parser("sustained")
    sus.add_argument("--nodes", type=int, default=1000)
    sus.add_argument("--seconds", type=float, default=60)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    workdir = Path(tempfile.mkdtemp(prefix="schedlens-load-"))
    if args.what == "latency":
        pods = {
            (n, m): args.pods if m == "names" else max(5, args.pods // (4 if n <= 1000 else 20))
            for n in args.nodes
            for m in ("names", "nodes")
        }
        latency(args.nodes, pods, workdir)
    else:
        result = sustained(args.nodes, args.seconds, workdir)
        run = result.run
        print(
            f"{result.nodes} nodes, {run.seconds:.0f} s: {run.pods} pods ({run.pods / run.seconds:.0f} pods/s), "
            f"{run.requests} requests, {run.errors} errors, {result.calls_stored} calls stored "
            f"({run.requests - result.calls_stored} missing), drain {result.drain_seconds:.0f} s; filter p50 "
            f"{p50(run.filter_ms):.2f} p99 {percentile(run.filter_ms, 99):.2f}, prioritize p50 "
            f"{p50(run.prioritize_ms):.2f} p99 {percentile(run.prioritize_ms, 99):.2f}"
        )


if __name__ == "__main__":
    main()
