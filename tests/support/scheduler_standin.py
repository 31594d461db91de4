"""A kube-scheduler stand-in for one pod: reads a ``KubeSchedulerConfiguration``'s extenders as kube-scheduler v1.28
does (extender-protocol.md §3.6, §3.7) and calls them, so a test shows what a configuration file makes kube-scheduler
do with schedlens. NodeNames mode (``nodeCacheCapable: true``) only: that is what the tests' configurations use.

Its in-tree plugins are left out: every node the test names is feasible before the extenders run.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]


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


def timeout_seconds(extender: Mapping[str, Any]) -> float:
    raw = str(extender.get("httpTimeout") or "5s")
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)", raw)
    assert match, f"httpTimeout {raw!r} is not a duration kube-scheduler reads"
    return float(match.group(1)) * {"ms": 0.001, "s": 1.0, "m": 60.0}[match.group(2)]


@dataclass
class Outcome:
    node: str | None
    calls: list[str] = field(default_factory=list)
    """``<urlPrefix>/<verb>`` of every call made, in order."""
    bound_by: str = ""
    """``extender`` (its bindVerb) or ``default binder``."""


def schedule(config: Mapping[str, Any], pod: JSON, nodes: list[str], *, bind: Callable[[str], None]) -> Outcome:
    """One scheduling cycle of ``pod`` over ``nodes``; ``bind(node)`` is the default binder (a Binding in the API)."""
    extenders = [e for e in config.get("extenders") or [] if interested(e, pod)]
    outcome = Outcome(node=None)

    def call(extender: Mapping[str, Any], verb: str, body: JSON) -> Any:
        assert extender.get("nodeCacheCapable") is True, "the stand-in speaks NodeNames only"
        url = f"{str(extender['urlPrefix']).rstrip('/')}/{verb}"
        outcome.calls.append(url)
        request = urllib.request.Request(
            url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=timeout_seconds(extender)) as response:
            return json.loads(response.read())

    feasible = list(nodes)
    for extender in extenders:
        if extender.get("filterVerb") and feasible:
            answer = call(extender, extender["filterVerb"], {"Pod": pod, "Nodes": None, "NodeNames": feasible})
            assert not answer.get("Error"), answer
            feasible = [n for n in answer.get("NodeNames") or [] if n in feasible]
    if not feasible:
        return outcome
    scores = dict.fromkeys(feasible, 0)
    if len(feasible) > 1:
        for extender in extenders:
            if extender.get("prioritizeVerb"):
                assert int(extender.get("weight") or 0) > 0, "prioritizeVerb needs weight > 0"
                body = {"Pod": pod, "Nodes": None, "NodeNames": feasible}
                for host in call(extender, extender["prioritizeVerb"], body):
                    scores[host["Host"]] += host["Score"] * int(extender["weight"])
    chosen = max(feasible, key=lambda name: scores[name])  # first of the best, in the order sent
    binders = [e for e in extenders if e.get("bindVerb")]
    assert len(binders) <= 1, "at most one extender may set bindVerb"
    meta = pod["metadata"]
    if binders:
        binding = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": chosen}
        answer = call(binders[0], binders[0]["bindVerb"], binding)
        assert not answer.get("Error"), answer
        outcome.bound_by = "extender"
    else:
        bind(chosen)
        outcome.bound_by = "default binder"
    outcome.node = chosen
    return outcome
