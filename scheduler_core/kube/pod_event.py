"""What an Event about a pod says, what writes one, and which pods of a burst get one: the one description of each.

Without the ``kubernetes`` client on purpose: the dashboard's emitter (``dashboard.pod_events``) holds a writer and
builds these in every process, and imports the client (through ``scheduler_core.kube.events``) only where Events are
written.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Final, Protocol


@dataclass(frozen=True, slots=True)
class PodEvent:
    """An ``events.k8s.io/v1`` Event regarding one pod."""

    namespace: str
    name: str
    uid: str
    note: str
    """What a person reads (``kubectl describe pod``); cut to the API's 1 kB by the writer."""
    reason: str
    action: str
    controller: str
    """``reportingController``."""
    instance: str
    """``reportingInstance``: which process wrote it (cut to 128 characters by the writer)."""
    event_type: str = "Normal"


class EventWriter(Protocol):
    def create(self, event: PodEvent) -> str:
        """Write ``event``; "" when it was created, else a short failure kind (``"403"``, ``"timeout"``...)."""
        ...


_GENERATED: Final = re.compile(r"^(?P<group>.+-)[bcdfghjklmnpqrstvwxz2456789]{5}$")
"""A name from ``metadata.generateName``: the prefix and five characters of Kubernetes' ``SimpleNameGenerator``
alphabet (no vowels), as the ReplicaSet, Job and DaemonSet controllers name their pods."""
_ORDINAL: Final = re.compile(r"^(?P<group>.+-)\d+$")
"""A StatefulSet's pod: its name and ordinal."""


def burst_group(name: str) -> str:
    """The name the pods one controller makes share (``web-7d9f8c-`` for ``web-7d9f8c-x2b4q``, ``db-`` for ``db-3``);
    "" for a pod named otherwise, which is a group of its own. From the name alone: the ingester that writes Events has
    the pod's name, not its owner, and a bare pod that happens to look generated only shares its Event."""
    found = _GENERATED.match(name) or _ORDINAL.match(name)
    return found["group"] if found else ""


class EventBursts:
    """One ``Explained`` Event per burst of alike pods: of the pods of one namespace named after one controller
    (``burst_group``), the first placed in a window of ``seconds`` gets its Event, the others placed before the window
    ends get none (``kubectl schedlens why`` reads any of them). A pod of no group always gets its own. By each
    pod's own placement time, not the clock: records ingested late (after an outage) fold as they were placed.
    ``seconds`` 0: every pod gets its Event."""

    PRUNE_AT = 10_000
    """Windows kept before the closed ones are let go."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._opened: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def first(self, namespace: str, name: str, at: float) -> bool:
        """Whether the pod's Event is written: it opens a window for its group, or has no group."""
        group = burst_group(name)
        if self.seconds <= 0 or not group:
            return True
        key = (namespace, group)
        with self._lock:
            opened = self._opened.get(key)
            if opened is not None and abs(at - opened) < self.seconds:  # either side: records may arrive out of order
                return False
            if len(self._opened) >= self.PRUNE_AT:
                self._opened = {k: v for k, v in self._opened.items() if v + self.seconds > at}
            self._opened[key] = at
            return True

    def note(self, namespace: str, name: str) -> str:
        """What an Event that opened a window adds, so that its reader knows the burst's other pods have none."""
        group = burst_group(name)
        if self.seconds <= 0 or not group:
            return ""
        return (
            f"Pods named {group}* placed within {self.seconds:g} s of this one have no Explained Event of their "
            f"own: kubectl schedlens why POD -n {namespace}."
        )
