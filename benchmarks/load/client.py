"""The benchmark's client: kube-scheduler's side of the extender protocol, and the request bodies it sends.

Like ``pkg/scheduler/extender.go`` and ``schedule_one.go``: one keep-alive connection carries filter then
prioritize for one pod at a time (kube-scheduler's scheduling loop is serial), and binds run concurrently on a
small pool of their own keep-alive connections (kube-scheduler binds in a goroutine per pod). Bodies are built
from the simulator's cluster (``scheduler_core.cli.simulator``: NodeNames or full Node objects) before timing starts;
a call's time is from sending the request to reading the last byte of the answer on loopback (an upper bound of
server time).
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import msgspec

from scheduler_core.cli.simulator import SyntheticCluster, make_pod

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

    def filter_body(self, pod_json: bytes, names: bool, window: list[str] | None = None) -> bytes:
        """The filter's body: every node's name (``window``: those names instead), or every Node object."""
        if names:
            listed = self.names_json if window is None else msgspec.json.encode(window)
            return b'{"Pod":' + pod_json + b',"Nodes":null,"NodeNames":' + listed + b"}"
        return b'{"Pod":' + pod_json + b',"Nodes":{"metadata":{},"items":' + self.items_json + b'},"NodeNames":null}'
