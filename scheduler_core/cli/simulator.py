"""kube-scheduler in a box: a synthetic cluster and a client that calls the extender the way kube-scheduler does.

The client follows ``pkg/scheduler/extender.go`` and ``schedule_one.go`` (v1.28): one keep-alive HTTP/1.1
connection, ``POST <urlPrefix>/filter`` with the pod and the candidates (``NodeNames`` when
nodeCacheCapable, full ``Nodes`` otherwise), ``prioritize`` only when two or more nodes survive, scores
multiplied by ``weight × 10``, the highest total wins with random tie-breaking, then ``bind``.
"""

from __future__ import annotations

import http.client
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO
from urllib.parse import urlsplit

import msgspec

from scheduler_core.extender.record.structs import BIND, FILTER, PRIORITIZE

IMAGE_CATALOG = (
    "nginx:1.25.4",
    "redis:7.2.4",
    "postgres:16.2",
    "registry.k8s.io/pause:3.9",
    "ghcr.io/example/api:2.4.1",
    "ghcr.io/example/worker:2.4.1",
    "quay.io/prometheus/node-exporter:v1.7.0",
    "busybox:1.36",
    "python:3.11-slim",
    "envoyproxy/envoy:v1.29.1",
)
EXTENDED_RESOURCES = ("example.com/gpu", "example.com/nic-bandwidth")
NAMESPACES = ("shop", "payments", "search", "analytics", "platform")
APPS = ("web", "api", "worker", "cache", "ingest", "report")


def _uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def make_node(name: str, rng: random.Random) -> dict[str, Any]:
    """A Node as kube-scheduler's informer serialises it (no kind/apiVersion), 10–20 KB like real ones."""
    zone = f"zone-{rng.randint(1, 3)}"
    images = rng.sample(IMAGE_CATALOG, rng.randint(2, len(IMAGE_CATALOG)))
    # Real nodes carry dozens of images with digests; that is what makes full-Nodes payloads heavy.
    filler = [f"registry.example.com/team-{i}/service-{rng.randint(1, 999)}:{rng.randint(1, 20)}.0" for i in range(30)]
    capacity = {
        "cpu": str(rng.choice((4, 8, 16, 32))),
        "memory": f"{rng.choice((16, 32, 64))}Gi",
        "pods": "110",
    }
    if rng.random() < 0.3:
        capacity["example.com/gpu"] = str(rng.choice((1, 2, 4)))
    return {
        "metadata": {
            "name": name,
            "uid": _uid(rng),
            "resourceVersion": str(rng.randint(1000, 99999)),
            "creationTimestamp": "2026-01-05T08:00:00Z",
            "labels": {
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "topology.kubernetes.io/zone": zone,
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"podCIDR": f"10.244.{rng.randint(0, 255)}.0/24"},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "lastHeartbeatTime": "2026-11-22T10:00:00Z",
                    "lastTransitionTime": "2026-01-05T08:01:00Z",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                }
            ],
            "addresses": [{"type": "InternalIP", "address": f"10.0.{rng.randint(0, 255)}.{rng.randint(1, 254)}"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": uuid.UUID(int=rng.getrandbits(128)).hex,
                "systemUUID": _uid(rng),
                "bootID": _uid(rng),
                "kernelVersion": "6.1.0-18-amd64",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.13",
                "kubeletVersion": "v1.28.7",
                "kubeProxyVersion": "v1.28.7",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": [
                {
                    "names": [
                        f"docker.io/library/{i}@sha256:{uuid.UUID(int=rng.getrandbits(128)).hex * 2}",
                        i,
                    ],
                    "sizeBytes": rng.randint(1_000_000, 900_000_000),
                }
                for i in images + filler
            ],
        },
    }


def make_node_resources(name: str, node: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    has_gpu = "example.com/gpu" in node["status"]["capacity"]
    return {
        "apiVersion": "schedlens.io/v1alpha1",
        "kind": "NodeResources",
        "metadata": {"name": name},
        "spec": {
            "resourcesFilter": {"example.com/gpu": has_gpu, "example.com/nic-bandwidth": rng.random() < 0.8},
            "resourcesScore": {
                "example.com/gpu": rng.randint(40, 100) if has_gpu else 0,
                "example.com/nic-bandwidth": rng.randint(0, 100),
            },
        },
    }


@dataclass
class SyntheticCluster:
    nodes: list[dict[str, Any]]
    node_resources: list[dict[str, Any]]

    @property
    def node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.nodes]

    def document(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "noderesources": self.node_resources}


