"""The shared bind log in real Redis: each replica mirrors it, reading only what was appended since its last read."""

from __future__ import annotations

import redis

from dashboard.traffic.herd import RedisBindLog
from dashboard.traffic.snapshots import Keys

NOW = 1_000_000.0


def replica(client: redis.Redis, prefix: str) -> RedisBindLog:
    return RedisBindLog(client, Keys(prefix).binds, horizon_seconds=15.0, default_decay_seconds=15.0)


def read(log: RedisBindLog, now: float) -> tuple[dict[str, tuple[float, ...]], int]:
    """The binds ``log`` hands to a verb at ``now``, and how many stream entries its read transferred."""
    pipe = log.client.pipeline(transaction=False)
    log.queue_read(pipe, now)
    (entries,) = pipe.execute()
    return log.parse(entries, now).by_node, len(entries)


def test_a_replica_sees_the_others_binds_and_reads_only_what_is_new(redis_client, redis_prefix: str) -> None:
    first, second = replica(redis_client, redis_prefix), replica(redis_client, redis_prefix)
    for i in range(50):
        first.record_bind(node=f"node-{i % 5}", pod=f"pod-{i}", at=NOW + i * 0.1)

    binds, transferred = read(second, NOW + 5.0)
    assert sum(map(len, binds.values())) == 50
    assert transferred == 50

    second.record_bind(node="node-9", pod="pod-late", at=NOW + 5.5)
    binds, transferred = read(first, NOW + 6.0)
    assert binds["node-9"] == (NOW + 5.5,)
    assert sum(map(len, binds.values())) == 51, "the first replica's own binds come back through the stream too"

    binds, transferred = read(second, NOW + 6.0)
    assert transferred == 1, "only the entry appended since the last read"
    assert binds["node-9"] == (NOW + 5.5,)


def test_a_bind_appended_late_with_an_earlier_time_is_not_skipped(redis_client, redis_prefix: str) -> None:
    verb, watcher = replica(redis_client, redis_prefix), replica(redis_client, redis_prefix)
    verb.record_bind(node="node-1", pod="pod-1", at=NOW + 10.0)
    assert read(verb, NOW + 10.0)[0] == {"node-1": (NOW + 10.0,)}

    watcher.record_bind(node="node-2", pod="pod-2", at=NOW + 8.0)  # seen by a placement watcher after the fact

    assert read(verb, NOW + 10.5)[0] == {"node-1": (NOW + 10.0,), "node-2": (NOW + 8.0,)}


def test_a_pod_recorded_by_the_verb_and_the_watcher_counts_once_and_old_binds_fall_out(
    redis_client, redis_prefix: str
) -> None:
    log = replica(redis_client, redis_prefix)
    log.record_bind(node="node-1", pod="uid-1", at=NOW)
    replica(redis_client, redis_prefix).record_bind(node="node-1", pod="uid-1", at=NOW + 0.5)

    assert read(log, NOW + 1.0)[0] == {"node-1": (NOW,)}
    assert read(log, NOW + 16.0)[0] == {}, "past the 15-second horizon"


def test_an_entry_the_log_did_not_write_is_skipped_and_reading_goes_on(redis_client, redis_prefix: str) -> None:
    log = replica(redis_client, redis_prefix)
    redis_client.xadd(log.stream_key, {"something": "else"})
    log.record_bind(node="node-3", pod="pod-3", at=NOW)

    assert read(log, NOW)[0] == {"node-3": (NOW,)}
    assert read(log, NOW)[1] == 0, "the odd entry is not read again"


def test_the_sorted_set_of_the_previous_version_is_still_written_for_a_rolling_upgrade(
    redis_client, redis_prefix: str
) -> None:
    log = replica(redis_client, redis_prefix)
    log.record_bind(node="node-1", pod="uid-1", at=NOW)
    log.record_bind(node="node-1", pod="uid-1", at=NOW + 1)

    members = redis_client.zrangebyscore(Keys(redis_prefix).binds, "-inf", "+inf", withscores=True)
    assert members == [(b"node-1\x1fuid-1", NOW)]


def test_a_binds_own_assumed_bytes_reach_the_other_replicas(redis_client, redis_prefix: str) -> None:
    first, second = replica(redis_client, redis_prefix), replica(redis_client, redis_prefix)
    first.record_bind(node="node-1", pod="pod-learned", at=NOW, bytes=6e8)  # its workload's learned figure
    first.record_bind(node="node-2", pod="pod-constant", at=NOW + 0.1)

    pipe = second.client.pipeline(transaction=False)
    second.queue_read(pipe, NOW + 1.0)
    (entries,) = pipe.execute()
    binds = second.parse(entries, NOW + 1.0)
    assert binds.nodes == ("node-1", "node-2")
    assert binds.bytes is not None
    assert binds.bytes[0] == 6e8
    assert binds.bytes[1] != binds.bytes[1], "NaN: the scoring plugin's constant"
