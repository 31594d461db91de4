"""The outcome job's reads from Prometheus: node and pod traffic in windows after binds, and pods' facts from
kube-state-metrics. The HTTP goes through :class:`~scheduler_core.traffic.prometheus.PrometheusTrafficSource` (its
deadline per attempt and its retries), the PromQL is ``scheduler_core.outcomes.queries``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from scheduler_core.outcomes import queries
from scheduler_core.outcomes.sources import NodeAsk, PodAsk, PodFacts, PodTrafficQuery, Readings
from scheduler_core.traffic.base import TrafficQuery
from scheduler_core.traffic.prometheus import PrometheusTrafficSource


class PrometheusOutcomeSource:
    def __init__(self, transport: PrometheusTrafficSource, pod_query: PodTrafficQuery) -> None:
        self.transport = transport
        self.pod_query = pod_query
        self.requests = 0
        """Queries sent so far (the benchmark's count)."""

    def _samples(self, parts: Sequence[str], address: str = "") -> list[tuple[Mapping[str, str], float]]:
        found: list[tuple[Mapping[str, str], float]] = []
        for expression in queries.batches(parts):
            self.requests += 1
            found.extend(self.transport.vector(expression, address=address))
        return found

    def read(self, nodes: Sequence[NodeAsk], pods: Sequence[PodAsk]) -> Readings:
        node_bytes: dict[str, dict[str, float]] = {}
        by_address: dict[str, list[NodeAsk]] = {}
        for ask in nodes:
            by_address.setdefault(ask.query.address, []).append(ask)
        for address, asks in by_address.items():
            labels_of = {ask.key: ask.query.node_label for ask in asks}
            for labels, value in self._samples([queries.node_expression(a) for a in asks], address):
                key = labels.get(queries.ASK_LABEL, "")
                node = labels.get(labels_of.get(key, ""), "")
                if key in labels_of and node and math.isfinite(value) and value >= 0:
                    node_bytes.setdefault(key, {})[node] = value
        pod_bytes: dict[str, float] = {}
        expressions = [queries.pod_expression(self.pod_query, a) for a in pods]
        for labels, value in self._samples(expressions, self.pod_query.address):
            if math.isfinite(value) and value >= 0:
                pod_bytes[labels.get(queries.ASK_LABEL, "")] = value
        return Readings(node_bytes=node_bytes, pod_bytes=pod_bytes)

    def recent_pod_bytes(self, query: TrafficQuery, pods: Sequence[str]) -> dict[str, float]:
        """``namespace/name`` → the pod's own bytes over ``query``'s window, from ``query``'s Prometheus (a
        :data:`scheduler_core.traffic.pods.PodReader`); a pod without series is absent."""
        pairs = [(namespace, name) for namespace, _, name in (pod.partition("/") for pod in pods) if name]
        wanted = {f"{namespace}/{name}" for namespace, name in pairs}
        expressions = queries.recent_pods_expressions(self.pod_query, pairs, query.window_seconds)
        found: dict[str, float] = {}
        for labels, value in self._samples(expressions, query.address or self.pod_query.address):
            key = f"{labels.get(self.pod_query.namespace_label, '')}/{labels.get(self.pod_query.pod_label, '')}"
            if key in wanted and math.isfinite(value) and value >= 0:  # a regex may match more than was asked
                found[key] = value
        return found

    def pod_facts(self, pods: Sequence[tuple[str, str]], at: float) -> dict[tuple[str, str], PodFacts]:
        owners: dict[int, tuple[str, str]] = {}
        host: dict[int, bool] = {}
        for labels, _ in self._samples(queries.facts_expressions(pods, at), self.pod_query.address):
            key = labels.get(queries.ASK_LABEL, "")
            if key.startswith(queries.OWNER_PREFIX):
                owners[int(key.removeprefix(queries.OWNER_PREFIX))] = (
                    labels.get("owner_kind", ""),
                    labels.get("owner_name", ""),
                )
            elif key.startswith(queries.INFO_PREFIX):
                index = int(key.removeprefix(queries.INFO_PREFIX))
                host[index] = host.get(index, False) or labels.get("host_network", "") == "true"
        # A ReplicaSet's pods belong to its Deployment, when it has one.
        replicasets = sorted({(pods[i][0], name) for i, (kind, name) in owners.items() if kind == "ReplicaSet"})
        deployments: dict[tuple[str, str], str] = {}
        expressions = queries.replicaset_expressions(replicasets, at)
        for labels, _ in self._samples(expressions, self.pod_query.address) if replicasets else []:
            index = int(labels.get(queries.ASK_LABEL, "").removeprefix(queries.REPLICASET_PREFIX) or -1)
            if 0 <= index < len(replicasets) and labels.get("owner_kind") == "Deployment":
                deployments[replicasets[index]] = labels.get("owner_name", "")
        facts: dict[tuple[str, str], PodFacts] = {}
        for index, pod in enumerate(pods):
            kind, name = owners.get(index, ("", ""))
            if kind == "ReplicaSet" and (pod[0], name) in deployments:
                kind, name = "Deployment", deployments[(pod[0], name)]
            facts[pod] = PodFacts(
                workload_kind=kind,
                workload_name=name,
                host_network=host.get(index, False),
                known=index in owners or index in host,
            )
        return facts
