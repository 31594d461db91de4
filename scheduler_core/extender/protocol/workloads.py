"""A pod's workload: its owner (``ownerReferences``) climbed one step by name, and the annotation overriding what the
herd estimate assumes the pod adds to its node.

A ReplicaSet named ``<deployment>-<pod-template-hash>`` belongs to that Deployment, a Job named
``<cronjob>-<scheduled minute>`` to that CronJob (the names their controllers give them). The same climb applies to the
owners kube-state-metrics reports for measured pods, so both sides name a workload alike. Read here, with the pod's
other fields (``scheduler_core.extender.protocol.cluster``), so that the pod's view, the record and the traffic learned
per workload (``scheduler_core.extender.scoring.workload_traffic``) take it from one place.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Final

import msgspec

OVERRIDE_ANNOTATION: Final = "schedlens.io/assumed-bytes"

_TEMPLATE_HASH = re.compile(r"^(?P<parent>.+)-[bcdfghjklmnpqrstvwxz2456789]{1,10}$")
"""Kubernetes' ``pod-template-hash``: ``rand.SafeEncodeString`` of a hash, drawn from this alphabet (no vowels)."""
_SCHEDULED_MINUTE = re.compile(r"^(?P<parent>.+)-\d{8,}$")
"""A CronJob's Job: its name and the scheduled time in Unix minutes."""


class WorkloadKey(msgspec.Struct, frozen=True, gc=False, array_like=True):
    namespace: str
    kind: str
    name: str

    def text(self) -> str:
        return f"{self.kind.lower()} {self.namespace}/{self.name}"


def workload_of(namespace: str, kind: str, name: str) -> WorkloadKey | None:
    """The workload an owner of ``kind``/``name`` stands for (None: no owner)."""
    if not kind or not name:
        return None
    if kind == "ReplicaSet" and (found := _TEMPLATE_HASH.match(name)):
        return WorkloadKey(namespace, "Deployment", found["parent"])
    if kind == "Job" and (found := _SCHEDULED_MINUTE.match(name)):
        return WorkloadKey(namespace, "CronJob", found["parent"])
    return WorkloadKey(namespace, kind, name)


def override_bytes(annotations: Mapping[str, str] | None) -> float | None:
    """The pod's override of its assumed bytes; None without one or when it does not read as bytes ≥ 0."""
    text = (annotations or {}).get(OVERRIDE_ANNOTATION)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None
