"""The cost-per-pod benchmark's measurements: CPU per process in each phase, the concurrent run, the HTTP floor.

Charging the web processes' CPU to a verb takes phases (filter -> prioritize with binds held back, then the binds,
then the drain), each read from ``/proc`` before and after on every stack of an A/B run, rounds alternating the
stacks; then a concurrent run at kube-scheduler's own pace and an empty-WSGI floor under the same gunicorn. This
module holds those procedures (``measure_phases``, ``measure_concurrent``, ``http_floor``), what they return
(``Phases``, ``Concurrent``, ``SizeResult``), the grouping of processes (``WEB``, ``INGEST``, ``POSTGRES``,
``group``) and the optional py-spy ``Profiler``; it starts no stack itself (``stack``) and formats nothing
(``report``).
"""

from __future__ import annotations

import os
import random
import re
import secrets
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from benchmarks.common import REPO
from benchmarks.cost.driver import Candidates, Loop, Pod, make_pods, post_binds, schedule
from benchmarks.cost.noop import PROCESS as NOOP_EXTENDER
from benchmarks.cost.noop import NoopStack
from benchmarks.cost.stack import KUBE_API, Process, Stack, descendants, free_port, proc_table, seconds
from benchmarks.load.client import BindProcess, Connection
from scheduler_core.cli.simulator import SyntheticCluster

WEB = ("gunicorn master", "gunicorn worker", NOOP_EXTENDER)
"""The processes answering the verbs: charged to filter + prioritize in phase 1, to the bind in phase 2."""
INGEST = ("ingester",)
WATCHER = ("placement watcher",)
POSTGRES = "PostgreSQL backends"
API = (KUBE_API,)
AnyStack = Stack | NoopStack


def group(cpu: dict[str, float], prefixes: Sequence[str]) -> float:
    return sum(v for k, v in cpu.items() if k.startswith(tuple(prefixes)))


def _delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}


def _sum(*parts: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in parts:
        for k, v in part.items():
            out[k] = out.get(k, 0.0) + v
    return out


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
        return group(phase, prefixes) / max(1, self.pods) * 1000

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
            "watcher": self.per_pod(self.total, WATCHER),
            "api server": self.per_pod(self.total, API),
        }


def _wait_drained(stacks: Sequence[AnyStack], events: dict[str, int], timeout: float) -> float:
    """Until every spool is empty and each stack's API server has had ``events[label]`` Events in all (or they
    stopped arriving: a full queue drops them, with pod Events off none come); returns the seconds waited. A stack
    that writes no Events (the no-op extender) is not waited for."""
    started = time.monotonic()
    deadline = started + timeout
    while time.monotonic() < deadline and any(s.spool_left() for s in stacks):
        time.sleep(0.25)  # waiting for the ingesters, bounded by the deadline
    stacks = [s for s in stacks if s.explains]
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


def _idle(stacks: Sequence[AnyStack], seconds: float) -> dict[str, dict[str, float]]:
    before = {s.label: s.cpu() for s in stacks}
    time.sleep(seconds)
    return {s.label: {k: v / seconds * 1000 for k, v in _delta(s.cpu(), before[s.label]).items()} for s in stacks}


def _warm_up(stack: AnyStack, pods: Sequence[Pod], threads: int) -> None:
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
    stacks: Sequence[AnyStack],
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
        _warm_up(stack, make_pods(cluster, 24, rng, candidates[stack.label], stack.workloads), bind_threads)
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
            batch = make_pods(cluster, per_round, rng, candidates[stack.label], stack.workloads)
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
            result.rounds_verbs_ms.append(group(verbs, WEB) / len(batch) * 1000)
            result.rounds_bind_ms.append(group(bound, WEB) / max(1, len(binds)) * 1000)
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
    stacks: Sequence[AnyStack],
    cluster: SyntheticCluster,
    *,
    pods: int,
    seed: int = 23,
    profiler: Profiler | None = None,
) -> list[Concurrent]:
    rng = random.Random(seed)
    batches = {
        s.label: make_pods(
            cluster, pods, rng, Candidates(cluster.node_names, rng, fixed=s.fixed_candidates), s.workloads
        )
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
            if isinstance(stack, Stack):
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


# --- a run's results, and the HTTP floor ------------------------------------------------------------------------------


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
    noop: str | None = None
    """The label of the no-op extender's variant (``extender=noop``), which the others' totals are read against."""


def http_floor(cluster: SyntheticCluster, workdir: Path, *, requests: int, bind_threads: int) -> dict[str, float]:
    """CPU ms per request of the web processes when the verbs' requests reach an empty WSGI app under the same
    gunicorn configuration (``benchmarks/load/floor_wsgi.py``: body read, ``{}`` answered, before Django): what any verb
    pays before schedlens does anything. Filter-sized bodies serially on one connection, bind bodies on the pool."""
    port = free_port()
    env = {
        "DJANGO_SETTINGS_MODULE": "benchmarks.load.floor_settings",
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DATABASE_URL": "sqlite:///:memory:",
        "SCHEDLENS_SPOOL_DIR": str(workdir / "floor-spool"),
        "SCHEDLENS_INGEST_IN_PROCESS": "false",
        "PORT": str(port),
        "WEB_WORKERS": os.environ.get("WEB_WORKERS", "2"),
        "WEB_THREADS": os.environ.get("WEB_THREADS", "8"),
    }
    gunicorn = [str(REPO / ".venv" / "bin" / "gunicorn"), "--config", "python:config.gunicorn_conf"]
    server = Process(
        [*gunicorn, "--no-control-socket", "benchmarks.load.floor_wsgi:application"], env, workdir / "floor.log", REPO
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
            procs = proc_table()
            return seconds(procs, [server.pid, *descendants(procs, server.pid)])

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
