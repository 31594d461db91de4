"""The objects kept in memory: collections of Nodes, Pods, Events and NodeResources, and how they change.

Every mutation (``put_node``, ``add_pod``, a binding, ``delete_pod``, ``put_event``, ...) goes through
:meth:`ObjectStore.record_change`: a new resourceVersion (one counter for every collection, as in the API server)
and an entry in the collection's history, which is what a watch replays.
"""

from __future__ import annotations

import copy
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.support.fake_kube_api.protocol import JSON, now


@dataclass
class Collection:
    """One listable, watchable resource: its objects and the history of changes a watch replays."""

    path: str
    kind: str
    api_version: str
    key: Callable[[JSON], Any]
    objects: dict[Any, JSON] = field(default_factory=dict)
    history: list[tuple[int, str, JSON]] = field(default_factory=list)
    """(resourceVersion, event type, snapshot of the object), oldest first."""
    oldest_watchable: int = 0
    """A watch from a resourceVersion below this gets ERROR 410 Expired."""
    epoch: int = 0
    """Bumped to end every open watch of this collection."""
    watches_started: int = 0
    """Watch streams established so far (see :meth:`FakeKubeAPI.wait_for_watch`)."""


def meta_key(obj: JSON) -> str:
    return str(obj["metadata"]["name"])


def namespaced_key(obj: JSON) -> tuple[str, str]:
    meta = obj["metadata"]
    return (str(meta.get("namespace") or "default"), str(meta["name"]))


def _field(obj: JSON, dotted: str) -> str:
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def field_selector_matches(selector: str, obj: JSON) -> bool:
    """``a.b=v,c!=w`` (also ``==``), as the API server evaluates a fieldSelector on the fields it supports."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            path, value = term.split("!=", 1)
            if _field(obj, path) == value:
                return False
        else:
            path, value = term.replace("==", "=").split("=", 1)
            if _field(obj, path) != value:
                return False
    return True


def mark_scheduled(pod: JSON) -> None:
    conditions = [c for c in pod["status"].get("conditions", []) if c.get("type") != "PodScheduled"]
    conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now()})
    pod["status"]["conditions"] = conditions


class ObjectStore:
    """The state part of :class:`~tests.support.fake_kube_api.server.FakeKubeAPI`: objects created, changed, deleted."""

    lock: threading.RLock
    changed: threading.Condition
    collections: dict[str, Collection]
    pods: dict[tuple[str, str], JSON]
    _resource_version: int

    def next_resource_version(self) -> str:
        with self.lock:
            self._resource_version += 1
            return str(self._resource_version)

    def add_pod(
        self,
        name: str,
        namespace: str = "default",
        *,
        uid: str | None = None,
        node_name: str | None = None,
        scheduler_name: str = "default-scheduler",
    ) -> JSON:
        """Create (or replace, i.e. recreate) a pod; returns its stored JSON."""
        pod: JSON = {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": uid or str(uuid.uuid4()),
                "resourceVersion": self.next_resource_version(),
                "creationTimestamp": now(),
            },
            "spec": {
                "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}],
                "schedulerName": scheduler_name,
            },
            "status": {"phase": "Pending"},
        }
        if node_name:
            pod["spec"]["nodeName"] = node_name
        with self.lock:
            if (namespace, name) in self.pods:  # a recreated pod: the old one goes first
                self.delete_pod(name, namespace)
            self.record_change("pods", "ADDED", pod)
        return pod

    def pod(self, name: str, namespace: str = "default") -> JSON | None:
        with self.lock:
            return self.pods.get((namespace, name))

    def delete_pod(self, name: str, namespace: str = "default") -> None:
        with self.lock:
            pod = self.pods.get((namespace, name))
            if pod is not None:
                self.record_change("pods", "DELETED", pod)

    def set_pod_node(self, name: str, node: str, namespace: str = "default") -> JSON:
        """What a binding by someone else (kube-scheduler itself) looks like: spec.nodeName set, PodScheduled."""
        with self.lock:
            pod = self.pods[(namespace, name)]
            pod["spec"]["nodeName"] = node
            mark_scheduled(pod)
            self.record_change("pods", "MODIFIED", pod)
            return pod

    # ----- nodes, NodeResources, events -----

    def put_node(
        self, name: str, *, labels: dict[str, str] | None = None, images: list[list[str]] | None = None
    ) -> JSON:
        """Create or replace a Node (ADDED the first time, MODIFIED after)."""
        node: JSON = {
            "kind": "Node",
            "apiVersion": "v1",
            "metadata": {
                "name": name,
                "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
                "labels": {"kubernetes.io/hostname": name, **(labels or {})},
                "creationTimestamp": now(),
            },
            "spec": {},
            "status": {
                "images": [{"names": names, "sizeBytes": 1000} for names in images or []],
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        with self.lock:
            existed = name in self.collections["nodes"].objects
            self.record_change("nodes", "MODIFIED" if existed else "ADDED", node)
        return node

    def delete_node(self, name: str) -> None:
        with self.lock:
            node = self.collections["nodes"].objects.get(name)
            if node is not None:
                self.record_change("nodes", "DELETED", node)

    def put_node_resources(
        self,
        name: str,
        *,
        resources_filter: dict[str, bool] | None = None,
        resources_score: dict[str, int] | None = None,
    ) -> JSON:
        obj: JSON = {
            "apiVersion": "schedlens.io/v1alpha1",
            "kind": "NodeResources",
            "metadata": {"name": name, "uid": str(uuid.uuid4()), "generation": 1, "creationTimestamp": now()},
            "spec": {"resourcesFilter": resources_filter or {}, "resourcesScore": resources_score or {}},
        }
        with self.lock:
            existed = name in self.collections["noderesources"].objects
            self.record_change("noderesources", "MODIFIED" if existed else "ADDED", obj)
        return obj

    def delete_node_resources(self, name: str) -> None:
        with self.lock:
            obj = self.collections["noderesources"].objects.get(name)
            if obj is not None:
                self.record_change("noderesources", "DELETED", obj)

    def put_event(self, event: JSON) -> JSON:
        """Create or update a core/v1 Event (see :func:`failed_scheduling_event`)."""
        with self.lock:
            existed = namespaced_key(event) in self.collections["events"].objects
            self.record_change("events", "MODIFIED" if existed else "ADDED", event)
        return event

    # ----- every change (what watches replay) -----

    def record_change(self, collection: str, kind: str, obj: JSON) -> None:
        """Store (or delete) ``obj`` under a new resourceVersion and wake the watches."""
        with self.changed:
            store = self.collections[collection]
            rv = self.next_resource_version()
            obj["metadata"]["resourceVersion"] = rv
            if kind == "DELETED":
                store.objects.pop(store.key(obj), None)
            else:
                store.objects[store.key(obj)] = obj
            store.history.append((int(rv), kind, copy.deepcopy(obj)))
            self.changed.notify_all()
