"""Carries observations from the watcher threads into the database, in the thread that owns the connection.

The watcher threads only enqueue (they must never wait on PostgreSQL); :meth:`PlacementPump.run` records
what is queued together (``placements_record_all``) and reconciles periodically. When the database is down the
observations are kept and retried, so an outage delays the record but loses nothing the process has seen (a restart
relists anyway).
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
from dashboard.placements.services import placements_reconcile, placements_record_all, placements_waiting_sync
from scheduler_core.kube.placement_watch import Observation, WaitingPod


class WaitingSource(Protocol):
    """The placement watcher's pods not bound yet (``PlacementWatcher``)."""

    def waiting(self) -> list[WaitingPod]: ...

    @property
    def waiting_version(self) -> int: ...

    @property
    def pods_synced(self) -> bool: ...


log = logging.getLogger(__name__)

BATCH = 500
"""Observations recorded together at most: a backlog's binds arrive faster than one at a time keeps up with."""


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
        while batch := self._queued():
            self._record(batch)
        self._sync_waiting(now=True)
        self._reconcile()

    def step(self, *, timeout: float) -> None:
        """Record what is queued (waiting up to ``timeout`` for the first), retry kept ones, reconcile when due."""
        # Kept ones one at a time, in turn: one the database keeps refusing holds up no other.
        if self._retry and not self._record([self._retry.popleft()]):
            time.sleep(self._retry_interval)  # the database is down: do not spin on it
            return
        try:
            first = self._queue.get(timeout=timeout)
        except queue.Empty:
            first = None
        if first is not None:
            self._record([first, *self._queued()])
        self._sync_waiting()
        if time.monotonic() - self._last_reconcile >= self._reconcile_interval:
            self._reconcile()

    def _queued(self) -> list[Observation]:
        """What is queued now, up to ``BATCH`` observations, without waiting."""
        batch: list[Observation] = []
        while len(batch) < BATCH:
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return batch

    def _record(self, observations: list[Observation]) -> bool:
        """Record ``observations`` together (``placements_record_all``); kept for a retry, in order, if the database
        refuses."""
        try:
            placements_record_all(observations)
        except DatabaseError:
            self.failures += 1
            log.warning("could not record %d observations; will retry", len(observations), exc_info=True)
            self._retry.extend(observations)
            close_old_connections()
            return False
        self.recorded += len(observations)
        return True

    def _sync_waiting(self, *, now: bool = False) -> None:
        """The live pending list after the observations, at most once every ``waiting_sync_interval`` (``now``: at
        once). Each sync compares the whole waiting set with the table, and a backlog binding pod by pod changes the
        set with each bind; a bound pod leaves the list as its bind is recorded (``placements_record_all``), so only
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