def make_cluster(node_count: int, seed: int = 7, without_cr: float = 0.05) -> SyntheticCluster:
    rng = random.Random(seed)
    width = max(3, len(str(node_count)))
    nodes = [make_node(f"node-{i:0{width}d}", rng) for i in range(1, node_count + 1)]
    resources = [make_node_resources(n["metadata"]["name"], n, rng) for n in nodes if rng.random() >= without_cr]
    return SyntheticCluster(nodes, resources)


def make_pod(rng: random.Random, scheduler_name: str = "schedlens-scheduler") -> dict[str, Any]:
    app = rng.choice(APPS)
    suffix = "".join(rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
    name = f"{app}-{rng.randint(100000, 999999):x}-{suffix}"
    requests: dict[str, str] = {
        "cpu": f"{rng.choice((100, 250, 500))}m",
        "memory": f"{rng.choice((64, 128, 256))}Mi",
    }
    roll = rng.random()
    if roll < 0.15:
        requests["example.com/gpu"] = "1"
    elif roll < 0.35:
        requests["example.com/nic-bandwidth"] = "1"
    return {
        "metadata": {
            "name": name,
            "generateName": name[:-5],
            "namespace": rng.choice(NAMESPACES),
            "uid": _uid(rng),
            "resourceVersion": str(rng.randint(100000, 999999)),
            "creationTimestamp": "2026-11-22T10:00:00Z",
            "labels": {"app": app},
            # Its ReplicaSet, as a Deployment's pods have one (no draw from ``rng``: the pods stay what they were).
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name[:-6], "controller": True}],
        },
        "spec": {
            "containers": [
                {
                    "name": app,
                    "image": rng.choice(IMAGE_CATALOG),
                    "resources": {"limits": dict(requests), "requests": requests},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "schedulerName": scheduler_name,
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {"phase": "Pending", "qosClass": "Guaranteed"},
    }


class ExtenderCallError(RuntimeError):
    pass


class ExtenderClient:
    """Calls one extender like kube-scheduler's HTTPExtender: one keep-alive connection, exact bodies."""

    def __init__(self, url_prefix: str, timeout: float = 5.0) -> None:
        parts = urlsplit(url_prefix.rstrip("/"))
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.base_path = parts.path
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None
        self.connections_opened = 0

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            self.connections_opened += 1
        return self._conn

    def call(self, verb: str, body: bytes) -> Any:
        headers = {
            "Content-Type": "application/json",
            "Accept-Encoding": "gzip",
            "User-Agent": "Go-http-client/1.1",
        }
        for attempt in (1, 2):
            conn = self._connection()
            try:
                conn.request("POST", f"{self.base_path}/{verb}", body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
            except (http.client.HTTPException, ConnectionError) as exc:
                conn.close()
                self._conn = None
                if attempt == 2:
                    raise ExtenderCallError(f"{verb}: {exc}") from exc
                continue
            if response.status != 200:
                raise ExtenderCallError(f"failed {verb} with extender, code {response.status}: {data[:200]!r}")
            return msgspec.json.decode(data)
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


@dataclass
class PlacementResult:
    pod: str
    node: str | None
    feasible: int
    error: str = ""


@dataclass
class SimulationStats:
    pods: int = 0
    bound: int = 0
    unschedulable: int = 0
    errors: int = 0
    placements: dict[str, int] = field(default_factory=dict)


def _encode_args(pod: dict[str, Any], nodes: list[dict[str, Any]], node_cache_capable: bool) -> bytes:
    if node_cache_capable:
        payload = {"Pod": pod, "Nodes": None, "NodeNames": [n["metadata"]["name"] for n in nodes]}
    else:
        payload = {"Pod": pod, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}
    return msgspec.json.encode(payload)


def failed_scheduling_message(total: int, answer: Mapping[str, Any] | None, own: Mapping[str, int]) -> str:
    """The FailedScheduling message kube-scheduler v1.28 writes for an attempt no node passed: its own filters'
    counts by reason (``own``) and, per node, the extender's answer (``FailedNodes``, ``FailedAndUnresolvableNodes``),
    identical strings counted together, sorted, then the preemption part."""
    reasons = Counter(own)
    for key in ("FailedNodes", "FailedAndUnresolvableNodes"):
        for reason in ((answer or {}).get(key) or {}).values():
            reasons[str(reason)] += 1
    items = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    return (
        f"0/{total} nodes are available: {items}. "
        f"preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling."
    )


class KubeSchedulerSimulator:
    def __init__(
        self,
        client: ExtenderClient,
        cluster: SyntheticCluster,
        *,
        node_cache_capable: bool = True,
        weight: int = 1,
        bind: bool = True,
        seed: int = 11,
    ) -> None:
        self.client = client
        self.cluster = cluster
        self.node_cache_capable = node_cache_capable
        self.weight = weight
        self.bind = bind
        self.rng = random.Random(seed)
        self._by_name = {n["metadata"]["name"]: n for n in cluster.nodes}

    def schedule(self, pod: dict[str, Any]) -> PlacementResult:
        name = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        try:
            result = self.client.call(FILTER, _encode_args(pod, self.cluster.nodes, self.node_cache_capable))
        except ExtenderCallError as exc:
            return PlacementResult(name, None, 0, str(exc))
        if result.get("Error"):
            return PlacementResult(name, None, 0, result["Error"])
        if self.node_cache_capable and result.get("NodeNames") is not None:
            feasible = [self._by_name[n] for n in result["NodeNames"]]
        elif result.get("Nodes") is not None:
            feasible = result["Nodes"]["items"]
        else:
            feasible = []
        if not feasible:
            return PlacementResult(name, None, 0)
        if len(feasible) == 1:
            chosen = feasible[0]["metadata"]["name"]
        else:
            try:
                scores = self.client.call(PRIORITIZE, _encode_args(pod, feasible, self.node_cache_capable))
            except ExtenderCallError:
                scores = []  # kube-scheduler ignores prioritize failures
            totals = {n["metadata"]["name"]: 0 for n in feasible}
            for entry in scores or []:
                if entry["Host"] in totals:
                    totals[entry["Host"]] += entry["Score"] * self.weight * 10
            best = max(totals.values())
            chosen = self.rng.choice([n for n, total in totals.items() if total == best])
        if self.bind:
            meta = pod["metadata"]
            body = msgspec.json.encode(
                {
                    "PodName": meta["name"],
                    "PodNamespace": meta["namespace"],
                    "PodUID": meta["uid"],
                    "Node": chosen,
                }
            )
            try:
                answer = self.client.call(BIND, body)
            except ExtenderCallError as exc:
                return PlacementResult(name, None, len(feasible), str(exc))
            if answer.get("Error"):
                return PlacementResult(name, None, len(feasible), answer["Error"])
        return PlacementResult(name, chosen, len(feasible))

    def refuse(self, pod: dict[str, Any], nodes: list[dict[str, Any]]) -> dict[str, Any]:
        """One attempt kube-scheduler's own filters left ``nodes`` for: our filter's answer (no prioritize, no bind)."""
        answer = self.client.call(FILTER, _encode_args(pod, nodes, self.node_cache_capable))
        return answer if isinstance(answer, dict) else {}

    def run(
        self,
        pods: int,
        *,
        progress: TextIO | None = None,
        on_result: Callable[[PlacementResult], None] | None = None,
    ) -> SimulationStats:
        stats = SimulationStats()
        started = time.monotonic()
        for index in range(pods):
            result = self.schedule(make_pod(self.rng))
            stats.pods += 1
            if result.error:
                stats.errors += 1
            elif result.node is None:
                stats.unschedulable += 1
            else:
                stats.bound += 1
                stats.placements[result.node] = stats.placements.get(result.node, 0) + 1
            if on_result is not None:
                on_result(result)
            if progress is not None:
                _progress(progress, index + 1, pods, time.monotonic() - started)
        if progress is not None:
            progress.write("\n")
        return stats


def _progress(out: TextIO, done: int, total: int, elapsed: float) -> None:
    width = 30
    filled = int(width * done / total) if total else width
    rate = done / elapsed if elapsed > 0 else 0.0
    out.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} pods  {rate:.0f} pods/s")
    out.flush()
