"""Binding a pod to the chosen node: the interface the ``bind`` verb calls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from scheduler_core.extender.protocol.cluster import ClusterView


@dataclass(frozen=True, slots=True)
class BindOutcome:
    """What happened when we asked the API server to bind."""

    error: str
    """Empty on success; otherwise the text answered to kube-scheduler in ``Error`` (never contains ``%``)."""
    detail: str
    """What the API server said, for the record (e.g. ``409: already bound to the same node``)."""
    status: int | None = None
    """HTTP status of the binding call (409 also when a read-back followed), or None when none answered."""
    simulated: bool = False
    """True when no API server was involved (demo mode); the record says so."""

    @property
    def ok(self) -> bool:
        return not self.error


class Binder(Protocol):
    def bind(self, *, namespace: str, name: str, uid: str, node: str) -> BindOutcome: ...


@dataclass(frozen=True, slots=True)
class PodPlacement:
    """Where the API server says a pod is: read back to reconcile a bind whose outcome was never recorded."""

    exists: bool
    """False: the API server answered 404 (the pod was deleted)."""
    uid: str = ""
    node: str = ""
    """``spec.nodeName``; empty while the pod is not bound."""


class PlacementUnknownError(RuntimeError):
    """The API server could not say where the pod is (unreachable, timeout, 5xx, 403): ask again later."""


@runtime_checkable
class PodReader(Protocol):
    """A binder that can read a pod back (``KubernetesBinder``): its binds are recorded with an intent first, and
    an intent left without an outcome is reconciled through it (``scheduler_core.extender.record.bind_intents``)."""

    def placement(self, *, namespace: str, name: str) -> PodPlacement:
        """The pod's placement; raises :class:`PlacementUnknownError` when the API server cannot tell."""
        ...


class SimulatedBinder:
    """Demo-only binder for ``make run`` without a cluster: records the bind, calls no API.

    Never the default when a Kubernetes configuration is present: answering success without binding leaves a
    real pod assumed forever (protocol doc §3.4). Given the demo cluster (``cluster``), it refuses a node that
    cluster does not have, so a bind to a mistyped or removed node fails in the demo as it would in a cluster.
    """

    def __init__(self, cluster: ClusterView | None = None) -> None:
        self.cluster = cluster

    def bind(self, *, namespace: str, name: str, uid: str, node: str) -> BindOutcome:
        if self.cluster is not None and self.cluster.node(node) is None:
            return BindOutcome(
                error=f'node "{node}" not found',
                detail=f"simulated bind refused: the demo cluster has no node {node!r}",
                status=404,
                simulated=True,
            )
        return BindOutcome(error="", detail="simulated bind (demo mode, no API server)", simulated=True)


class UnconfiguredBinder:
    """Used when binding is asked for but no Kubernetes API is configured: fail loudly, never pretend."""

    def bind(self, *, namespace: str, name: str, uid: str, node: str) -> BindOutcome:
        return BindOutcome(
            error="schedlens has no Kubernetes API configured for binding (set KUBECONFIG or run in-cluster)",
            detail="no Kubernetes configuration",
        )
