"""Traffic snapshots in Redis: one key per query, written by the prefetch workers, read by the verbs.

A snapshot's key is derived from its query (a stable hash of the query's fields), so every replica and every
worker agrees on it without coordination, and two profiles asking the same question share one snapshot.
The value is msgspec JSON: values per node, when they were fetched, the PromQL sent, the last error and the
series that matched no node (and the own bytes of the pods of recent binds, for profiles that reconcile). A failed
refresh keeps the last good values and ``fetched_at`` and sets ``error``, so readers see both how old the numbers
are and why they are not newer.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
import redis

from scheduler_core.traffic import (
    DEFAULT_DEVICE_NAME,
    DEFAULT_NODE_LABEL,
    DEFAULT_QUERY_MODE,
    DEFAULT_WINDOW_MINUTES,
    QueryMode,
    TrafficQuery,
    TrafficSnapshot,
)

SNAPSHOT_TTL_SECONDS = 24 * 3600
"""A snapshot nobody refreshes for a day belongs to a query no profile uses any more."""


class StoredQuery(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A :class:`TrafficQuery` as plain data (Celery task arguments, Redis values, database rows)."""

    address: str = ""
    device_name: str = DEFAULT_DEVICE_NAME
    time_range_minutes: int = DEFAULT_WINDOW_MINUTES
    node_label: str = DEFAULT_NODE_LABEL
    query_mode: QueryMode = DEFAULT_QUERY_MODE


class StoredSnapshot(msgspec.Struct, omit_defaults=True):
    query: StoredQuery
    bytes_by_node: dict[str, float]
    fetched_at: float
    """Unix seconds of the last successful fetch; 0 when the query never succeeded."""
    source: str = ""
    error: str = ""
    unmatched_series: list[str] = msgspec.field(default_factory=list)
    attempted_at: float = 0.0
    """Unix seconds when the last refresh attempt (successful or not) finished."""
    bytes_by_pod: dict[str, float] = msgspec.field(default_factory=dict)
    """Pods' own bytes (``TrafficSnapshot.bytes_by_pod``); last and left out when empty, so earlier versions read
    this version's snapshots (they ignore the field) and this one reads theirs (no pods: every bind decays)."""


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(StoredSnapshot)


def stored_query(query: TrafficQuery) -> StoredQuery:
    return StoredQuery(
        address=query.address,
        device_name=query.device_name,
        time_range_minutes=query.time_range_minutes,
        node_label=query.node_label,
        query_mode=query.query_mode,
    )


def query_to_dict(query: TrafficQuery) -> dict[str, Any]:
    """Primitives for a Celery task argument or a JSON column."""
    result: dict[str, Any] = msgspec.to_builtins(stored_query(query))
    return result


def query_from_dict(data: Mapping[str, Any]) -> TrafficQuery:
    """The inverse of :func:`query_to_dict`; raises ``msgspec.ValidationError`` naming a bad field."""
    stored = msgspec.convert(dict(data), StoredQuery)
    return TrafficQuery(
        address=stored.address,
        device_name=stored.device_name,
        time_range_minutes=stored.time_range_minutes,
        node_label=stored.node_label,
        query_mode=stored.query_mode,
    )


def query_key(query: TrafficQuery) -> str:
    """16 hex digits naming the query; equal queries get equal keys in every process and release."""
    return hashlib.sha256(_encoder.encode(stored_query(query))).hexdigest()[:16]


def encode_snapshot(snapshot: TrafficSnapshot, *, attempted_at: float | None = None) -> bytes:
    return _encoder.encode(
        StoredSnapshot(
            query=stored_query(snapshot.query),
            bytes_by_node=dict(snapshot.bytes_by_node),
            fetched_at=snapshot.fetched_at,
            source=snapshot.source,
            error=snapshot.error,
            unmatched_series=list(snapshot.unmatched_series),
            attempted_at=snapshot.fetched_at if attempted_at is None else attempted_at,
            bytes_by_pod=dict(snapshot.bytes_by_pod),
        )
    )


def decode_snapshot(data: bytes, query: TrafficQuery) -> TrafficSnapshot:
    """Raises ``msgspec.DecodeError`` (``ValidationError`` for valid JSON of the wrong shape) on garbage."""
    stored = _decoder.decode(data)
    return TrafficSnapshot(
        query=query,
        bytes_by_node=stored.bytes_by_node,
        fetched_at=stored.fetched_at,
        source=stored.source,
        error=stored.error,
        unmatched_series=tuple(stored.unmatched_series),
        bytes_by_pod=stored.bytes_by_pod,
    )


