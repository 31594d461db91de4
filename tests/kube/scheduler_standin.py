"""A kube-scheduler stand-in: reads a ``KubeSchedulerConfiguration`` file field by field as kube-scheduler v1.28 reads
it, and schedules the cluster's pending pods through the extenders it names, so a test shows what a configuration
file makes a real kube-scheduler do with schedlens.

What it reads, and what kube-scheduler does with it (extender-protocol.md §2, §3; kube-scheduler's options.go):

- ``clientConnection.kubeconfig``: the API server, from that one file's current context (kube-scheduler never reads
  ``KUBECONFIG``); empty means the in-cluster service account, and outside a cluster kube-scheduler exits.
- ``leaderElection`` (v1 defaults: on, lease ``kube-system/kube-scheduler``): with it on, kube-scheduler schedules
  nothing until it holds the lease, which needs the lease's namespace to exist and nobody else to hold it.
- ``profiles[].schedulerName`` (default ``default-scheduler``): only pods naming one are its pods.
- each extender: ``managedResources`` (IsInterested), ``urlPrefix`` + ``/`` + verb, ``filterVerb``,
  ``prioritizeVerb`` with ``weight`` (scores × weight × 10), ``bindVerb`` (else the default binder creates the
  Binding), ``nodeCacheCapable`` (``NodeNames`` or full ``Nodes``), ``ignorable`` (an ignorable filter that fails is
  skipped; ignorable extenders filter last), ``httpTimeout`` (default 5 s).

Its in-tree plugins are left out: every node of the cluster is feasible before the extenders run. Ties go to the
first node in the feasible order (kube-scheduler draws at random among them).
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

JSON = dict[str, Any]

FRESH_CLUSTER_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
"""What a new cluster (kubeadm, kind) has before anything is applied."""
THE_CLUSTERS_SCHEDULER_LEASE = ("kube-system", "kube-scheduler")
"""Held by the cluster's own kube-scheduler, and v1's default lease."""
EXTENDER_SCORE_FACTOR = 10  # MaxNodeScore / MaxExtenderPriority
# Loopback is never proxied by kube-scheduler (§2.4); neither is anything the stand-in calls.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class WouldNotSchedule(AssertionError):
    """A real kube-scheduler started with this configuration would schedule nothing, for the reason given."""


class ExtenderCallFailed(Exception):
    """A transport error, a status other than 200, or a non-empty ``Error`` (§2.2)."""


def interested(extender: Mapping[str, Any], pod: JSON) -> bool:
    """kube-scheduler's IsInterested: every pod without ``managedResources``, else only a pod whose containers or init
    containers name one of them in their requests or limits (the value does not matter)."""
    managed = {item["name"] for item in extender.get("managedResources") or []}
    if not managed:
        return True
    spec = pod.get("spec", {})
    for container in [*spec.get("containers", []), *spec.get("initContainers", [])]:
        resources = container.get("resources") or {}
        if managed & {*(resources.get("requests") or {}), *(resources.get("limits") or {})}:
            return True
    return False


_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def timeout_seconds(extender: Mapping[str, Any]) -> float:
    """``httpTimeout`` as a Go duration string; 0 or unset is 5 s (applied when the client is built, §2.4)."""
    raw = str(extender.get("httpTimeout") or "0s")
    unit = r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)"
    assert re.fullmatch(f"(?:{unit})+", raw), f"httpTimeout {raw!r} is not a Go duration"
    parts = re.findall(unit, raw)
    seconds = sum(float(number) * _DURATION_UNITS[unit] for number, unit in parts)
    return seconds or 5.0


def api_server(config: Mapping[str, Any], *, in_cluster: str | None = None) -> str:
    """The API server kube-scheduler talks to: ``clientConnection.kubeconfig``'s current context, else in-cluster."""
    kubeconfig = str((config.get("clientConnection") or {}).get("kubeconfig") or "")
    if not kubeconfig:
        if in_cluster is None:
            raise WouldNotSchedule(
                "no clientConnection.kubeconfig and not in a cluster: kube-scheduler exits (unable to load "
                "in-cluster configuration, KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined)"
            )
        return in_cluster
    # clientcmd reads a relative path against kube-scheduler's working directory, which nobody can promise.
    assert os.path.isabs(kubeconfig), f"clientConnection.kubeconfig {kubeconfig!r} is relative"
    if not os.path.isfile(kubeconfig):
        raise WouldNotSchedule(f"clientConnection.kubeconfig {kubeconfig} does not exist")
    loaded = yaml.safe_load(Path(kubeconfig).read_text(encoding="utf-8")) or {}
    current = loaded.get("current-context")
    contexts = {c["name"]: c["context"] for c in loaded.get("contexts") or []}
    clusters = {c["name"]: c["cluster"] for c in loaded.get("clusters") or []}
    if current not in contexts or contexts[current].get("cluster") not in clusters:
        raise WouldNotSchedule(f"{kubeconfig}: its current context {current!r} is not defined in that file")
    return str(clusters[contexts[current]["cluster"]]["server"]).rstrip("/")


