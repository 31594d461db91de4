"""Traffic learned per workload from the placement outcomes, published where the verbs read it (issue 32, item 3).

The outcome job (:func:`dashboard.outcomes.services.outcomes_refresh`) learns after each run, from the measured
outcomes of the lookback (``scheduler_core.workload_traffic``: a decayed p90 of each workload's pods' rates after
their warm-up), and publishes the table to Redis. Each serving process reads it back in a thread of its own
(:class:`LearnedTrafficFollower`) into the :class:`~scheduler_core.workload_traffic.LearnedTrafficStore` its verbs
read: no verb ever waits on the database, Prometheus or this Redis key.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta

import redis

from dashboard.outcomes.codec import windows_decode
from dashboard.outcomes.models import OutcomeStatus, PlacementOutcome
from dashboard.traffic.clients import keys, worker_client
from scheduler_core.workload_traffic import (
    LOOKBACK_DAYS,
    LearnedTraffic,
    LearnedTrafficStore,
    PodSample,
    WorkloadKey,
    decode_learned,
    encode_learned,
    learn,
    rate_after_warmup,
    workload_of,
)

log = logging.getLogger(__name__)

PROCESS_LEARNED = LearnedTrafficStore()
"""This process's table: the verbs of a serving process read it; the outcome job's process sets it as it learns."""
FOLLOW_SECONDS = 30.0
"""How often a serving process reads the published table: it changes once per outcome run."""


def learned_key() -> str:
    return f"{keys().prefix}herd:learned"


def samples_since(since: datetime) -> dict[WorkloadKey, list[PodSample]]:
    """Each workload's measured pods bound since ``since``: their rates past the first window, when they bound."""
    found: dict[WorkloadKey, list[PodSample]] = {}
    rows = (
        PlacementOutcome.objects.filter(bound_at__gte=since, status=OutcomeStatus.MEASURED)
        .exclude(workload_kind="")
        .values_list("pod_namespace", "workload_kind", "workload_name", "bound_at", "windows")
    )
    for namespace, kind, name, bound_at, windows in rows.iterator(chunk_size=2000):
        key = workload_of(namespace, kind, name)
        rate = rate_after_warmup((w.seconds, w.pod_bytes) for w in windows_decode(windows))
        if key is not None and rate is not None:
            found.setdefault(key, []).append(PodSample(rate, bound_at.timestamp()))
    return found


def learn_and_publish(*, now: float) -> LearnedTraffic:
    """Learn from the outcomes of the lookback; set this process's table and publish it (a Redis failure is logged:
    the serving processes keep the table they have)."""
    since = datetime.fromtimestamp(now, tz=UTC) - timedelta(days=LOOKBACK_DAYS)
    table = learn(samples_since(since), now)
    PROCESS_LEARNED.current = table
    try:
        worker_client().set(learned_key(), encode_learned(table), ex=LOOKBACK_DAYS * 86400)
    except redis.RedisError as exc:
        log.warning("learned workload traffic: could not publish to redis: %s", exc)
    return table


def read_published(store: LearnedTrafficStore) -> bool:
    """Replace ``store``'s table with the published one; False when there is none or it cannot be read."""
    try:
        data = worker_client().get(learned_key())
    except redis.RedisError as exc:
        log.info("learned workload traffic: redis unavailable: %s", exc)
        return False
    if not isinstance(data, bytes):
        return False
    try:
        store.current = decode_learned(data)
    except ValueError as exc:  # msgspec.DecodeError: written by another version
        log.warning("learned workload traffic: unreadable table in redis: %s", exc)
        return False
    return True


class LearnedTrafficFollower:
    """A daemon thread of a serving process reading the published table every ``interval`` seconds."""

    def __init__(self, store: LearnedTrafficStore, *, interval: float = FOLLOW_SECONDS) -> None:
        self.store = store
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="schedlens-learned-traffic", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                read_published(self.store)
            except Exception:  # a bug in one read must not end the thread
                log.exception("learned workload traffic: the read failed")
            self._stop.wait(self.interval)