@dataclass(frozen=True, slots=True)
class Keys:
    """Every Redis key schedlens uses, under one prefix (``SCHEDLENS_REDIS_PREFIX``)."""

    prefix: str

    def snapshot(self, query: TrafficQuery) -> str:
        return f"{self.prefix}traffic:snapshot:{query_key(query)}"

    def stats(self, query: TrafficQuery) -> str:
        return f"{self.prefix}traffic:stats:{query_key(query)}"

    def lock(self, query: TrafficQuery) -> str:
        return f"{self.prefix}traffic:lock:{query_key(query)}"

    @property
    def binds(self) -> str:
        return f"{self.prefix}herd:binds"


_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


class SnapshotStore:
    """The worker side: write snapshots, failures and refresh statistics. Normal (seconds) timeouts."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    def save(self, snapshot: TrafficSnapshot, *, attempted_at: float | None = None) -> None:
        data = encode_snapshot(snapshot, attempted_at=attempted_at)
        self.client.set(self.keys.snapshot(snapshot.query), data, ex=SNAPSHOT_TTL_SECONDS)

    def load(self, query: TrafficQuery) -> TrafficSnapshot | None:
        data = self.client.get(self.keys.snapshot(query))
        return None if data is None else decode_snapshot(_bytes(data), query)

    def load_many(self, queries: Iterable[TrafficQuery]) -> dict[TrafficQuery, TrafficSnapshot | None]:
        ordered = list(queries)
        if not ordered:
            return {}
        values = self.client.mget([self.keys.snapshot(q) for q in ordered])
        return {q: None if v is None else decode_snapshot(_bytes(v), q) for q, v in zip(ordered, values, strict=True)}

    def record_failure(self, query: TrafficQuery, error: str, *, at: float) -> TrafficSnapshot:
        """Keep the last good values and their ``fetched_at``; say why they were not refreshed."""
        try:
            previous = self.load(query)
        except msgspec.DecodeError:
            previous = None
        if previous is None:
            failed = TrafficSnapshot(query=query, bytes_by_node={}, fetched_at=0.0, source="", error=error)
        else:
            failed = TrafficSnapshot(
                query=query,
                bytes_by_node=previous.bytes_by_node,
                fetched_at=previous.fetched_at,
                source=previous.source,
                error=error,
                unmatched_series=previous.unmatched_series,
                bytes_by_pod=previous.bytes_by_pod,  # of the same refresh as the nodes' values kept
            )
        self.save(failed, attempted_at=at)
        return failed

    def record_stats(self, query: TrafficQuery, *, duration_seconds: float, ok: bool, at: float) -> None:
        """Counters for ``/metrics``, shared by all workers (a custom collector reads them)."""
        key = self.keys.stats(query)
        pipe = self.client.pipeline(transaction=False)
        pipe.hincrby(key, "refreshes", 1)
        if not ok:
            pipe.hincrby(key, "errors", 1)
        pipe.hincrbyfloat(key, "duration_sum", duration_seconds)
        pipe.hset(key, mapping={"last_duration": duration_seconds, "last_at": at, "last_ok": int(ok)})
        pipe.expire(key, SNAPSHOT_TTL_SECONDS)
        pipe.execute()

    def stats(self, queries: Iterable[TrafficQuery]) -> dict[TrafficQuery, dict[str, float]]:
        ordered = list(queries)
        pipe = self.client.pipeline(transaction=False)
        for query in ordered:
            pipe.hgetall(self.keys.stats(query))
        result: dict[TrafficQuery, dict[str, float]] = {}
        for query, raw in zip(ordered, pipe.execute(), strict=True):
            result[query] = {as_text(k): float(v) for k, v in raw.items()}
        return result

    def acquire_refresh_lock(self, query: TrafficQuery, ttl_seconds: float) -> str | None:
        """One refresh of a query at a time across workers; ``None`` when another holds it."""
        token = uuid.uuid4().hex
        acquired = self.client.set(self.keys.lock(query), token, nx=True, px=max(1, int(ttl_seconds * 1000)))
        return token if acquired else None

    def release_refresh_lock(self, query: TrafficQuery, token: str) -> None:
        self.client.eval(_RELEASE, 1, self.keys.lock(query), token)


def _bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def as_text(value: Any) -> str:
    """A Redis reply's bytes (the clients here do not decode responses) as text."""
    return value.decode() if isinstance(value, bytes) else str(value)
