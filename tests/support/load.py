"""A paced kube-scheduler-like load: the simulator's client, on a bounded schedule, recording every call.

Pod ``i`` is started at ``start + i / rate`` (never earlier; later when the server is slow, which shows up as
lag); the run stops by itself after ``duration`` seconds or ``pods`` pods, whichever comes first, or when
``stop`` is set. Each thread has its own keep-alive connection, like kube-scheduler's client, and its own
seeded pods, so a run is reproducible. With ``connections=2`` each thread keeps two keep-alive connections and
takes them in turn, call after call, as kube-scheduler's pool hands out its idle connections: behind a
per-connection balancer a pod's filter and prioritize then reach different replicas. Every call is kept (verb,
pod UID, HTTP status, seconds) so a test can compare what was asked with what the database holds afterwards.

Nothing here imports pytest or Django.
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from scheduler_core.cli.simulator import (
    ExtenderCallError,
    ExtenderClient,
    KubeSchedulerSimulator,
    SyntheticCluster,
    make_pod,
)
from tests.support.processes import wait_for

TRANSPORT_ERROR = 0
"""The status recorded for a call that got no HTTP answer at all."""


@dataclass(frozen=True, slots=True)
class Call:
    thread: int
    verb: str
    uid: str
    status: int
    seconds: float


class _Uid(msgspec.Struct):
    uid: str = ""


class _Meta(msgspec.Struct):
    metadata: _Uid = msgspec.field(default_factory=_Uid)


class _Args(msgspec.Struct):
    Pod: _Meta | None = None
    PodUID: str = ""


_uid_of = msgspec.json.Decoder(_Args)


class RecordingClient(ExtenderClient):
    """:class:`ExtenderClient` that keeps every call's verb, pod, status and latency.

    ``connections``: keep-alive connections held, each call on the next one in turn (one: the base client's).
    """

    def __init__(
        self, url_prefix: str, thread: int, calls: list[Call], timeout: float = 5.0, connections: int = 1
    ) -> None:
        super().__init__(url_prefix, timeout=timeout)
        self.thread = thread
        self.calls = calls
        self._pool: list[http.client.HTTPConnection | None] = [None] * connections
        self._turn = 0

    def _connection(self) -> http.client.HTTPConnection:
        if len(self._pool) == 1:
            return super()._connection()
        conn = self._pool[self._turn]
        if conn is None:
            conn = self._pool[self._turn] = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            self.connections_opened += 1
        return conn

    def _forget(self, conn: http.client.HTTPConnection) -> None:
        conn.close()
        if len(self._pool) == 1:
            self._conn = None
        else:
            self._pool[self._turn] = None

    def connect_all(self) -> None:
        """Open every connection of the pool now, one after the other (a balancer assigning each new connection
        to the next replica then gives them consecutive replicas)."""
        for turn in range(len(self._pool)):
            self._turn = turn
            self._connection().connect()
        self._turn = 0

    def close(self) -> None:
        super().close()
        for conn in self._pool:
            if conn is not None:
                conn.close()
        self._pool = [None] * len(self._pool)

    def call(self, verb: str, body: bytes) -> Any:
        args = _uid_of.decode(body)
        uid = args.PodUID or (args.Pod.metadata.uid if args.Pod is not None else "")
        headers = {"Content-Type": "application/json", "Accept-Encoding": "gzip", "User-Agent": "Go-http-client/1.1"}
        started = time.perf_counter()
        status, data = TRANSPORT_ERROR, b""
        try:
            for attempt in (1, 2):  # Go retries a request on a reused connection that was closed before it was sent
                conn = self._connection()
                try:
                    conn.request("POST", f"{self.base_path}/{verb}", body=body, headers=headers)
                    response = conn.getresponse()
                    status, data = response.status, response.read()
                    break
                except (http.client.HTTPException, ConnectionError, TimeoutError) as exc:
                    self._forget(conn)
                    if attempt == 2:
                        raise ExtenderCallError(f"{verb}: {exc}") from exc
        finally:
            self.calls.append(Call(self.thread, verb, uid, status, time.perf_counter() - started))
            self._turn = (self._turn + 1) % len(self._pool)
        if status != 200:
            raise ExtenderCallError(f"failed {verb} with extender, code {status}: {data[:200]!r}")
        return msgspec.json.decode(data)


@dataclass
class LoadResult:
    calls: list[Call]
    pods: int
    errors: list[str]
    seconds: float
    max_lag_seconds: float
    """How late the latest-started pod began against its slot in the schedule."""
    uids_by_thread: dict[int, list[str]] = field(default_factory=dict)

    @property
    def non_2xx(self) -> list[Call]:
        return [c for c in self.calls if not 200 <= c.status < 300]

    def latency(self, quantile: float, verb: str | None = None) -> float:
        values = sorted(c.seconds for c in self.calls if verb is None or c.verb == verb)
        if not values:
            return 0.0
        return values[min(len(values) - 1, int(quantile * len(values)))]


class PacedLoad:
    """Runs in background threads (``start``/``join``) or in the caller's (``run``)."""

    def __init__(
        self,
        url_prefix: str,
        cluster: SyntheticCluster,
        *,
        rate: float,
        duration: float | None = None,
        pods: int | None = None,
        threads: int = 1,
        seed: int = 20,
        node_cache_capable: bool = True,
        connections: int = 1,
    ) -> None:
        if duration is None and pods is None:
            raise ValueError("a load needs a duration or a number of pods: it must stop by itself")
        self.url_prefix = url_prefix
        self.cluster = cluster
        self.rate = rate
        self.duration = duration
        self.max_pods = pods
        self.thread_count = threads
        self.seed = seed
        self.node_cache_capable = node_cache_capable
        self.connections = connections
        self.stop = threading.Event()
        self.started = 0
        """Pods started so far (all threads)."""
        self._counter: Iterator[int] = itertools.count()
        self._lock = threading.Lock()
        self._calls: list[list[Call]] = [[] for _ in range(threads)]
        self._uids: dict[int, list[str]] = {i: [] for i in range(threads)}
        self._errors: list[str] = []
        self._lag = 0.0
        self._threads: list[threading.Thread] = []
        self._began = 0.0
        self._ended = 0.0

    def start(self) -> PacedLoad:
        self._began = time.monotonic()
        for index in range(self.thread_count):
            thread = threading.Thread(target=self._work, args=(index,), name=f"load-{index}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def join(self, timeout: float | None = None) -> LoadResult:
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if any(thread.is_alive() for thread in self._threads):
            self.stop.set()
            raise AssertionError("the load did not stop by itself in time")
        self._ended = time.monotonic()
        calls = [call for per_thread in self._calls for call in per_thread]
        return LoadResult(calls, self.started, list(self._errors), self._ended - self._began, self._lag, self._uids)

    def run(self) -> LoadResult:
        return self.start().join()

    def wait_started(self, pods: int, *, timeout: float = 60.0) -> None:
        """Wait until ``pods`` pods (all threads) have started."""
        wait_for(lambda: self.started >= pods, what=f"{pods} pods scheduled", timeout=timeout)

    def calls_so_far(self) -> int:
        return sum(len(per_thread) for per_thread in self._calls)

    def _work(self, index: int) -> None:
        client = RecordingClient(self.url_prefix, index, self._calls[index], connections=self.connections)
        if self.connections > 1:
            # Under the lock: no other thread connects in between, so a round-robin balancer spreads this thread's
            # connections over consecutive replicas and each of its pods is answered by more than one.
            with self._lock, contextlib.suppress(OSError):
                client.connect_all()  # a connection that failed here is opened again at its first call
        simulator = KubeSchedulerSimulator(
            client, self.cluster, node_cache_capable=self.node_cache_capable, seed=self.seed + index
        )
        rng = random.Random(self.seed * 1000 + index)
        end = None if self.duration is None else self._began + self.duration
        try:
            while not self.stop.is_set():
                with self._lock:
                    slot_index = next(self._counter)
                    if self.max_pods is not None and slot_index >= self.max_pods:
                        return
                slot = self._began + slot_index / self.rate
                if end is not None and slot >= end:
                    return
                # Pacing, not waiting for an outcome: the schedule says when this pod starts.
                if self.stop.wait(max(0.0, slot - time.monotonic())):
                    return
                lag = time.monotonic() - slot
                pod = make_pod(rng)
                with self._lock:
                    self.started += 1
                    self._lag = max(self._lag, lag)
                self._uids[index].append(pod["metadata"]["uid"])
                result = simulator.schedule(pod)
                if result.error:
                    with self._lock:
                        self._errors.append(f"{result.pod}: {result.error}")
        finally:
            client.close()
