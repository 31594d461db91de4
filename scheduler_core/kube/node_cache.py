"""The cluster view of a process running against a real cluster: Nodes and NodeResources, list + watch.

One :class:`KubernetesCluster` per process (built by the runtime, shared by every verb thread). Two
:class:`~scheduler_core.kube.watch.ListWatcher` threads keep it current; each watch event is applied as it
arrives, so a change is visible to the next verb after one event. Inside there is only plain data: frozen
:class:`~scheduler_core.extender.protocol.cluster.NodeInfo` and
:class:`~scheduler_core.extender.protocol.cluster.NodeResourcesSpec` in dicts that are replaced per key, so a verb
reading them never waits for a watch thread.

Once the node list has synced the view *knows all nodes*: a NodeNames entry it does not hold is not a node
of this cluster as far as schedlens can tell, and the verbs fail it with a reason instead of guessing
(:func:`scheduler_core.extender.protocol.cluster.knows_all_nodes`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from dataclasses import asdict
from typing import Any, TypeVar

import msgspec

from scheduler_core.extender.protocol import wire
from scheduler_core.extender.protocol.cluster import (
    NodeInfo,
    NodeResourcesError,
    NodeResourcesSpec,
    ResourcesBuild,
    ResourcesMemo,
    node_info,
    node_resources_spec,
)
from scheduler_core.kube.watch import (
    DEFAULT_WATCH_TIMEOUT_SECONDS,
    Backoff,
    ListWatcher,
    Resource,
    node_resources_resource,
    nodes_resource,
)

__all__ = ["KubernetesCluster"]

logger = logging.getLogger(__name__)

JSON = dict[str, Any]
_T = TypeVar("_T")


class _NodeTable:
    """Node name → NodeInfo, maintained by the nodes watcher."""

    def __init__(self, changed: Callable[[], None]) -> None:
        self.items: dict[str, NodeInfo] = {}
        self._changed = changed
        self.state = object()
        """Replaced on every change: the identity :func:`~scheduler_core.extender.protocol.cluster.nodes_state` memoizes
        by."""

    @staticmethod
    def _convert(obj: JSON) -> NodeInfo | None:
        try:
            return node_info(msgspec.convert(obj, wire.Node))
        except msgspec.ValidationError as exc:
            logger.warning("ignoring a Node the API server sent that does not decode: %s", exc)
            return None

    def replace(self, items: list[JSON]) -> None:
        fresh = {}
        for obj in items:
            info = self._convert(obj)
            if info is not None and info.name:
                fresh[info.name] = info
        self.items = fresh  # one reference swap: readers see the old table or the new one, never a mix
        self.state = object()
        self._changed()

    def apply(self, event_type: str, obj: JSON) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        if not name:
            return
        if event_type == "DELETED":
            if self.items.pop(name, None) is None:
                return
        else:
            info = self._convert(obj)
            # A node's status is written again and again (conditions, heartbeats) with nothing a plugin reads: what
            # the verbs keep per state of the nodes (every node judged once, looked-up lists) stays valid then.
            if info is None or self.items.get(name) == info:
                return
            self.items[name] = info
        self.state = object()  # after the change: a reader that saw the new state sees the new items
        self._changed()


class _NodeResourcesTable:
    """Node name → NodeResourcesSpec, maintained by the NodeResources watcher."""

    def __init__(self, changed: Callable[[], None]) -> None:
        self.items: dict[str, NodeResourcesSpec] = {}
        self._changed = changed
        self.state = object()
        """Replaced on every change: the identity :func:`~scheduler_core.extender.protocol.cluster.resources_table`
        memoizes by."""

    @staticmethod
    def _convert(obj: JSON) -> tuple[str, NodeResourcesSpec] | None:
        try:
            return node_resources_spec(obj)
        except NodeResourcesError as exc:
            # The CRD's schema makes this rare; an unreadable object counts as absent, which the plugin reports.
            logger.warning("ignoring a NodeResources object: %s", exc)
            return None

    def replace(self, items: list[JSON]) -> None:
        fresh = dict(pair for pair in map(self._convert, items) if pair is not None)
        self.items = fresh
        self.state = object()
        self._changed()

    def apply(self, event_type: str, obj: JSON) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        if not name:
            return
        converted = None if event_type == "DELETED" else self._convert(obj)
        if converted is None:
            self.items.pop(name, None)
        else:
            self.items[name] = converted[1]
        self.state = object()
        self._changed()


class KubernetesCluster:
    """A :class:`~scheduler_core.extender.protocol.cluster.ClusterView` fed by watches of Nodes and NodeResources
    objects."""

    def __init__(
        self,
        *,
        nodes: Resource,
        node_resources: Resource,
        watch_timeout_seconds: int = DEFAULT_WATCH_TIMEOUT_SECONDS,
        backoff: Callable[[], Backoff] = Backoff,
        wait: Callable[[float], object] | None = None,
    ) -> None:
        self._changed = threading.Condition()
        self._generation = 0
        self._nodes = _NodeTable(self._bump)
        self._specs = _NodeResourcesTable(self._bump)
        self._memo = ResourcesMemo()
        self._node_watch = ListWatcher(
            nodes,
            self._nodes,
            watch_timeout_seconds=watch_timeout_seconds,
            backoff=backoff(),
            wait=wait,
        )
        self._specs_watch = ListWatcher(
            node_resources,
            self._specs,
            watch_timeout_seconds=watch_timeout_seconds,
            backoff=backoff(),
            missing_ok=True,
            wait=wait,
        )

    @classmethod
    def from_api_client(cls, api_client: Any, **options: Any) -> KubernetesCluster:
        return cls(nodes=nodes_resource(api_client), node_resources=node_resources_resource(api_client), **options)

    # ----- lifecycle -----

    def start(self) -> KubernetesCluster:
        self._node_watch.start()
        self._specs_watch.start()
        return self

    def stop(self) -> None:
        self._node_watch.stop()
        self._specs_watch.stop()

    # ----- ClusterView -----

    def node(self, name: str) -> NodeInfo | None:
        return self._nodes.items.get(name)

    def node_lookup(self) -> Callable[[str], NodeInfo | None]:
        return self._nodes.items.get  # a dict's own get: every candidate of a call looked up in C

    def nodes_state(self) -> object:
        return self._nodes.state

    def node_resources(self, name: str) -> NodeResourcesSpec | None:
        return self._specs.items.get(name)

    def node_names(self) -> list[str]:
        return list(self._nodes.items)

    def resources_table(self, key: Hashable, build: ResourcesBuild[_T]) -> _T:
        specs = self._specs
        # The state is read before the copy: a change in between makes a table stale for one more call at most
        # (the next call sees the new state and rebuilds). ``dict(...)`` copies atomically under the GIL.
        result: _T = self._memo.get(specs.state, lambda: dict(specs.items), key, build)
        return result

    @property
    def knows_all_nodes(self) -> bool:
        """True once the node list has been read: from then on a name not held here is not a node we know."""
        return self._node_watch.synced

    # ----- readiness -----

    @property
    def synced(self) -> bool:
        """Both collections listed at least once (a NodeResources CRD that is not installed counts as listed)."""
        return self._node_watch.synced and self._specs_watch.synced

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self.wait_for(lambda: self.synced, timeout)

    def status(self) -> dict[str, Any]:
        """For ``/readyz``: per collection whether it synced, how many objects, the last error."""
        nodes, specs = self._node_watch.status(), self._specs_watch.status()
        return {
            "synced": self.synced,
            "nodes": {**asdict(nodes), "count": len(self._nodes.items)},
            "noderesources": {**asdict(specs), "count": len(self._specs.items)},
        }

    # ----- change notification (tests and start-up waits) -----

    @property
    def generation(self) -> int:
        """Counts applied lists and events."""
        return self._generation

    def wait_for(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        """Block until ``predicate()`` holds after some applied change (or already holds); False on timeout."""
        with self._changed:
            return self._changed.wait_for(predicate, timeout)

    def _bump(self) -> None:
        with self._changed:
            self._generation += 1
            self._changed.notify_all()
