"""The PromQL of the outcome job: many windows after binds in one request.

Each ask is an ``increase()`` over its own window, evaluated at its window's end with the ``@`` modifier (enabled
by default since Prometheus 2.33), and tagged with a label of its own (``schedlens_ask``) by ``label_replace``, so
that the asks of a batch, joined by ``or``, never share a label set and come back apart. ``increase()`` counts
the bytes of the window whatever the scrape interval and across counter resets, which is why it is used here even
for a profile whose node query is ``sum_over_time``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from scheduler_core.outcomes.sources import NodeAsk, PodAsk, PodTrafficQuery
from scheduler_core.traffic.base import TrafficSourceError
from scheduler_core.traffic.prometheus import METRIC_NAME, escape_label_value

ASK_LABEL = "schedlens_ask"
OWNER_PREFIX = "owner:"
INFO_PREFIX = "info:"
REPLICASET_PREFIX = "rs:"
MAX_EXPRESSION_CHARS = 60_000
"""A batch's expression stays under this: it travels in the request's URL."""
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def _at(end: float) -> str:
    return f"{end:.3f}"


def _tagged(expression: str, key: str) -> str:
    return f'label_replace({expression}, "{ASK_LABEL}", "{escape_label_value(key)}", "", "")'


def _regex_of(values: Iterable[str]) -> str:
    return "|".join(re.escape(v) for v in values)


def node_expression(ask: NodeAsk) -> str:
    label = ask.query.node_label
    if not _LABEL_NAME.fullmatch(label):
        raise TrafficSourceError(f"node_label {label!r} is not a valid Prometheus label name")
    matchers = (
        f'device="{escape_label_value(ask.query.device_name)}",{label}=~"{escape_label_value(_regex_of(ask.nodes))}"'
    )
    inner = f"increase({METRIC_NAME}{{{matchers}}}[{ask.seconds}s] @ {_at(ask.end)})"
    return _tagged(f"sum by ({label}) ({inner})", ask.key)


def pod_matchers(query: PodTrafficQuery, namespace: str, pod: str, *, regex: bool = False) -> str:
    """``regex``: ``pod`` is a regular expression (``=~``), not a name."""
    for label in (query.namespace_label, query.pod_label):
        if not _LABEL_NAME.fullmatch(label):
            raise TrafficSourceError(f"pod traffic label {label!r} is not a valid Prometheus label name")
    bad = [m for m in query.metrics if not _METRIC_NAME.fullmatch(m)]
    if bad or not query.metrics:
        raise TrafficSourceError(f"pod traffic metrics must be metric names, not {list(query.metrics)!r}")
    names = "|".join(query.metrics)
    return (
        f'__name__=~"{names}",{query.namespace_label}="{escape_label_value(namespace)}",'
        f'{query.pod_label}{"=~" if regex else "="}"{escape_label_value(pod)}"'
    )


def pod_expression(query: PodTrafficQuery, ask: PodAsk) -> str:
    # No container matcher: the network series are the sandbox's (container "POD" or "").
    inner = f"increase({{{pod_matchers(query, ask.namespace, ask.pod)}}}[{ask.seconds}s] @ {_at(ask.end)})"
    return _tagged(f"sum({inner})", ask.key)


def recent_pods_expressions(query: PodTrafficQuery, pods: Sequence[tuple[str, str]], seconds: int) -> list[str]:
    """The pods' own bytes over the last ``seconds`` (the node query's window, evaluated now like it), one part per
    namespace, summed by namespace and pod: what the herd estimate reconciles recent binds with
    (``scheduler_core.traffic.pods``)."""
    by_namespace: dict[str, list[str]] = {}
    for namespace, pod in pods:
        by_namespace.setdefault(namespace, []).append(pod)
    parts = []
    for namespace, names in sorted(by_namespace.items()):
        matchers = pod_matchers(query, namespace, _regex_of(names), regex=True)
        inner = f"increase({{{matchers}}}[{seconds}s])"
        parts.append(f"sum by ({query.namespace_label}, {query.pod_label}) ({inner})")
    return parts


def facts_expressions(pods: Sequence[tuple[str, str]], at: float) -> list[str]:
    """kube-state-metrics' ``kube_pod_owner`` and ``kube_pod_info`` (its ``host_network``) of each pod."""
    parts = []
    for index, (namespace, pod) in enumerate(pods):
        where = f'namespace="{escape_label_value(namespace)}",pod="{escape_label_value(pod)}"'
        parts.append(
            _tagged(
                f"max by (owner_kind, owner_name) (kube_pod_owner{{{where}}} @ {_at(at)})", f"{OWNER_PREFIX}{index}"
            )
        )
        parts.append(_tagged(f"max by (host_network) (kube_pod_info{{{where}}} @ {_at(at)})", f"{INFO_PREFIX}{index}"))
    return parts


def replicaset_expressions(replicasets: Sequence[tuple[str, str]], at: float) -> list[str]:
    """``kube_replicaset_owner`` of each ReplicaSet: the Deployment it belongs to."""
    return [
        _tagged(
            f"max by (owner_kind, owner_name) (kube_replicaset_owner{{namespace="
            f'"{escape_label_value(ns)}",replicaset="{escape_label_value(rs)}"}} @ {_at(at)})',
            f"{REPLICASET_PREFIX}{index}",
        )
        for index, (ns, rs) in enumerate(replicasets)
    ]


def batches(parts: Sequence[str], limit: int = MAX_EXPRESSION_CHARS) -> Iterator[str]:
    """``parts`` joined by ``or`` into expressions of at most ``limit`` characters (a longer part alone)."""
    batch: list[str] = []
    size = 0
    for part in parts:
        if batch and size + len(part) + 4 > limit:
            yield " or ".join(batch)
            batch, size = [], 0
        batch.append(part)
        size += len(part) + 4
    if batch:
        yield " or ".join(batch)
