"""The bind log shared by every replica: one Redis sorted set of recent binds (the herd-effect estimate).

Each member is ``<node>\\x1f<pod>`` scored by the bind time. ``ZADD NX`` makes recording idempotent per pod, so
the ``bind`` verb and a placement watcher seeing the same bind count it once. A write also trims what is older
than the horizon (the longest decay any profile uses), so the set holds only the binds of the last few
seconds: a verb reads all of it (``ZRANGEBYSCORE``) in the same pipeline as its snapshots.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import redis

from scheduler_core.herd import RecentBinds

SEPARATOR = "\x1f"
"""ASCII unit separator: cannot appear in a node name (a DNS subdomain) or a pod UID."""


class RedisBindLog:
    """A :class:`scheduler_core.herd.BindLog` in Redis; raises ``redis.RedisError`` when Redis does."""

    def __init__(self, client: redis.Redis, key: str, *, horizon_seconds: float, default_decay_seconds: float) -> None:
        self.client = client
        self.key = key
        self.horizon_seconds = horizon_seconds
        self.default_decay_seconds = default_decay_seconds

    def record_bind(self, *, node: str, pod: str, at: float) -> None:
        pipe = self.client.pipeline(transaction=False)
        pipe.zadd(self.key, {f"{node}{SEPARATOR}{pod}": at}, nx=True)
        pipe.zremrangebyscore(self.key, "-inf", f"({at - self.horizon_seconds}")
        pipe.expire(self.key, int(self.horizon_seconds * 2) + 1)
        pipe.execute()

    def queue_read(self, pipe: Any, now: float) -> None:
        """Add this log's read to a caller's pipeline (the verbs read snapshots and binds in one round trip)."""
        pipe.zrangebyscore(self.key, now - self.horizon_seconds, "+inf", withscores=True)

    def parse(self, rows: Iterable[tuple[Any, float]]) -> RecentBinds:
        nodes: list[str] = []
        times: list[float] = []
        for member, score in rows:  # oldest first (ZRANGEBYSCORE)
            text = member.decode() if isinstance(member, bytes) else str(member)
            nodes.append(text.partition(SEPARATOR)[0])
            times.append(float(score))
        return RecentBinds(tuple(nodes), tuple(times), default_decay_seconds=self.default_decay_seconds)

    def recent_binds(self, now: float) -> RecentBinds:
        pipe = self.client.pipeline(transaction=False)
        self.queue_read(pipe, now)
        (rows,) = pipe.execute()
        return self.parse(rows)