def check_leader_election(
    config: Mapping[str, Any], *, namespaces: Iterable[str], held: Iterable[tuple[str, str]]
) -> None:
    election = {
        "leaderElect": True,
        "resourceLock": "leases",
        "resourceNamespace": "kube-system",
        "resourceName": "kube-scheduler",
        **(config.get("leaderElection") or {}),
    }
    if not election["leaderElect"]:
        return
    lease = (election["resourceNamespace"], election["resourceName"])
    if lease[0] not in set(namespaces):
        raise WouldNotSchedule(f"creating lease {lease[0]}/{lease[1]} fails: namespace {lease[0]} does not exist")
    if lease in set(held):
        raise WouldNotSchedule(f"lease {lease[0]}/{lease[1]} is held by another scheduler: this one never leads")


def check_extenders(extenders: list[JSON]) -> None:
    """kube-scheduler's start-up validation of ``extenders`` (it refuses to start otherwise)."""
    assert sum(1 for e in extenders if e.get("bindVerb")) <= 1, "only one extender can implement bind"
    names: list[str] = []
    for extender in extenders:
        assert extender.get("urlPrefix"), "an extender without urlPrefix"
        if extender.get("prioritizeVerb"):
            assert int(extender.get("weight") or 0) > 0, "prioritizeVerb needs a positive weight"
        names += [item["name"] for item in extender.get("managedResources") or []]
    assert all("/" in name for name in names), f"managedResources must be extended resources: {names}"
    assert len(names) == len(set(names)), f"a managed resource named twice: {names}"


@dataclass
class Outcome:
    pod: str
    node: str | None = None
    calls: list[str] = field(default_factory=list)
    """``<urlPrefix>/<verb>`` of every call made, in order."""
    bound_by: str = ""
    """``extender`` (its bindVerb) or ``default binder``."""
    error: str = ""
    """Why the cycle failed (the pod would get PodScheduled=False, SchedulerError, and a retry)."""


