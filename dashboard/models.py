"""The scheduling record: one SchedulingCycle per attempt, folded from its verb calls."""

from __future__ import annotations

from django.db import models

from dashboard.packing import PackedJSONField


class Outcome(models.TextChoices):
    PENDING = "pending", "Pending"
    BOUND = "bound", "Bound"
    UNSCHEDULABLE = "unschedulable", "Unschedulable"
    ERROR = "error", "Error"


class NodeMode(models.TextChoices):
    NAMES = "names", "NodeNames (nodeCacheCapable)"
    NODES = "nodes", "Full Nodes"
    NONE = "", "—"


class SchedulingCycle(models.Model):
    """One attempt to place one pod: the filter, prioritize, bind and preempt calls kube-scheduler made."""

    pod_namespace = models.CharField(max_length=253, blank=True)
    pod_name = models.CharField(max_length=253, blank=True)
    pod_uid = models.CharField(max_length=64, blank=True)
    profile = models.CharField(max_length=63)
    node_mode = models.CharField(max_length=8, choices=NodeMode.choices, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    outcome = models.CharField(max_length=16, choices=Outcome.choices, default=Outcome.PENDING)
    chosen_node = models.CharField(max_length=253, blank=True, help_text="The node the pod was bound to.")
    preferred_node = models.CharField(
        max_length=253, blank=True, help_text="Our highest-scored node (kube-scheduler adds its own scores)."
    )
    candidate_count = models.PositiveIntegerField(default=0)
    feasible_count = models.PositiveIntegerField(null=True, blank=True)
    filter_ms = models.FloatField(null=True, blank=True)
    prioritize_ms = models.FloatField(null=True, blank=True)
    bind_ms = models.FloatField(null=True, blank=True)
    preempt_ms = models.FloatField(null=True, blank=True)
    metric_age_seconds = models.FloatField(null=True, blank=True)
    error = models.TextField(blank=True)
    candidate_nodes = models.TextField(
        blank=True,
        default="",
        editable=False,
        help_text="Candidate nodes as '|node-1|node-2|' (the filter's, else prioritize's).",
    )

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [
            models.Index(fields=["-started_at", "-id"], name="cycle_newest"),
            models.Index(fields=["pod_uid", "started_at"], name="cycle_pod_uid"),
            models.Index(fields=["pod_namespace", "pod_name"], name="cycle_pod"),
        ]

    def __str__(self) -> str:
        return f"{self.pod_namespace}/{self.pod_name} @ {self.started_at:%Y-%m-%d %H:%M:%S} ({self.outcome})"


class VerbCall(models.Model):
    """One HTTP call of kube-scheduler, with every plugin's verdict and score and the exact answer."""

    cycle = models.ForeignKey(SchedulingCycle, related_name="calls", on_delete=models.CASCADE)
    event_id = models.CharField(max_length=32, unique=True, help_text="Makes re-ingesting a record harmless.")
    verb = models.CharField(max_length=16)
    started_at = models.DateTimeField()
    duration_ms = models.FloatField()
    http_status = models.PositiveSmallIntegerField()
    error = models.TextField(blank=True)
    server = models.CharField(max_length=128, blank=True)
    # Large values are stored packed (zstd) by the ingester and read back as they were: dashboard.packing.
    record = PackedJSONField(default=dict, help_text="The plugins' verdicts and scores (columnar).")
    response = PackedJSONField(null=True, blank=True, help_text="The JSON answered to kube-scheduler.")
    chain_hash = models.CharField(
        max_length=64,
        blank=True,
        editable=False,
        help_text="sha256(previous call's chain_hash, this call's content): dashboard.services.audit.",
    )

    class Meta:
        ordering = ["started_at", "id"]

    def __str__(self) -> str:
        return f"{self.verb} {self.started_at:%H:%M:%S.%f}"


class AuditCheckpoint(models.Model):
    """Where the hash chain resumes after pruning: the last pruned call and its chain hash."""

    last_call_id = models.BigIntegerField(unique=True)
    chain_hash = models.CharField(max_length=64)
    pruned_before = models.DateTimeField(help_text="The retention cut-off of the prune that wrote it.")
    cycles_deleted = models.PositiveIntegerField()
    calls_deleted = models.PositiveIntegerField()
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-last_call_id"]

    def __str__(self) -> str:
        return f"checkpoint at call {self.last_call_id}"


class NodeTally(models.Model):
    """Per-node counts over the retained record, kept by the ingester and the pruner so listing nodes is cheap."""

    node = models.CharField(max_length=253, unique=True)
    considered = models.PositiveBigIntegerField(default=0, help_text="Filter calls that listed the node.")
    filtered_out = models.PositiveBigIntegerField(default=0, help_text="Filter calls that excluded it.")
    placements = models.PositiveBigIntegerField(default=0, help_text="Successful binds to it.")
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["node"]

    def __str__(self) -> str:
        return self.node
