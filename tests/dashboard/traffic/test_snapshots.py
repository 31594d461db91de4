"""A real Celery worker refreshes snapshots from a real Prometheus into Redis; verbs read them in one round trip.

The expected values are the arithmetic of the series written (see ``tests/support/prometheus_data.py``): a counter
growing at a constant rate gives ``rate * window_seconds`` under ``increase``, counter reset or not.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import msgspec
import pytest
import redis

from dashboard.tasks import prefetch_traffic, prune_traffic_refreshes
from dashboard.traffic.models import RefreshStatus, TrafficRefresh
from dashboard.traffic.schedule import PREFETCH_TASK, PRUNE_CYCLES_TASK, PRUNE_TASK, traffic_beat_schedule
from dashboard.traffic.snapshots import Keys, SnapshotStore, query_from_dict, query_key, query_to_dict
from dashboard.traffic.view import RedisTrafficView
from scheduler_core.extender.protocol.binding import SimulatedBinder
from scheduler_core.extender.protocol.cluster import StaticCluster
from scheduler_core.extender.protocol.wire import encode
from scheduler_core.extender.scoring.profiles import load_profiles
from scheduler_core.extender.verbs import Extender
from scheduler_core.traffic import TrafficQuery
from scheduler_core.traffic.prometheus import NO_NODE_LABEL
from tests.support.processes import wait_for
from tests.support.prometheus_data import (
    NODE_A_ETH0_RATE,
    NODE_A_LO_RATE,
    NODE_B_ETH0_RATE,
    NODE_B_LO_RATE,
    NODE_C_LO_RATE,
)

pytestmark = [pytest.mark.prometheus, pytest.mark.django_db(transaction=True)]

EXACT = 1e-9
POD = {"metadata": {"name": "web-1", "namespace": "shop", "uid": "uid-1"}, "spec": {"containers": []}}


def refreshed_row(query: TrafficQuery, count: int = 1) -> TrafficRefresh:
    def rows() -> list[TrafficRefresh]:
        found = list(TrafficRefresh.objects.filter(query_key=query_key(query)).order_by("started_at", "id"))
        return found if len(found) >= count else []

    return wait_for(rows, what=f"{count} refresh row(s) of {query}")[-1]


def test_a_worker_refresh_stores_the_values_prometheus_computes_and_leaves_a_row(
    celery_worker, snapshot_store: SnapshotStore, prometheus_url: str
) -> None:
    eth0 = TrafficQuery(address=prometheus_url, device_name="eth0", time_range_minutes=5)
    lo = TrafficQuery(address=prometheus_url, device_name="lo", time_range_minutes=5)
    before = time.time()

    prefetch_traffic.delay(query_to_dict(eth0))
    prefetch_traffic.delay(query_to_dict(lo))
    eth0_row, lo_row = refreshed_row(eth0), refreshed_row(lo)

    snapshot = snapshot_store.load(eth0)
    assert snapshot is not None
    assert dict(snapshot.bytes_by_node) == pytest.approx(
        {"node-a": NODE_A_ETH0_RATE * 300, "node-b": NODE_B_ETH0_RATE * 300}, rel=EXACT
    ), "node-b's counter reset inside the window neither loses nor invents bytes; node-c has no eth0 series"
    assert snapshot.unmatched_series == (NO_NODE_LABEL,), "the exporter without the node label is reported"
    assert snapshot.source == (
        'sum by (kubernetes_node) (increase(node_network_receive_bytes_total{device="eth0"}[5m]))'
    )
    assert before <= snapshot.fetched_at <= time.time()
    assert snapshot.error == ""
    assert dict(snapshot_store.load(lo).bytes_by_node) == pytest.approx(
        {"node-a": NODE_A_LO_RATE * 300, "node-b": NODE_B_LO_RATE * 300, "node-c": NODE_C_LO_RATE * 300}, rel=EXACT
    ), "one snapshot per query: the lo query has its own"

    assert eth0_row.status == RefreshStatus.OK
    assert eth0_row.error == ""
    assert eth0_row.query == query_to_dict(eth0)
    assert (eth0_row.nodes_matched, eth0_row.unmatched_series) == (2, [NO_NODE_LABEL])
    assert eth0_row.started_at <= eth0_row.finished_at
    assert eth0_row.duration_ms > 0
    assert eth0_row.bytes_by_node == {"node-a": round(NODE_A_ETH0_RATE * 300), "node-b": round(NODE_B_ETH0_RATE * 300)}
    assert lo_row.nodes_matched == 3


def test_per_node_values_are_kept_on_one_refresh_per_history_interval(
    celery_worker, snapshot_store: SnapshotStore, prometheus_url: str, settings
) -> None:
    settings.SCHEDLENS_TRAFFIC_HISTORY_INTERVAL_SECONDS = 3600
    query = TrafficQuery(address=prometheus_url)

    prefetch_traffic.delay(query_to_dict(query))
    refreshed_row(query, 1)
    prefetch_traffic.delay(query_to_dict(query))
    refreshed_row(query, 2)

    values = list(TrafficRefresh.objects.order_by("started_at", "id").values_list("bytes_by_node", flat=True))
    assert values[0] is not None
    assert values[1] is None, "the second refresh within the hour keeps only its summary"


def test_a_failed_refresh_keeps_the_last_good_values_and_records_the_error(
    celery_worker, snapshot_store: SnapshotStore, own_prometheus, settings
) -> None:
    settings.SCHEDLENS_PROMETHEUS_RETRIES = 0
    query = TrafficQuery(address=own_prometheus.url)
    prefetch_traffic.delay(query_to_dict(query))
    refreshed_row(query, 1)
    good = snapshot_store.load(query)

    own_prometheus.stop()
    prefetch_traffic.delay(query_to_dict(query))
    failed_row = refreshed_row(query, 2)

    kept = snapshot_store.load(query)
    assert failed_row.status == RefreshStatus.ERROR
    assert "connection refused" in failed_row.error
    assert failed_row.nodes_matched == 0
    assert kept.bytes_by_node == good.bytes_by_node
    assert kept.fetched_at == good.fetched_at, "the age keeps growing: the values are as old as the last success"
    assert "connection refused" in kept.error
    stats = snapshot_store.stats([query])[query]
    assert (stats["refreshes"], stats["errors"]) == (2.0, 1.0)


def test_a_query_that_never_succeeded_is_stored_as_an_error_without_values(
    celery_worker, snapshot_store: SnapshotStore, closed_port_url: str, settings
) -> None:
    settings.SCHEDLENS_PROMETHEUS_RETRIES = 0
    query = TrafficQuery(address=closed_port_url)

    prefetch_traffic.delay(query_to_dict(query))
    row = refreshed_row(query)

    stored = snapshot_store.load(query)
    assert (stored.fetched_at, dict(stored.bytes_by_node)) == (0.0, {})
    assert "connection refused" in stored.error == row.error


def test_old_rows_are_pruned_and_old_per_node_values_dropped(celery_worker, settings) -> None:
    settings.SCHEDLENS_TRAFFIC_REFRESH_RETENTION_HOURS = 24
    settings.SCHEDLENS_TRAFFIC_HISTORY_RETENTION_HOURS = 2
    now = datetime.now(tz=UTC)

    def row(hours_ago: float) -> TrafficRefresh:
        at = now - timedelta(hours=hours_ago)
        return TrafficRefresh.objects.create(
            query_key="k",
            query={},
            started_at=at,
            finished_at=at,
            duration_ms=1.0,
            status=RefreshStatus.OK,
            bytes_by_node={"n": 1},
        )

    fresh, older, ancient = row(0.5), row(5), row(30)

    prune_traffic_refreshes.delay()
    wait_for(lambda: not TrafficRefresh.objects.filter(pk=ancient.pk).exists(), what="the prune task")

    assert dict(TrafficRefresh.objects.values_list("pk", "bytes_by_node")) == {fresh.pk: {"n": 1}, older.pk: None}


# --- reading: the beat schedule, and the verbs' single round trip ---------------------------------------------

TWO_QUERIES = """
profiles:
- name: default
  pluginConfig:
  - {name: NetworkTraffic, args: {address: "ADDRESS", deviceName: eth0}}
  - {name: TrafficThreshold, args: {address: "ADDRESS", deviceName: lo}}
