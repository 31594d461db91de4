"""What the placement watcher saw in the API, linked to the scheduling cycle it concludes."""

from __future__ import annotations

from django.db import models

from dashboard.models import SchedulingCycle


class ObservationKind(models.TextChoices):
    BOUND = "bound", "Bound (spec.nodeName set)"
    FAILED_SCHEDULING = "failed_scheduling", "FailedScheduling event"
    DELETED = "deleted", "Deleted before binding"


class PlacementObservation(models.Model):
    """One fact from the API about a pod of our scheduler names: where it was bound, or why it was not."""

    key = models.CharField(
        max_length=300, unique=True, help_text="Same for every sighting of the same fact: relists are harmless."
    )
    cycle = models.ForeignKey(
        SchedulingCycle,
        related_name="placement_observations",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        db_constraint=False,  # the cycles are partitioned by day on PostgreSQL; retention empties the link itself
        help_text="The pod's newest cycle started before the observation; empty until it is recorded.",
    )
    kind = models.CharField(max_length=24, choices=ObservationKind.choices)
    pod_uid = models.CharField(max_length=64)
    pod_namespace = models.CharField(max_length=253, blank=True)
    pod_name = models.CharField(max_length=253, blank=True)
    node = models.CharField(max_length=253, blank=True, help_text="spec.nodeName, for a bound pod.")
    scheduler_name = models.CharField(max_length=253, blank=True)
    reason = models.CharField(max_length=128, blank=True)
    message = models.TextField(
        blank=True, help_text="The FailedScheduling event's message, as kube-scheduler wrote it."
    )
    occurred_at = models.DateTimeField(help_text="When it happened according to the API (else when it was seen).")
    observed_at = models.DateTimeField(help_text="When the watcher recorded it.")
    explained_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="A binding: when its cycle's Explained Event was settled (queued by the watcher or the ingester, or "
        "left to the cycle's bind call); claimed once, by whichever of the two completes the cycle last.",
    )

    class Meta:
        ordering = ["-occurred_at", "-id"]
        indexes = [
            models.Index(fields=["pod_uid", "occurred_at"], name="placement_pod_uid"),
            models.Index(fields=["occurred_at"], name="placement_occurred"),
        ]

    def __str__(self) -> str:
        where = f" → {self.node}" if self.node else ""
        return f"{self.pod_namespace}/{self.pod_name} {self.kind}{where}"


class WaitingPod(models.Model):
    """A pod of our scheduler names not bound to a node, as the placement watcher's pod watch sees it now.

    The watcher keeps this table equal to its pod informer's unbound pods (``placements_waiting_sync``), so pages,
    the API and ``/metrics`` read the live pending list without asking the API server.
    """

    pod_uid = models.CharField(max_length=64, unique=True)
    pod_namespace = models.CharField(max_length=253)
    pod_name = models.CharField(max_length=253)
    scheduler_name = models.CharField(max_length=253, blank=True)
    waiting_since = models.DateTimeField(help_text="The pod's creationTimestamp (else when the watcher first saw it).")
    seen_at = models.DateTimeField(help_text="When the watcher listed it.")
    reasons_digest = models.CharField(
        max_length=64,
        blank=True,
        help_text="The reasons of the last Unschedulable Event on the pod: another when they change.",
    )
    event_at = models.DateTimeField(null=True, blank=True, help_text="When that Event was queued.")

    class Meta:
        ordering = ["waiting_since", "pod_namespace", "pod_name"]
        indexes = [models.Index(fields=["pod_namespace", "pod_name"], name="waiting_pod_name")]

    def __str__(self) -> str:
        return f"{self.pod_namespace}/{self.pod_name} waiting"
