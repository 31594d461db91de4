"""One small row per bound cycle with what followed its placement, and a balance sample per profile per job run."""

from __future__ import annotations

from django.db import models

from dashboard.models import SchedulingCycle


class OutcomeStatus(models.TextChoices):
    WAITING = "waiting", "Waiting for its first window"
    MEASURED = "measured", "Measured"
    UNATTRIBUTABLE = "unattributable", "Pod traffic not attributable"
    NO_ESTIMATE = "no_estimate", "No traffic estimate recorded"


class PlacementOutcome(models.Model):
    """What a bound cycle's chosen node (and its runner-ups, and the pod itself) did in the windows after the bind,
    beside what the decision estimated. Windows are added as they pass (``windows``, the form of
    ``dashboard.outcomes.codec``); ``complete`` once the last one is in."""

    # No constraint: on PostgreSQL the cycles are partitioned by day; retention prunes these rows with them.
    cycle = models.OneToOneField(
        SchedulingCycle, on_delete=models.DO_NOTHING, db_constraint=False, related_name="placement_outcome"
    )
    bound_at = models.DateTimeField(help_text="When the cycle ended bound: the windows start here.")
    profile = models.CharField(max_length=63)
    node = models.CharField(max_length=253)
    pod_namespace = models.CharField(max_length=253, blank=True)
    pod_name = models.CharField(max_length=253, blank=True)
    workload_kind = models.CharField(max_length=63, blank=True, help_text="kube-state-metrics' owner; '' unknown.")
    workload_name = models.CharField(max_length=253, blank=True)
    status = models.CharField(max_length=16, choices=OutcomeStatus.choices, default=OutcomeStatus.WAITING)
    unattributable_reason = models.CharField(max_length=200, blank=True)
    estimate = models.JSONField(
        null=True, blank=True, help_text="The decision's estimate for the node (dashboard.outcomes.codec)."
    )
    pod_assumed_bytes = models.FloatField(
        null=True, blank=True, help_text="assumedBytesPerPod over the query window (the profile as configured then)."
    )
    windows = models.JSONField(default=list, blank=True, help_text="One entry per passed window, shortest first.")
    stayed_quietest = models.BooleanField(null=True, blank=True, help_text="In the longest window measured so far.")
    pod_relative_error = models.FloatField(null=True, blank=True, help_text="In the longest window measured so far.")
    complete = models.BooleanField(default=False)
    updated_at = models.DateTimeField()
    error = models.TextField(blank=True, help_text="Why the last read failed; the next run tries again.")

    class Meta:
        ordering = ["-bound_at", "-id"]
        indexes = [
            models.Index(fields=["complete", "bound_at"], name="outcome_incomplete"),
            models.Index(fields=["bound_at"], name="outcome_bound_at"),
            models.Index(fields=["workload_kind", "workload_name", "bound_at"], name="outcome_workload"),
        ]

    def __str__(self) -> str:
        return f"outcome of cycle {self.cycle_id} on {self.node} ({self.status})"


class BalanceSample(models.Model):
    """How evenly traffic was spread, at one moment, over the nodes a profile placed pods on recently."""

    at = models.DateTimeField()
    profile = models.CharField(max_length=63)
    nodes = models.PositiveIntegerField()
    mean_bytes = models.FloatField()
    stdev_bytes = models.FloatField()
    cv = models.FloatField(null=True, blank=True, help_text="stdev / mean; None when the mean is 0.")
    max_bytes = models.FloatField()
    min_bytes = models.FloatField()
    max_over_min = models.FloatField(null=True, blank=True, help_text="None when the quietest node received 0.")
    window_seconds = models.PositiveIntegerField(help_text="Each node's bytes are over this window, ending at 'at'.")

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["profile", "-at"], name="balance_profile_newest")]

    def __str__(self) -> str:
        return f"balance of {self.profile} @ {self.at:%Y-%m-%d %H:%M:%S}"
