"""The table of traffic learned per workload, as published to Redis and read back by each serving process.

No model import here: the serving process's runtime (and Celery's configuration through it) imports this before
Django's apps are ready. The learning itself, from the outcomes, is ``dashboard.outcomes.learning``.
"""

from __future__ import annotations

import logging
import threading

import redis

from dashboard.traffic.clients import keys, worker_client
from scheduler_core.extender.scoring.workload_traffic import LearnedTrafficStore, decode_learned

log = logging.getLogger(__name__)

PROCESS_LEARNED = LearnedTrafficStore()
"""This process's table: the verbs of a serving process read it; the outcome job's process sets it as it learns."""
FOLLOW_SECONDS = 30.0
"""How often a serving process reads the published table: it changes once per outcome run."""


def learned_key() -> str:
    return f"{keys().prefix}herd:learned"


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
