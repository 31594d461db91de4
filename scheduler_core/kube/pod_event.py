"""What an Event about a pod says, and what writes one: the one description of both.

Without the ``kubernetes`` client on purpose: the dashboard's emitter (``dashboard.pod_events``) holds a writer and
builds these in every process, and imports the client (through ``scheduler_core.kube.events``) only where Events are
written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


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
