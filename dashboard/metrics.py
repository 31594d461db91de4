"""``GET /metrics``: schedlens's own metrics in the Prometheus text format (prometheus-client).

Two kinds, each kept where it is cheapest and correct under gunicorn's several worker processes:

- **Verb latency** (a histogram per verb and profile, ``dashboard/extender/metrics.py``) is observed in the web
  process that answered. With
  ``PROMETHEUS_MULTIPROC_DIR`` set (prometheus-client's multiprocess mode, its documented way for gunicorn)
  each worker writes its samples to memory-mapped files in that directory and a scrape of any worker sums all
  of them; the directory must be empty when the server starts. Without it (one process: tests,
  ``runserver``) the default registry is used. Counting in Redis instead would add a network round trip to
  every verb for a number read every 15–30 s.
- **State** (snapshot age per query and source, nodes without metrics, unmatched series, refresh duration and
  errors, spool depth, the served profiles' versions, the pods waiting for a node and why) is read at scrape time
  by a collector, from where it lives: Redis (written by the Celery workers, which may run on other hosts) or this
  process's store, the spool, the runtime's profiles, and the database (the placement watcher's live pending list).
  Every worker then reports the same numbers and nothing needs adding up.

Profile labels are limited to the configured profiles (anything else is ``unknown``): the path is chosen by
the caller, and a label per typo would grow the series without bound.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from datetime import timedelta

import redis
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from dashboard.outcomes.selectors import balance_latest, pod_error_histograms
from dashboard.placements.selectors import pending_by_reason, pending_longest
from dashboard.runtime import Runtime, get_runtime
from dashboard.traffic.clients import verb_client
from dashboard.traffic.snapshots import SnapshotStore, query_key
from dashboard.traffic.view import RedisTrafficView
from scheduler_core.traffic import TrafficQuery, TrafficSnapshot

log = logging.getLogger(__name__)

SCRAPE_REDIS_TIMEOUT_SECONDS = 1.0


def _source_label(query: TrafficQuery) -> str:
    return query.address or settings.PROMETHEUS_URL or ("synthetic" if settings.SCHEDLENS_SYNTHETIC_TRAFFIC else "none")


class StateCollector(Collector):
    """Reads traffic and spool state at scrape time (see the module docstring)."""

    def __init__(self, runtime: object) -> None:
        self.runtime = runtime

    def collect(self) -> Iterator[Metric]:
        runtime = self.runtime
        assert isinstance(runtime, Runtime)
        queries = sorted({q for p in runtime.profiles.values() for q in p.traffic_queries()}, key=query_key)
        labels = ["query", "source", "device"]
        age = GaugeMetricFamily(
            "schedlens_traffic_snapshot_age_seconds", "Age of the newest traffic values per query.", labels=labels
        )
        nodes = GaugeMetricFamily("schedlens_traffic_snapshot_nodes", "Nodes with a traffic value.", labels=labels)
        without = GaugeMetricFamily(
            "schedlens_traffic_nodes_without_metrics", "Known cluster nodes with no traffic series.", labels=labels
        )
        unmatched = GaugeMetricFamily(
            "schedlens_traffic_unmatched_series", "Series that named no node (mislabelled exporters).", labels=labels
        )
        failing = GaugeMetricFamily(
            "schedlens_traffic_refresh_failing", "1 when the last refresh of the query failed.", labels=labels
        )
        snapshots, stats, redis_up = self._read(runtime, queries)
        known_nodes = getattr(runtime.cluster, "node_names", None)
        names = set(known_nodes()) if callable(known_nodes) else set()
        now = time.time()
        for query in queries:
            values = [query_key(query), _source_label(query), query.device_name]
            snapshot = snapshots.get(query)
            if snapshot is None:
                continue
            if snapshot.fetched_at > 0:
                age.add_metric(values, snapshot.age_seconds(now))
            nodes.add_metric(values, len(snapshot.bytes_by_node))
            if names:
                without.add_metric(values, len(names - set(snapshot.bytes_by_node)))
            unmatched.add_metric(values, len(snapshot.unmatched_series))
            failing.add_metric(values, 1.0 if snapshot.error else 0.0)
        yield from (age, nodes, without, unmatched, failing)
        if stats is not None:
            yield from self._refresh_metrics(queries, stats, labels)
        if redis_up is not None:
            up = GaugeMetricFamily("schedlens_redis_up", "1 when /metrics could read Redis.")
            up.add_metric([], 1.0 if redis_up else 0.0)
            yield up
        depth = GaugeMetricFamily(
            "schedlens_spool_depth", "Verb records waiting in the spool for ingest (from its oldest and newest ids)."
        )
        try:  # not a count of the rows: every scrape would read the whole spool, largest in a database outage
            depth.add_metric([], runtime.spool.backlog())
        except Exception:  # a broken spool is exactly what this metric should show, not hide behind a 500
            depth.add_metric([], float("nan"))
        yield depth
        yield self._profile_versions(runtime)
        yield from self._pending(runtime)
        yield from self._outcomes()

    @staticmethod
    def _profile_versions(runtime: Runtime) -> Metric:
        """The version of each profile this replica serves (``Profile.version()``), as an info metric: a rollout shows
        as the label changing, and replicas serving different versions of one profile as two series at once."""
        versions = GaugeMetricFamily(
            "schedlens_profile_version_info",
            "The version each served profile has: the first 12 hex digits of the SHA-256 of its normalized definition.",
            labels=["profile", "version"],
        )
        for name, profile in sorted(runtime.profiles.items()):
            versions.add_metric([name, profile.version()], 1.0)
        return versions

    @staticmethod
    def _pending(runtime: Runtime) -> Iterator[Metric]:
        """The live pending list (``dashboard.placements``): per reason, and the longest wait per scheduler name.
        Nothing when the database cannot be read: the other metrics still answer."""
        waiting = GaugeMetricFamily(
            "schedlens_pods_waiting",
            "Pods of our scheduler names waiting for a node, by what held back their latest attempt (a pod held back "
            "by two reasons counts under each); profile: the schedlens profile of its newest cycle (empty: none).",
            labels=["scheduler", "profile", "source", "reason"],
        )
        longest = GaugeMetricFamily(
            "schedlens_pods_waiting_longest_seconds",
            "How long the longest-waiting pod of the scheduler name has waited for a node.",
            labels=["scheduler"],
        )
        try:
            counts = pending_by_reason()
            since = pending_longest()
        except Exception as exc:  # the database down (or not allowed): the other metrics still answer
            log.warning("/metrics could not read the pending pods: %s", exc)
            return
        known = runtime.profiles
        for row in counts:
            profile = row.profile if not row.profile or row.profile in known else "unknown"
            waiting.add_metric([row.scheduler, profile, row.source, row.reason], row.pods)
        now = time.time()
        for scheduler, at in since.items():
            longest.add_metric([scheduler], max(0.0, now - at.timestamp()))
        yield from (waiting, longest)

    @staticmethod
    def _outcomes() -> Iterator[Metric]:
        """What placements did to traffic (``dashboard.outcomes``): the herd estimate's relative error per workload
        kind and profile (never per pod) over the last day, and each profile's latest balance sample."""
        errors = HistogramMetricFamily(
            "schedlens_herd_estimate_relative_error",
            "(pod traffic - assumedBytesPerPod) / assumedBytesPerPod over the longest passed window, for the pods "
            "bound in the last 24 hours whose traffic could be attributed.",
            labels=["workload_kind", "profile"],
        )
        spread = GaugeMetricFamily(
            "schedlens_traffic_spread_cv",
            "stdev / mean of the traffic of the nodes the profile placed pods on in the last hour (latest sample).",
            labels=["profile"],
        )
        try:
            histograms = pod_error_histograms(since=timezone.now() - timedelta(days=1))
            latest = balance_latest()
        except Exception as exc:  # the database down: the other metrics still answer
            log.warning("/metrics could not read the placement outcomes: %s", exc)
            return
        for h in histograms:
            buckets = [(f"{b:g}", c) for b, c in zip(h.bounds, h.cumulative, strict=False)] + [("+Inf", h.count)]
            errors.add_metric([h.workload_kind, h.profile], buckets, h.total)
        for sample in latest:
            if sample.cv is not None:
                spread.add_metric([sample.profile], sample.cv)
        yield from (errors, spread)

    def _read(
        self, runtime: object, queries: list[TrafficQuery]
    ) -> tuple[dict[TrafficQuery, TrafficSnapshot], dict[TrafficQuery, dict[str, float]] | None, bool | None]:
        inputs = getattr(runtime, "inputs", None)
        if not isinstance(inputs, RedisTrafficView):
            traffic = getattr(runtime, "traffic", None)
            found = {q: s for q in queries if traffic is not None and (s := traffic.latest(q)) is not None}
            return found, None, None
        store = SnapshotStore(verb_client(timeout=SCRAPE_REDIS_TIMEOUT_SECONDS), inputs.keys)
        try:
            loaded = store.load_many(queries)
            stats = store.stats(queries)
        except redis.RedisError as exc:
            log.warning("/metrics could not read Redis: %s", exc)
            return dict(inputs.last_good), None, False
        return {q: s for q, s in loaded.items() if s is not None}, stats, True

    @staticmethod
    def _refresh_metrics(
        queries: list[TrafficQuery], stats: dict[TrafficQuery, dict[str, float]], labels: list[str]
    ) -> Iterator[Metric]:
        duration = SummaryMetricFamily(
            "schedlens_traffic_refresh_duration_seconds", "Duration of traffic refreshes (all workers).", labels=labels
        )
        last = GaugeMetricFamily(
            "schedlens_traffic_refresh_last_duration_seconds", "Duration of the last traffic refresh.", labels=labels
        )
        errors = CounterMetricFamily(
            "schedlens_traffic_refresh_errors", "Failed traffic refreshes (all workers).", labels=labels
        )
        for query in queries:
            row = stats.get(query) or {}
            if not row:
                continue
            values = [query_key(query), _source_label(query), query.device_name]
            duration.add_metric(
                values, count_value=int(row.get("refreshes", 0)), sum_value=row.get("duration_sum", 0.0)
            )
            last.add_metric(values, row.get("last_duration", 0.0))
            errors.add_metric(values, row.get("errors", 0.0))
        yield from (duration, last, errors)


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    registry = CollectorRegistry()
    multiprocess = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
    if multiprocess:
        MultiProcessCollector(registry)
    registry.register(StateCollector(get_runtime()))
    body = generate_latest(registry)
    if not multiprocess:
        body = generate_latest(REGISTRY) + body
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