- name: other
  pluginConfig:
  - {name: NetworkTraffic, args: {address: "ADDRESS", deviceName: eth0}}
  - {name: TrafficThreshold, args: {address: "ADDRESS", deviceName: eth0}}
"""


def test_the_beat_schedule_has_one_prefetch_per_distinct_query_every_refresh_interval() -> None:
    profiles = load_profiles(TWO_QUERIES.replace("ADDRESS", "http://prometheus:9090"))

    schedule = traffic_beat_schedule(profiles, refresh_seconds=15.0)

    prefetches = [entry for entry in schedule.values() if entry["task"] == PREFETCH_TASK]
    queried = {query_from_dict(entry["args"][0]) for entry in prefetches}
    assert queried == {q for p in profiles.values() for q in p.traffic_queries()}
    assert {q.device_name for q in queried} == {"eth0", "lo"}, "profiles share the eth0 snapshot"
    assert all(e["schedule"] == 15.0 and e["options"] == {"expires": 15.0} for e in prefetches)
    assert [e["task"] for e in schedule.values()].count(PRUNE_TASK) == 1
    assert [e["task"] for e in schedule.values()].count(PRUNE_CYCLES_TASK) == 1, "audit retention runs too"


def test_the_celery_app_schedules_the_configured_profiles_queries() -> None:
    from config.celery import app

    entries = [e for e in app.conf.beat_schedule.values() if e["task"] == PREFETCH_TASK]
    assert [query_from_dict(e["args"][0]) for e in entries] == [TrafficQuery()], "the built-in default profile"


class CountingConnection(redis.Connection):
    round_trips = 0

    def send_packed_command(self, command, check_health=True):  # type: ignore[no-untyped-def]
        type(self).round_trips += 1
        return super().send_packed_command(command, check_health)


def test_verbs_read_every_snapshot_of_their_profile_and_the_binds_in_one_redis_round_trip(
    snapshot_store: SnapshotStore, redis_prefix: str, prometheus_url: str, settings
) -> None:
    profiles = load_profiles(TWO_QUERIES.replace("ADDRESS", prometheus_url))
    from tests.support.inputs import traffic_store

    for query in profiles["default"].traffic_queries():
        snapshot = traffic_store({"node-a": 1.0e6, "node-b": 2.0e6}, query=query).latest(query)
        snapshot_store.save(snapshot)
    client = redis.Redis.from_url(settings.REDIS_URL, connection_class=CountingConnection)
    view = RedisTrafficView(client, Keys(redis_prefix), refresh_seconds=15.0, herd_horizon_seconds=15.0)
    extender = Extender(profiles, cluster=StaticCluster(), traffic=view, binder=SimulatedBinder(), inputs=view)
    body = encode({"Pod": POD, "Nodes": None, "NodeNames": ["node-a", "node-b"]})
    client.ping()  # opening the pooled connection has its own handshake (SELECT, CLIENT SETINFO), paid once
    CountingConnection.round_trips = 0

    filtered = extender.filter("default", body)
    prioritized = extender.prioritize("default", body)

    assert CountingConnection.round_trips == 2, "one pipelined read per verb call, for two queries and the binds"
    assert filtered.event.filter.traffic_bytes == [1.0e6, 2.0e6]
    assert prioritized.event.prioritize.plugins[0].raw == [1.0e6, 2.0e6]
    assert prioritized.event.prioritize.plugins[0].note == ""


def test_an_undecodable_snapshot_counts_as_missing(redis_client: redis.Redis, redis_prefix: str, settings) -> None:
    keys = Keys(redis_prefix)
    redis_client.set(keys.snapshot(TrafficQuery()), b"{not json")
    view = RedisTrafficView(redis_client, keys, refresh_seconds=15.0, herd_horizon_seconds=15.0)

    traffic, _ = view.for_call(load_profiles(None)["default"], time.time())

    assert traffic.latest(TrafficQuery()) is None
    with pytest.raises(msgspec.DecodeError):
        SnapshotStore(redis_client, keys).load(TrafficQuery())


def test_the_inline_fallback_asks_prometheus_on_the_verb_only_when_no_usable_snapshot_and_not_twice(
    redis_client: redis.Redis, redis_prefix: str, prometheus_url: str
) -> None:
    from dashboard.traffic.view import InlineFallback
    from scheduler_core.traffic.prometheus import PrometheusTrafficSource

    profiles = load_profiles(TWO_QUERIES.replace("ADDRESS", prometheus_url))
    asked: list[TrafficQuery] = []

    def source_for(query: TrafficQuery) -> PrometheusTrafficSource:
        asked.append(query)
        return PrometheusTrafficSource(prometheus_url, timeout_seconds=2.0, retries=0)

    inline = InlineFallback(source_for, max_age_seconds={}, min_interval_seconds=60.0)
    view = RedisTrafficView(
        redis_client, Keys(redis_prefix), refresh_seconds=15.0, herd_horizon_seconds=15.0, inline=inline
    )
    eth0 = TrafficQuery(address=prometheus_url, device_name="eth0")

    traffic, _ = view.for_call(profiles["default"], time.time())
    again, _ = view.for_call(profiles["default"], time.time())

    snapshot = traffic.latest(eth0)
    assert dict(snapshot.bytes_by_node) == pytest.approx(
        {"node-a": NODE_A_ETH0_RATE * 300, "node-b": NODE_B_ETH0_RATE * 300}, rel=EXACT
    )
    assert snapshot.error == "fetched inline on the verb (no fresh snapshot)"
    assert len(asked) == 2, "once per query (eth0, lo), not again on the next call"
    assert again.latest(eth0).bytes_by_node == snapshot.bytes_by_node, "the next call uses what was fetched"


def test_an_unchanged_snapshot_is_decoded_once_and_the_next_refresh_is_read(
    snapshot_store: SnapshotStore, redis_client: redis.Redis, redis_prefix: str
) -> None:
    from tests.support.inputs import traffic_store

    query = TrafficQuery()
    profile = load_profiles(None)["default"]
    view = RedisTrafficView(redis_client, Keys(redis_prefix), refresh_seconds=15.0, herd_horizon_seconds=15.0)
    snapshot_store.save(traffic_store({"node-a": 1.0e6}, query=query).latest(query))

    first = view.for_call(profile, time.time())[0].latest(query)
    second = view.for_call(profile, time.time())[0].latest(query)
    assert first is not None
    assert second is first, "the same bytes in Redis: the same snapshot, not decoded again"

    snapshot_store.save(traffic_store({"node-a": 3.0e6}, query=query).latest(query))
    refreshed = view.for_call(profile, time.time())[0].latest(query)
    assert refreshed is not None
    assert dict(refreshed.bytes_by_node) == {"node-a": 3.0e6}
