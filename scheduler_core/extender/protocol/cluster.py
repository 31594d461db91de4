"""Frozen domain views of pods, nodes and NodeResources objects, converted once from the wire."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol, TypeVar

import msgspec

from scheduler_core.extender.lru import LRU
from scheduler_core.extender.protocol import wire
from scheduler_core.extender.protocol.decode_errors import document_refusal
from scheduler_core.extender.protocol.workloads import WorkloadKey, override_bytes, workload_of

NODE_RESOURCES_GROUP = "schedlens.io"
NODE_RESOURCES_VERSION = "v1alpha1"
NODE_RESOURCES_PLURAL = "noderesources"


def is_extended_resource(name: str) -> bool:
    """Kubernetes' rule: a domain-prefixed name outside ``kubernetes.io/`` and not ``requests.*``."""
    return "/" in name and not name.startswith(("kubernetes.io/", "requests.")) and ".kubernetes.io/" not in name


@lru_cache(maxsize=1 << 16)
def normalize_image(name: str) -> str:
    """Compare images the way the container runtime names them.

    Cached: a node lists dozens of images and a full-Nodes call carries every node, so the same few hundred
    names are normalized thousands of times per call (two thirds of a 1000-node filter before the cache).

    kubelet reports ``docker.io/library/nginx:1.25.4`` where the pod says ``nginx:1.25.4``; upstream
    ImageLocality only adds ``:latest`` and so misses such short names. A digest reference is kept as is.
    """
    if "@" not in name and ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    first, _, rest = name.partition("/")
    if not rest:
        return f"docker.io/library/{name}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{name}"
    return name


