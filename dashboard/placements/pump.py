"""Carries observations from the watcher threads into the database, in the thread that owns the connection.

The watcher threads only enqueue (they must never wait on PostgreSQL); :meth:`PlacementPump.run` records
them one by one and reconciles periodically. When the database is down an observation is kept and retried,
so an outage delays the record but loses nothing the process has seen (a restart relists anyway).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from django.db import DatabaseError, close_old_connections

from dashboard.placements.pending_events import pending_events_emit
from dashboard.placements.services import placements_reconcile, placements_record, placements_waiting_sync
from scheduler_core.kube.placement_watch import Observation, WaitingPod


class WaitingSource(Protocol):
    """The placement watcher's pods not bound yet (``PlacementWatcher``)."""

    def waiting(self) -> list[WaitingPod]: ...

    @property
    def waiting_version(self) -> int: ...

    @property
    def pods_synced(self) -> bool: ...


log = logging.getLogger(__name__)


class PlacementPump:
    def __init__(
        self, *, reconcile_interval: float = 5.0, retry_interval: float = 2.0, waiting_sync_interval: float = 1.0
    ) -> None:
        self._waiting: WaitingSource | None = None
        self._waiting_synced: tuple[int, bool] | None = None
        self._last_waiting_sync = 0.0
        self._queue: queue.Queue[Observation] = queue.Queue()
        self._retry: deque[Observation] = deque()
        self._reconcile_interval = reconcile_interval
        self._waiting_sync_interval = waiting_sync_interval
        self._retry_interval = retry_interval
        self._last_reconcile = 0.0
        self.recorded = 0
        self.failures = 0

    def keep_waiting(self, source: WaitingSource) -> None:
        """Keep the live pending list equal to ``source``'s unbound pods (synced whenever they change)."""
        self._waiting = source

    def put(self, observation: Observation) -> None:
        """The watcher's sink: never blocks, never touches the database."""
        self._queue.put(observation)

    @property
    def _wake_interval(self) -> float:
        """How long a step waits for an observation: a pending list owed a sync is not left for a reconcile."""
        return min(self._reconcile_interval, self._waiting_sync_interval)

    @property
    def pending(self) -> int:
        return self._queue.qsize() + len(self._retry)

    def run(self, stop: threading.Event) -> None:
        """Record observations until ``stop`` is set (then what is already queued is still recorded)."""
        while not stop.is_set():
            self.step(timeout=self._wake_interval)
        self.drain()

    def run_until(self, done: Callable[[], bool], *, timeout: float) -> bool:
        """Record until ``done()`` holds or ``timeout`` passes; for ``--once`` and tests. Returns ``done()``."""
        deadline = time.monotonic() + timeout
        while not done():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.step(timeout=min(remaining, self._wake_interval))
        return True

    def drain(self) -> None:
        """Record everything queued now (without waiting for more), then reconcile."""
        while True:
            try:
                observation = self._queue.get_nowait()
            except queue.Empty:
                break
            self._record(observation)
        self._sync_waiting(now=True)
        self._reconcile()

    def step(self, *, timeout: float) -> None:
        """Record one observation (waiting up to ``timeout`` for it), retry kept ones, reconcile when due."""
        if self._retry:
            retry = self._retry.popleft()
            if not self._record(retry):
                time.sleep(self._retry_interval)  # the database is down: do not spin on it
                return
        try:
            observation = self._queue.get(timeout=timeout)
        except queue.Empty:
            observation = None
        if observation is not None:
            self._record(observation)
        self._sync_waiting()
        if time.monotonic() - self._last_reconcile >= self._reconcile_interval:
            self._reconcile()

    def _record(self, observation: Observation) -> bool:
        try:
            placements_record(
                key=observation.key,
                kind=observation.kind,
                pod_uid=observation.pod_uid,
                pod_namespace=observation.namespace,
                pod_name=observation.name,
                occurred_at=observation.occurred_at,
                node=observation.node,
                scheduler_name=observation.scheduler_name,
                reason=observation.reason,
                message=observation.message,
            )
        except DatabaseError:
            self.failures += 1
            log.warning("could not record %s; will retry", observation.key, exc_info=True)
            self._retry.append(observation)
            close_old_connections()
            return False
        self.recorded += 1
        return True

    def _sync_waiting(self, *, now: bool = False) -> None:
        """The live pending list after the observations, at most once every ``waiting_sync_interval`` (``now``: at
        once). Each sync compares the whole waiting set with the table, and a backlog binding pod by pod changes the
        set with each bind; a bound pod leaves the list as its bind is recorded (``placements_record``), so only
        pods newly waiting wait for the next sync."""
        if self._waiting is None:
            return
        if not now and time.monotonic() - self._last_waiting_sync < self._waiting_sync_interval:
            return
        state = (self._waiting.waiting_version, self._waiting.pods_synced)
        if state == self._waiting_synced:
            return
        self._last_waiting_sync = time.monotonic()
        try:
            placements_waiting_sync(self._waiting.waiting(), complete=state[1])
        except DatabaseError:
            log.warning("could not sync the pending pods; will retry", exc_info=True)
            close_old_connections()
            return
        self._waiting_synced = state

    def _reconcile(self) -> None:
        self._last_reconcile = time.monotonic()
        try:
            placements_reconcile()
            if self._waiting is not None:  # the Unschedulable Events of the pods this watcher sees waiting
                pending_events_emit()
        except DatabaseError:
            log.warning("placement reconcile failed; will retry", exc_info=True)
            close_old_connections()
