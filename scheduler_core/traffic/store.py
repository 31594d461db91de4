"""The latest snapshot per query, kept in process and refreshed in the background.

Verbs only ever read :class:`TrafficStore`; a slow or dead source delays the refresh thread, never a verb.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from scheduler_core.traffic.base import TrafficQuery, TrafficSnapshot, TrafficSource, TrafficSourceError
from scheduler_core.traffic.pods import PodReads

log = logging.getLogger(__name__)


class TrafficStore:
    def __init__(self) -> None:
        self._snapshots: dict[TrafficQuery, TrafficSnapshot] = {}
        self.last_errors: dict[TrafficQuery, str] = {}

    def latest(self, query: TrafficQuery) -> TrafficSnapshot | None:
        return self._snapshots.get(query)

    def put(self, snapshot: TrafficSnapshot) -> None:
        # A dict assignment is atomic under the GIL: readers see the old or the new snapshot, never half.
        self._snapshots[snapshot.query] = snapshot
        self.last_errors.pop(snapshot.query, None)

    def refresh(self, source: TrafficSource, queries: Iterable[TrafficQuery], pods: PodReads | None = None) -> None:
        """Fetch every query once (with the pods of recent binds, ``pods``); a failure keeps the previous snapshot
        and remembers the error."""
        for query in queries:
            try:
                fetched = source.fetch(query)
                self.put(fetched if pods is None else pods.add_to(fetched))
            except TrafficSourceError as exc:
                if self.last_errors.get(query) != str(exc):  # once per failure, not every refresh while it lasts
                    log.warning("traffic refresh failed for %s: %s", query, exc)
                self.last_errors[query] = str(exc)
                previous = self._snapshots.get(query)
                if previous is None or previous.fetched_at <= 0:
                    # A source that never answered leaves only its error, which the verbs' records give as the
                    # reason (as a Redis snapshot does); the last good figures, once there are some, stay.
                    self._snapshots[query] = TrafficSnapshot(query, {}, fetched_at=0.0, source="", error=str(exc))


class BackgroundRefresher:
    """A daemon thread calling :meth:`TrafficStore.refresh` every ``interval`` seconds."""

    def __init__(
        self,
        store: TrafficStore,
        source_for: Callable[[TrafficQuery], TrafficSource],
        queries: Iterable[TrafficQuery],
        interval: float = 15.0,
        pods: PodReads | None = None,
    ) -> None:
        self.store = store
        self.pods = pods
        self.source_for = source_for
        self.queries = tuple(queries)
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="schedlens-traffic-refresh", daemon=True)

    def refresh_once(self) -> None:
        for query in self.queries:
            self.store.refresh(self.source_for(query), [query], self.pods)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.refresh_once()
            except Exception:  # A bug in one refresh must not kill the thread that keeps metrics fresh.
                log.exception("traffic refresh crashed")
            self._stop.wait(max(0.5, self.interval - (time.monotonic() - started)))
