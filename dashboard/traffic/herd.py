"""The bind log shared by every replica, in Redis, mirrored in each process (the herd-effect estimate).

Every bind is appended to a Redis stream (``XADD``: node, pod, time; the pod's own assumed bytes and its
``namespace/name`` when known). Each process keeps a mirror of the last
``horizon`` seconds (:class:`scheduler_core.extender.scoring.herd.InMemoryBindLog`) and reads only the entries appended
since its last read (``XRANGE`` from that entry's id, exclusive), in the same pipeline as its snapshots. At a busy
scheduler's rate a horizon holds thousands of binds, too many to read on every call; the few new ones are cheap
to read. Stream ids are assigned by Redis in
order, so a bind appended late (a placement watcher, another replica's clock) is never skipped.

A pod recorded twice (the ``bind`` verb, then a placement watcher seeing the same bind) counts once: the mirror
keeps a pod's first bind to a node. The stream is trimmed to ``TRIM_MARGIN_SECONDS`` of binds on each append.

The sorted set of earlier versions (``herd:binds``, one ``<node>\x1f<pod>`` member per bind) is still written, so
that replicas of the previous version keep counting this version's binds during a rolling upgrade.
"""

from __future__ import annotations

import threading
from typing import Any

import redis

from dashboard.traffic.snapshots import as_text
from scheduler_core.extender.scoring.herd import InMemoryBindLog, RecentBinds

SEPARATOR = "\x1f"
"""ASCII unit separator: cannot appear in a node name (a DNS subdomain) or a pod UID."""
TRIM_MARGIN_SECONDS = 300.0
"""Binds older than this (by their own time) are trimmed from the stream; far past any horizon, and beyond any
plausible clock difference between replicas."""
FIRST_READ_SLACK_SECONDS = 60.0
"""A new mirror reads the stream from ``horizon`` plus this before now (stream ids are Redis's clock)."""


class RedisBindLog:
    """A :class:`scheduler_core.extender.scoring.herd.BindLog` in Redis; raises ``redis.RedisError`` when Redis does."""

    def __init__(self, client: redis.Redis, key: str, *, horizon_seconds: float, default_decay_seconds: float) -> None:
        self.client = client
        self.key = key
        """The sorted set earlier versions read (written for them during an upgrade)."""
        self.stream_key = f"{key}:stream"
        self.horizon_seconds = horizon_seconds
        self.default_decay_seconds = default_decay_seconds
        self._mirror = InMemoryBindLog(horizon_seconds, default_decay_seconds=default_decay_seconds)
        self._last_id: tuple[int, int] | None = None
        """The newest stream entry the mirror holds (milliseconds, sequence); None before the first read."""
        self._lock = threading.Lock()

    def record_bind(self, *, node: str, pod: str, at: float, bytes: float | None = None, name: str = "") -> None:
        pipe = self.client.pipeline(transaction=False)
        trim_before = int((at - TRIM_MARGIN_SECONDS) * 1000)
        entry: dict[Any, Any] = {"node": node, "pod": pod, "at": repr(at)}
        if bytes is not None:  # a field earlier versions do not read: their replicas count the constant
            entry["bytes"] = repr(bytes)
        if name:  # namespace/name, by which the pod's own traffic reconciles it; earlier versions do not read it
            entry["name"] = name
        pipe.xadd(self.stream_key, entry, minid=trim_before, approximate=True)
        pipe.expire(self.stream_key, int(TRIM_MARGIN_SECONDS * 2))
        pipe.zadd(self.key, {f"{node}{SEPARATOR}{pod}": at}, nx=True)
        pipe.zremrangebyscore(self.key, "-inf", f"({at - self.horizon_seconds}")
        pipe.expire(self.key, int(self.horizon_seconds * 2) + 1)
        pipe.execute()

    def queue_read(self, pipe: Any, now: float) -> None:
        """Add this log's read to a caller's pipeline (the verbs read snapshots and binds in one round trip)."""
        last = self._last_id
        if last is None:
            start = f"{max(0, int((now - self.horizon_seconds - FIRST_READ_SLACK_SECONDS) * 1000))}-0"
        else:
            start = f"({last[0]}-{last[1]}"
        pipe.xrange(self.stream_key, min=start, max="+")

    def parse(self, entries: list[tuple[Any, dict[Any, Any]]], now: float) -> RecentBinds:
        """The mirror, with the entries a :meth:`queue_read` returned added to it."""
        newest = None
        for entry_id, fields in entries:  # in id order
            newest = entry_id
            try:  # bytes keys and values (the clients here do not decode responses)
                node, pod, at = as_text(fields[b"node"]), as_text(fields[b"pod"]), float(fields[b"at"])
                own = float(fields[b"bytes"]) if b"bytes" in fields else None
                name = as_text(fields.get(b"name", b""))
            except (KeyError, ValueError):
                continue  # not an entry this log wrote: skipped rather than failing every verb
            self._mirror.record_bind(node=node, pod=pod, at=at, bytes=own, name=name)
        if newest is not None:
            ms, _, seq = as_text(newest).partition("-")
            read = (int(ms), int(seq or 0))
            with self._lock:  # threads read side by side: the mirror holds up to the newest any of them read
                if self._last_id is None or read > self._last_id:
                    self._last_id = read
        return self._mirror.recent_binds(now)

    def recent_binds(self, now: float) -> RecentBinds:
        pipe = self.client.pipeline(transaction=False)
        self.queue_read(pipe, now)
        (entries,) = pipe.execute()
        return self.parse(entries, now)
