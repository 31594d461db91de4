"""The pods of recent binds, read beside the nodes' traffic by the same background refresh (never by a verb).

The herd estimate reconciles a recent bind with its pod's own traffic once that shows in the node's measurement
(``scheduler_core.extender.scoring.herd``). For the two to be like for like, a pod's bytes are read over the node
query's window, right after the nodes' bytes, into the same :class:`~scheduler_core.traffic.base.TrafficSnapshot`; only
the pods the bind log holds are asked for, and only for the queries of profiles that reconcile (``reconcileHerd``).

A query of ``sum_over_time`` mode is not read: its figure is a sum of counter samples, not bytes in the window, so a
pod's bytes cannot be taken off it. A failed pod read leaves the snapshot without pods (every bind then decays) and
is logged once while it lasts; it never fails the nodes' refresh.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace

from scheduler_core.traffic.base import TrafficQuery, TrafficSnapshot, TrafficSourceError

log = logging.getLogger(__name__)

PodReader = Callable[[TrafficQuery, Sequence[str]], Mapping[str, float]]
"""Each of the named pods' (``namespace/name``) own bytes over the query's window; a pod without series is absent.
Raises :class:`TrafficSourceError`."""


class PodReads:
    """What a refresh adds to a fresh snapshot: the own bytes of the pods of recent binds."""

    def __init__(self, reader: PodReader, pods: Callable[[], Sequence[str]], queries: Collection[TrafficQuery]) -> None:
        self.reader = reader
        self.pods = pods
        """The pods of the bind log's recent binds (``RecentBinds.pods``), asked for at each refresh."""
        self.queries = frozenset(q for q in queries if q.query_mode == "increase")
        """The queries of profiles that reconcile."""
        self._last_error = ""

    def add_to(self, snapshot: TrafficSnapshot) -> TrafficSnapshot:
        if snapshot.query not in self.queries or snapshot.fetched_at <= 0:
            return snapshot
        names = sorted({name for name in self.pods() if name})
        if not names:
            return snapshot
        try:
            found = dict(self.reader(snapshot.query, names))
        except TrafficSourceError as exc:
            if str(exc) != self._last_error:  # once per failure, not every refresh while it lasts
                log.warning("pod traffic of recent binds not read (their binds decay): %s", exc)
            self._last_error = str(exc)
            return snapshot
        self._last_error = ""
        return replace(snapshot, bytes_by_pod=found)
