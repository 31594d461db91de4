"""Which source answers a query: Prometheus (the query's address or PROMETHEUS_URL); without one, the demo's synthetic
traffic (``SCHEDLENS_SYNTHETIC_TRAFFIC``) or no measurement at all (:data:`NO_PROMETHEUS`)."""

from __future__ import annotations

import functools

from django.conf import settings

from scheduler_core.extender.protocol.cluster import FileCluster
from scheduler_core.outcomes.sources import PodTrafficQuery
from scheduler_core.traffic import TrafficQuery, TrafficSnapshot, TrafficSource, TrafficSourceError
from scheduler_core.traffic.pods import PodReader
from scheduler_core.traffic.synthetic import SyntheticTrafficSource

NO_PROMETHEUS = "no Prometheus configured (PROMETHEUS_URL, or the plugin's address): traffic is not measured"


class NoPrometheus:
    """The source of a query no Prometheus answers outside the demo: every refresh fails, saying why, so the verbs
    score the nodes by ``missingPolicy`` and every explanation gives the reason instead of invented figures."""

    def fetch(self, query: TrafficQuery) -> TrafficSnapshot:
        raise TrafficSourceError(NO_PROMETHEUS)


def unaddressed_source(synthetic: TrafficSource) -> TrafficSource:
    """What answers a query without a Prometheus: ``synthetic`` in the demo, else :class:`NoPrometheus`."""
    return synthetic if settings.SCHEDLENS_SYNTHETIC_TRAFFIC else NoPrometheus()


@functools.cache
def _file_cluster(path: str) -> FileCluster:
    return FileCluster(path)


def known_node_names() -> list[str]:
    """The cluster's node names when this process knows them (the demo cluster file), else empty."""
    path = settings.SCHEDLENS_CLUSTER_FILE
    return _file_cluster(path).node_names() if path else []


def fetch_deadline_seconds(source: TrafficSource) -> float:
    """The longest ``source.fetch`` can take: a Prometheus source bounds each attempt to ``timeout_seconds`` and
    pauses ``backoff_seconds``, doubling, between its ``retries`` (scheduler_core/traffic/prometheus.py); the
    synthetic source does no I/O."""
    timeout = getattr(source, "timeout_seconds", None)
    if timeout is None:
        return 0.0
    retries = int(getattr(source, "retries", 0))
    backoff = float(getattr(source, "backoff_seconds", 0.0))
    return float(timeout) * (retries + 1) + backoff * (2.0**retries - 1)


def pod_traffic_query() -> PodTrafficQuery:
    """How a pod's own traffic is read (``SCHEDLENS_POD_TRAFFIC_*``): by the outcome job, and by the refresh for the
    pods of recent binds."""
    return PodTrafficQuery(
        metrics=tuple(settings.SCHEDLENS_POD_TRAFFIC_METRICS),
        namespace_label=settings.SCHEDLENS_POD_TRAFFIC_NAMESPACE_LABEL,
        pod_label=settings.SCHEDLENS_POD_TRAFFIC_POD_LABEL,
    )


def recent_pods_reader() -> PodReader | None:
    """What the traffic refresh reads the pods of recent binds with (``scheduler_core.traffic.pods``): the outcome
    job's pod query, against the node query's Prometheus; None in the demo without one (its binds decay)."""
    if not settings.PROMETHEUS_URL and settings.SCHEDLENS_SYNTHETIC_TRAFFIC:
        return None
    # Only with a Prometheus to ask: a heavy import the demo's synthetic traffic never needs.
    from scheduler_core.outcomes.prometheus_source import PrometheusOutcomeSource
    from scheduler_core.traffic.prometheus import PrometheusTrafficSource

    transport = PrometheusTrafficSource(
        settings.PROMETHEUS_URL,
        timeout_seconds=settings.SCHEDLENS_PROMETHEUS_TIMEOUT_SECONDS,
        retries=settings.SCHEDLENS_PROMETHEUS_RETRIES,
    )
    return PrometheusOutcomeSource(transport, pod_traffic_query()).recent_pod_bytes


def prometheus_address(query: TrafficQuery) -> str:
    """The Prometheus a query is answered by: its plugin's ``address``, else ``PROMETHEUS_URL``; empty: none."""
    return query.address or settings.PROMETHEUS_URL


def traffic_source_for(
    query: TrafficQuery, *, timeout_seconds: float | None = None, retries: int | None = None
) -> TrafficSource:
    url = prometheus_address(query)
    if not url:
        return unaddressed_source(SyntheticTrafficSource(known_node_names))
    # Only with a Prometheus to ask: a heavy import the demo's synthetic traffic never needs.
    from scheduler_core.traffic.prometheus import PrometheusTrafficSource

    return PrometheusTrafficSource(
        url,
        timeout_seconds=settings.SCHEDLENS_PROMETHEUS_TIMEOUT_SECONDS if timeout_seconds is None else timeout_seconds,
        retries=settings.SCHEDLENS_PROMETHEUS_RETRIES if retries is None else retries,
    )
