"""The placement watcher's binds into the herd estimate shared through Redis (``SCHEDLENS_TRAFFIC_BACKEND=redis``).

kube-scheduler's own binds never reach the ``bind`` verb, so the watcher appends each pod it sees bound to the bind
log every replica's verbs read (``dashboard.traffic.services.herd_record_bind``). The watch threads must not wait on
Redis: :meth:`HerdFeed.put` only enqueues, and one thread of its own appends, keeping a bind through a Redis outage
for as long as it still weighs on the estimate. In ``inprocess`` mode the verbs' binds live in each web process's
memory, out of this process's reach: there each web process watches the bound pods itself (``dashboard.runtime``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

import redis
from django.conf import settings

from dashboard.placements.pump import PlacementPump
from dashboard.selectors.profiles import profile_configuration
from dashboard.traffic.services import herd_record_bind
from dashboard.traffic.view import herd_horizon
from scheduler_core.kube.placement_watch import BindRecorder, HerdSink, Observation, Sink, fan_out

log = logging.getLogger(__name__)

QUEUE_SIZE = 10_000


class HerdFeed:
    """Bound observations → ``record`` (the shared bind log), in a thread of its own."""

    def __init__(
        self,
        record: BindRecorder = herd_record_bind,
        *,
        horizon_seconds: float,
        retry_interval: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._record = record
        self._horizon = horizon_seconds
        self._retry_interval = retry_interval
        self._clock = clock
        self._queue: queue.Queue[tuple[str, str, float, str]] = queue.Queue(maxsize=QUEUE_SIZE)
        self._sink = HerdSink(self._enqueue, horizon_seconds=horizon_seconds, clock=clock)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.recorded = 0

    @classmethod
    def from_settings(cls) -> HerdFeed | None:
        """The feed for ``SCHEDLENS_TRAFFIC_BACKEND``: None in ``inprocess`` mode (nothing here reaches the verbs)."""
        if settings.SCHEDLENS_TRAFFIC_BACKEND != "redis":
            return None
        refresh = settings.SCHEDLENS_TRAFFIC_REFRESH_SECONDS
        return cls(horizon_seconds=herd_horizon(profile_configuration().required(), refresh))

    def put(self, observation: Observation) -> None:
        """The watcher's sink: never blocks, never touches Redis."""
        self._sink(observation)

    def _enqueue(self, *, node: str, pod: str, at: float, name: str = "") -> None:
        try:
            self._queue.put_nowait((node, pod, at, name))
        except queue.Full:
            log.warning("the herd feed's queue is full (%d); the bind of %s is not counted", QUEUE_SIZE, pod)

    def start(self) -> HerdFeed:
        self._thread = threading.Thread(target=self._run, name="schedlens-herd-feed", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def join(self, timeout: float = 10.0) -> bool:
        """Wait until every bind put so far is appended or given up (tests); False on timeout."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)  # polled against the deadline above
        return True

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                node, pod, at, name = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                self._append(node, pod, at, name)
            finally:
                self._queue.task_done()

    def _append(self, node: str, pod: str, at: float, name: str) -> None:
        # Retried while the bind still weighs on the estimate; past the horizon it no longer matters to anyone.
        while not self._stop.is_set():
            try:
                self._record(node=node, pod=pod, at=at, name=name)
                self.recorded += 1
                return
            except redis.RedisError as exc:
                if self._clock() - at > self._horizon:
                    log.warning("redis unavailable (%s): the bind of %s to %s is not counted", exc, pod, node)
                    return
                self._stop.wait(self._retry_interval)


def watcher_sink(pump: PlacementPump, herd: HerdFeed | None) -> Sink:
    """What ``watch_placements`` hands the watcher: the pump (the database), and the herd feed when there is one."""
    return pump.put if herd is None else fan_out(pump.put, herd.put)
