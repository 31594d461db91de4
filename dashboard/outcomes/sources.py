"""Which source the outcome job reads for a profile's cycles: the Prometheus its ``NetworkTraffic`` plugin names
(``address``), else ``PROMETHEUS_URL`` (``dashboard.traffic.sources.prometheus_address``, as the traffic refresh
resolves it); without either, the demo's synthetic traffic (``SCHEDLENS_SYNTHETIC_TRAFFIC``), else nothing (every
read fails saying so, and no outcome is written)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from django.conf import settings

from dashboard.models import Outcome, SchedulingCycle
from dashboard.traffic.sources import NO_PROMETHEUS, pod_traffic_query
from scheduler_core.outcomes.sources import NodeAsk, OutcomeSource, PodAsk, PodFacts, Readings
from scheduler_core.outcomes.synthetic import Bind, SyntheticOutcomeSource
from scheduler_core.traffic import TrafficSourceError


def _recorded_binds(nodes: Sequence[str], start: float, end: float) -> list[Bind]:
    """The binds recorded on ``nodes`` before ``end`` whose pods still run in the synthetic demo (the last hour)."""
    rows = SchedulingCycle.objects.filter(
        outcome=Outcome.BOUND,
        chosen_node__in=list(nodes),
        finished_at__lt=datetime.fromtimestamp(end, tz=UTC),
        finished_at__gte=datetime.fromtimestamp(start - 3600, tz=UTC),
    ).values_list("chosen_node", "pod_namespace", "pod_name", "finished_at")
    return [Bind(node, ns, pod, at.timestamp()) for node, ns, pod, at in rows]


class NoPrometheusOutcomes:
    """Outside the demo without a Prometheus: nothing to read, and the job says why instead of inventing outcomes."""

    def read(self, nodes: Sequence[NodeAsk], pods: Sequence[PodAsk]) -> Readings:
        raise TrafficSourceError(NO_PROMETHEUS)

    def pod_facts(self, pods: Sequence[tuple[str, str]], at: float) -> dict[tuple[str, str], PodFacts]:
        raise TrafficSourceError(NO_PROMETHEUS)


def outcome_source(address: str | None = None) -> OutcomeSource:
    """The source of the cycles whose traffic query resolves to ``address`` (None: ``PROMETHEUS_URL``)."""
    url = settings.PROMETHEUS_URL if address is None else address
    if not url:
        return (
            SyntheticOutcomeSource(_recorded_binds) if settings.SCHEDLENS_SYNTHETIC_TRAFFIC else NoPrometheusOutcomes()
        )
    # Only with a Prometheus to ask: a heavy import the demo never needs.
    from scheduler_core.outcomes.prometheus_source import PrometheusOutcomeSource
    from scheduler_core.traffic.prometheus import PrometheusTrafficSource

    transport = PrometheusTrafficSource(
        url,
        timeout_seconds=settings.SCHEDLENS_PROMETHEUS_TIMEOUT_SECONDS,
        retries=settings.SCHEDLENS_PROMETHEUS_RETRIES,
    )
    return PrometheusOutcomeSource(transport, pod_traffic_query())