@dataclass(frozen=True, slots=True)
class PodInfo:
    namespace: str
    name: str
    uid: str
    resource_version: str = ""
    requested_resources: frozenset[str] = frozenset()
    """Resource names requested (or limited) by any container or init container."""
    images: tuple[str, ...] = ()
    """Normalized image references of containers and init containers, without duplicates."""
    workload: WorkloadKey | None = None
    """The workload its controlling owner stands for (``scheduler_core.extender.scoring.workload_traffic``); None: no
    owner."""
    assumed_bytes_override: float | None = None
    """The pod's ``schedlens.io/assumed-bytes`` annotation: the herd estimate assumes this for it, whatever else."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def extended_resources(self) -> frozenset[str]:
        return frozenset(r for r in self.requested_resources if is_extended_resource(r))


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    images: frozenset[str] = frozenset()
    """Normalized names of the images present on the node (``status.images``)."""


@dataclass(frozen=True, slots=True)
class NodeResourcesSpec:
    """The ``spec`` of one cluster-scoped ``NodeResources`` object (its name is the node's name)."""

    resources_filter: Mapping[str, bool] = field(default_factory=dict)
    resources_score: Mapping[str, int] = field(default_factory=dict)


def pod_info(pod: wire.Pod) -> PodInfo:
    requested: set[str] = set()
    images: list[str] = []
    for container in (pod.spec.containers or []) + (pod.spec.init_containers or []):
        if container.image:
            image = normalize_image(container.image)
            if image not in images:
                images.append(image)
        if container.resources is not None:
            requested.update(container.resources.requests or ())
            requested.update(container.resources.limits or ())
    meta = pod.metadata
    owners = meta.owner_references or ()
    owner = next((o for o in owners if o.controller), owners[0] if owners else None)
    return PodInfo(
        namespace=meta.namespace,
        name=meta.name,
        uid=meta.uid,
        resource_version=meta.resource_version,
        requested_resources=frozenset(requested),
        images=tuple(images),
        workload=workload_of(meta.namespace, owner.kind, owner.name) if owner is not None else None,
        assumed_bytes_override=override_bytes(meta.annotations),
    )


def node_info(node: wire.Node) -> NodeInfo:
    images = frozenset(map(normalize_image, [n for image in node.status.images or () for n in image.names or ()]))
    return NodeInfo(name=node.metadata.name, labels=node.metadata.labels or {}, images=images)


class NodeResourcesError(ValueError):
    pass


class _NodeResourcesSpecWire(msgspec.Struct, rename="camel", forbid_unknown_fields=False):
    resources_filter: dict[str, bool] = msgspec.field(default_factory=dict)
    resources_score: dict[str, int] = msgspec.field(default_factory=dict)


def node_resources_spec(obj: Mapping[str, Any]) -> tuple[str, NodeResourcesSpec]:
    """Convert one NodeResources object (as the API serves it) into (node name, spec)."""
    try:
        name = str(obj["metadata"]["name"])
    except (KeyError, TypeError):
        raise NodeResourcesError("NodeResources object without metadata.name") from None
    spec_document = obj.get("spec") or {}
    try:
        spec = msgspec.convert(spec_document, _NodeResourcesSpecWire)
    except msgspec.ValidationError as exc:
        message, path = document_refusal(spec_document, _NodeResourcesSpecWire, exc)
        raise NodeResourcesError(f"NodeResources {name!r}: field spec{path[1:]}: {message}") from None
    return name, NodeResourcesSpec(resources_filter=spec.resources_filter, resources_score=spec.resources_score)


class ClusterView(Protocol):
    """What the plugins may know about the cluster beyond the request itself."""

    def node(self, name: str) -> NodeInfo | None: ...

    def node_resources(self, name: str) -> NodeResourcesSpec | None: ...


def knows_all_nodes(view: ClusterView) -> bool:
    """True when ``view`` holds every node of the cluster (a synced node cache): a name it lacks is unknown.

    Views without the ``knows_all_nodes`` property (static, file) make no such claim.
    """
    return bool(getattr(view, "knows_all_nodes", False))


def node_lookup(view: ClusterView) -> Callable[[str], NodeInfo | None]:
    """``view.node``, or a faster equivalent for looking up every candidate of one call (a dict's ``get``).

    One call sees one state of the view: a file view re-read in the middle of a call cannot mix two files.
    """
    lookup = getattr(view, "node_lookup", None)
    return lookup() if callable(lookup) else view.node


def nodes_state(view: ClusterView) -> object | None:
    """An object replaced whenever ``view``'s nodes change, to memoize by; None: the view cannot tell."""
    state = getattr(view, "nodes_state", None)
    return state() if callable(state) else None


def resources_lookup(view: ClusterView) -> Callable[[str], NodeResourcesSpec | None]:
    """``view.node_resources``, or a faster equivalent for one call (see :func:`node_lookup`)."""
    lookup = getattr(view, "resources_lookup", None)
    return lookup() if callable(lookup) else view.node_resources


_T = TypeVar("_T")
ResourcesBuild = Callable[[Mapping[str, "NodeResourcesSpec"]], _T]


def resources_table(view: ClusterView, key: Hashable, build: ResourcesBuild[_T]) -> _T | None:
    """``build(every node's NodeResourcesSpec)``, memoized by ``key`` until the view's specs change.

    A plugin turns the pod's wanted resources into one node → answer table per key, so a 5000-node call is a
    C-level ``map`` over that table instead of one Python step per node. None: the view cannot memoize (the
    caller takes its per-node path).
    """
    table = getattr(view, "resources_table", None)
    return table(key, build) if callable(table) else None


class ResourcesMemo:
    """The tables :func:`resources_table` built for one state of a view's specs, at most ``size`` of them."""

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._current: tuple[object, LRU[Hashable, Any]] = (None, LRU(size))
        """(state, tables), replaced as one object so that a reader never pairs a state with another's tables."""

    def get(
        self, state: object, specs: Callable[[], Mapping[str, NodeResourcesSpec]], key: Hashable, build: Any
    ) -> Any:
        current_state, tables = self._current
        if state is not current_state:  # the specs changed: every table is stale
            tables = LRU(self._size)
            self._current = (state, tables)
        return tables.get_or_make(key, lambda: build(specs()))


class StaticCluster:
    """An immutable in-memory cluster view (tests, the simulator, a file)."""

    def __init__(
        self,
        nodes: Iterable[NodeInfo] = (),
        node_resources: Mapping[str, NodeResourcesSpec] | None = None,
    ) -> None:
        self._nodes = {n.name: n for n in nodes}
        self._node_resources = dict(node_resources or {})
        self._memo = ResourcesMemo()

    def node(self, name: str) -> NodeInfo | None:
        return self._nodes.get(name)

    def node_resources(self, name: str) -> NodeResourcesSpec | None:
        return self._node_resources.get(name)

    def node_names(self) -> list[str]:
        return list(self._nodes)

    def node_lookup(self) -> Callable[[str], NodeInfo | None]:
        return self._nodes.get

    def nodes_state(self) -> object:
        return self._nodes  # immutable: the mapping itself is the state

    def resources_lookup(self) -> Callable[[str], NodeResourcesSpec | None]:
        return self._node_resources.get

    def resources_table(self, key: Hashable, build: ResourcesBuild[_T]) -> _T:
        # Immutable: the specs mapping itself is the state.
        result: _T = self._memo.get(self._node_resources, lambda: self._node_resources, key, build)
        return result

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> StaticCluster:
        """Build from ``{"nodes": [<v1.Node>...], "noderesources": [<NodeResources>...]}``."""
        nodes = [node_info(msgspec.convert(item, wire.Node)) for item in document.get("nodes") or ()]
        specs = dict(node_resources_spec(item) for item in document.get("noderesources") or ())
        return cls(nodes, specs)


class FileCluster:
    """A cluster view read from a JSON file and re-read when the file changes (the demo cluster).

    Production clusters use the Kubernetes API instead; this keeps ``make run`` free of any API server.
    """

    def __init__(self, path: str) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._mtime = -1.0
        self._checked_at = -1e9
        self._view = StaticCluster()

    def _current(self) -> StaticCluster:
        # A stat per node lookup would cost more than the plugins themselves: look once a second at most.
        now = time.monotonic()
        if now - self._checked_at < 1.0:
            return self._view
        self._checked_at = now
        try:
            mtime = os.stat(self._path).st_mtime
        except OSError:
            return self._view
        if mtime != self._mtime:
            with self._lock:
                if mtime != self._mtime:
                    with open(self._path, encoding="utf-8") as handle:
                        self._view = StaticCluster.from_document(json.load(handle))
                    self._mtime = mtime
        return self._view

    def node(self, name: str) -> NodeInfo | None:
        return self._current().node(name)

    def node_resources(self, name: str) -> NodeResourcesSpec | None:
        return self._current().node_resources(name)

    def node_names(self) -> list[str]:
        return self._current().node_names()

    def node_lookup(self) -> Callable[[str], NodeInfo | None]:
        return self._current().node_lookup()

    def nodes_state(self) -> object:
        return self._current().nodes_state()

    def resources_lookup(self) -> Callable[[str], NodeResourcesSpec | None]:
        return self._current().resources_lookup()

    def resources_table(self, key: Hashable, build: ResourcesBuild[_T]) -> _T:
        return self._current().resources_table(key, build)