@dataclass
class KubeSchedulerStandIn:
    config: JSON
    api: str
    scheduler_names: list[str]
    extenders: list[JSON]

    @classmethod
    def start(
        cls,
        path: Path,
        *,
        in_cluster: str | None = None,
        namespaces: Iterable[str] = FRESH_CLUSTER_NAMESPACES,
        held_leases: Iterable[tuple[str, str]] = (THE_CLUSTERS_SCHEDULER_LEASE,),
    ) -> KubeSchedulerStandIn:
        """What ``kube-scheduler --config <path>`` does before its first cycle: load and validate, connect, lead.
        ``in_cluster``: the API server when it runs in a pod (its service account), None outside a cluster."""
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert (config.get("apiVersion"), config.get("kind")) == (
            "kubescheduler.config.k8s.io/v1",
            "KubeSchedulerConfiguration",
        ), "kube-scheduler 1.28 reads kubescheduler.config.k8s.io/v1 (v1beta3 is deprecated)"
        extenders = list(config.get("extenders") or [])
        check_extenders(extenders)
        api = api_server(config, in_cluster=in_cluster)
        check_leader_election(config, namespaces=namespaces, held=held_leases)
        names = [p.get("schedulerName") or "default-scheduler" for p in config.get("profiles") or [{}]]
        # Ignorable extenders filter last (moved to the end at start-up, §3.1).
        ordered = [e for e in extenders if not e.get("ignorable")] + [e for e in extenders if e.get("ignorable")]
        return cls(config=config, api=api, scheduler_names=names, extenders=ordered)

    # ----- the API, through clientConnection -----

    def _api(self, method: str, path: str, body: JSON | None = None) -> JSON:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.api + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with _OPENER.open(request, timeout=10) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]

    def pending_pods(self) -> list[JSON]:
        """Its pods (a schedulerName of its profiles) that no node holds yet."""
        # The field selector of kube-scheduler's pod informer (scheduler.NewInformerFactory).
        pods = self._api("GET", "/api/v1/pods?fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed")
        pods = pods["items"]
        return [
            p for p in pods if p["spec"].get("schedulerName") in self.scheduler_names and not p["spec"].get("nodeName")
        ]

    def nodes(self) -> list[JSON]:
        return self._api("GET", "/api/v1/nodes")["items"]  # type: ignore[no-any-return]

    def default_bind(self, pod: JSON, node: str) -> None:
        meta = pod["metadata"]
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]},
            "target": {"kind": "Node", "name": node},
        }
        self._api("POST", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/binding", binding)

    # ----- a scheduling cycle -----

    def schedule_pending(self) -> list[Outcome]:
        nodes = self.nodes()
        return [self.schedule(pod, nodes) for pod in self.pending_pods()]

    def schedule(self, pod: JSON, nodes: list[JSON]) -> Outcome:
        outcome = Outcome(pod=f"{pod['metadata']['namespace']}/{pod['metadata']['name']}")
        extenders = [e for e in self.extenders if interested(e, pod)]

        def call(extender: Mapping[str, Any], verb: str, body: JSON) -> JSON:
            url = f"{str(extender['urlPrefix']).rstrip('/')}/{verb}"
            outcome.calls.append(url)
            request = urllib.request.Request(
                url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
            )
            try:
                with _OPENER.open(request, timeout=timeout_seconds(extender)) as response:
                    if response.status != 200:
                        raise ExtenderCallFailed(f"failed {verb} with extender at URL {url}, code {response.status}")
                    answer = json.loads(response.read())
            except urllib.error.HTTPError as exc:
                raise ExtenderCallFailed(f"failed {verb} with extender at URL {url}, code {exc.code}") from exc
            except (OSError, ValueError) as exc:
                raise ExtenderCallFailed(f'Post "{url}": {exc}') from exc
            if verb in ("filter", "bind") and (answer or {}).get("Error"):
                raise ExtenderCallFailed(answer["Error"])
            return answer  # type: ignore[no-any-return]

        def args(extender: Mapping[str, Any], feasible: list[JSON]) -> JSON:
            if extender.get("nodeCacheCapable"):
                return {"Pod": pod, "Nodes": None, "NodeNames": [n["metadata"]["name"] for n in feasible]}
            return {"Pod": pod, "Nodes": {"metadata": {}, "items": feasible}, "NodeNames": None}

        feasible = list(nodes)
        for extender in extenders:
            if not extender.get("filterVerb") or not feasible:
                continue
            try:
                answer = call(extender, extender["filterVerb"], args(extender, feasible))
            except ExtenderCallFailed as exc:
                if extender.get("ignorable"):
                    continue
                outcome.error = str(exc)
                return outcome
            by_name = {n["metadata"]["name"]: n for n in feasible}
            if extender.get("nodeCacheCapable") and answer.get("NodeNames") is not None:
                unknown = [n for n in answer["NodeNames"] if n not in by_name]
                if unknown:
                    outcome.error = (
                        f'extender "{extender["urlPrefix"]}" claims a filtered node "{unknown[0]}" which is not '
                        "found in the input node list"
                    )
                    return outcome
                feasible = [by_name[n] for n in answer["NodeNames"]]
            elif answer.get("Nodes") is not None:
                feasible = list(answer["Nodes"].get("items") or [])  # the returned objects, unchecked (§3.2)
            else:
                feasible = []
        if not feasible:
            outcome.error = "0 nodes available"
            return outcome

        names = [n["metadata"]["name"] for n in feasible]
        totals = dict.fromkeys(names, 0)
        if len(feasible) > 1:  # one feasible node is chosen without prioritize (§3.1)
            for extender in extenders:
                if not extender.get("prioritizeVerb"):
                    continue
                try:
                    scores = call(extender, extender["prioritizeVerb"], args(extender, feasible))
                except ExtenderCallFailed:
                    continue  # always ignored (§2.3)
                for host in scores or []:
                    if host["Host"] in totals:
                        totals[host["Host"]] += host["Score"] * int(extender["weight"]) * EXTENDER_SCORE_FACTOR
        chosen = max(names, key=lambda name: totals[name])

        binder = next((e for e in extenders if e.get("bindVerb")), None)
        meta = pod["metadata"]
        if binder is not None:
            binding = {
                "PodName": meta["name"],
                "PodNamespace": meta["namespace"],
                "PodUID": meta["uid"],
                "Node": chosen,
            }
            try:
                call(binder, binder["bindVerb"], binding)
            except ExtenderCallFailed as exc:  # 1.28: the binding cycle fails whether ignorable or not (§2.3)
                outcome.error = str(exc)
                return outcome
            outcome.bound_by = "extender"
        else:
            self.default_bind(pod, chosen)
            outcome.bound_by = "default binder"
        outcome.node = chosen
        return outcome
