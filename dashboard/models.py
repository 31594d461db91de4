"""The scheduling record: one SchedulingCycle per attempt, folded from its verb calls."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models.functions import Now

from dashboard.storage.packed_json import PackedJSONField
from scheduler_core.extender.lru import LRU


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
    answer_tie = models.BooleanField(
        default=False,
        db_default=False,  # rows written by code that predates the column (a rolling upgrade) get it too
        help_text=(
            "Rounding to kube-scheduler's 0..10 scale erased our preference: our highest-scored node was answered "
            "the same as a node that scored strictly less (scheduler_core.extender.scoring.answer.preference_tied)."
        ),
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
        help_text=(
            "Candidate nodes as '|node-1|node-2|' (the filter's, else prioritize's). On PostgreSQL only for cycles "
            "recorded before migration 0004: later ones are in NodePosting (dashboard.filters)."
        ),
    )
    candidate_slot = models.BigIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text="This cycle's bit in the NodePosting rows of its candidates (PostgreSQL): slot // 256, slot % 256.",
    )
    profile_version = models.CharField(
        max_length=64,
        blank=True,
        default="",
        db_default="",  # rows written by code that predates the column (a rolling upgrade) get it too
        help_text="The version of the profile its calls were answered under (ProfileVersion.digest); empty: recorded "
        "before profile versions were kept.",
    )

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [
            models.Index(fields=["-started_at", "-id"], name="cycle_newest"),
            models.Index(fields=["pod_uid", "started_at"], name="cycle_pod_uid"),
            models.Index(fields=["pod_namespace", "pod_name"], name="cycle_pod"),
            models.Index(fields=["outcome", "started_at", "id"], name="cycle_outcome"),
            models.Index(fields=["chosen_node", "started_at", "id"], name="cycle_chosen_node"),
            models.Index(fields=["candidate_slot"], name="cycle_candidate_slot"),
            # Holds the tied cycles only: ``answer_tie=true`` pages newest first without walking the untied ones.
            models.Index(fields=["-started_at", "-id"], condition=models.Q(answer_tie=True), name="cycle_answer_tie"),
            # The history filtered by version, and a version's first and last cycle (``dashboard.selectors``).
            models.Index(fields=["profile_version", "started_at", "id"], name="cycle_profile_version"),
        ]

    def __str__(self) -> str:
        return f"{self.pod_namespace}/{self.pod_name} @ {self.started_at:%Y-%m-%d %H:%M:%S} ({self.outcome})"


class VerbCall(models.Model):
    """One HTTP call of kube-scheduler, with every plugin's verdict and score and the exact answer."""

    # No foreign key in the database: on PostgreSQL the cycles are partitioned by day, and a key could only refer to
    # (id, started_at). The ingester writes a call with its cycle; retention drops a day of cycles whole.
    cycle = models.ForeignKey(SchedulingCycle, related_name="calls", on_delete=models.CASCADE, db_constraint=False)
    event_id = models.CharField(
        max_length=32,
        db_index=True,
        help_text="Makes re-ingesting a record harmless: the ingester skips an event_id it stored (under the chain "
        "lock; a unique index cannot span the day partitions).",
    )
    recorded_at = models.DateTimeField(
        db_default=Now(),
        editable=False,
        help_text="When the ingester stored the call (the database's clock, under the chain lock, so it grows with "
        "the id): the day partition it lives in on PostgreSQL (dashboard.services.partitions).",
    )
    verb = models.CharField(max_length=16)
    started_at = models.DateTimeField()
    duration_ms = models.FloatField()
    http_status = models.PositiveSmallIntegerField()
    error = models.TextField(blank=True)
    server = models.CharField(max_length=128, blank=True)
    # Read through dashboard.selectors.cycles (call_reads), never these three: a call is stored in one of two ways.
    # A per-node record (filter, prioritize, preempt) and its answer are one binary body since migration 0004;
    # other calls, and every call recorded before, are JSON in the two jsonb columns (large values packed).
    record_json = PackedJSONField(
        db_column="record", null=True, blank=True, help_text="The record as JSON (calls without a body)."
    )
    response_json = PackedJSONField(
        db_column="response", null=True, blank=True, help_text="The answer as JSON (calls without a body)."
    )
    body = models.BinaryField(
        null=True, blank=True, help_text="Record and answer in binary form (dashboard.storage.call_body.body_encode)."
    )
    profile_version = models.CharField(
        max_length=64,
        blank=True,
        default="",
        db_default="",
        help_text="The version of the profile that answered (VerbEvent.profile_version), sealed by the chain when not "
        "empty; empty: recorded before profile versions were kept, or an unknown profile.",
    )
    chain_hash = models.CharField(
        max_length=64,
        blank=True,
        editable=False,
        help_text="sha256(previous call's chain_hash, this call's content): dashboard.audit.chain.",
    )

    class Meta:
        ordering = ["started_at", "id"]

    def __str__(self) -> str:
        return f"{self.verb} {self.started_at:%H:%M:%S.%f}"


class SharedPart(models.Model):
    """Per-node lists many calls share, stored once (``dashboard.storage.shared_parts``): a filter's candidates,
    failures and traffic figures, the same for every pod of a kind between two traffic snapshots.

    Addressed by the SHA-256 of its bytes: a call's body names the digest, the audit chain seals the body, and
    whoever reads the part checks the digest, so a part cannot change unnoticed either. Written by the ingester
    with the first call that refers to it (each later batch moves ``last_used_at``); the pruner deletes the parts
    no remaining call can refer to.
    """

    digest = models.CharField(max_length=64, primary_key=True, help_text="SHA-256 of data, hex.")
    data = models.BinaryField(
        help_text="zstd-compressed MessagePack (dashboard.storage.shared_parts.SharedFilterPart)."
    )
    last_used_at = models.DateTimeField(db_index=True, help_text="The latest start of a call referring to it.")

    def __str__(self) -> str:
        return self.digest[:12]


SHARED_PARTS_KEPT = 256
_shared_parts_read: LRU[str, bytes] = LRU(SHARED_PARTS_KEPT)
"""The shared parts read lately, by digest: the dashboard's threads read the calls of a page side by side, and an
export reads the calls of every pod kind and cluster in turn. Kept fewer than the parts a stretch of history
interleaves, each call would read its part again; a part is a few kilobytes of compressed bytes."""


def shared_part_data(digest: str) -> bytes | None:
    """The stored bytes of the shared part ``digest`` (None: not stored), the latest few kept in memory: a part
    never changes once stored (its digest is its content, which every reader checks). What a body's ``shared_parts``
    lookup reads from the database."""
    found = _shared_parts_read.get(digest)
    if found is None:
        data = SharedPart.objects.filter(digest=digest).values_list("data", flat=True).first()
        if data is None:
            return None
        found = bytes(data)
        _shared_parts_read.put(digest, found)
    return found


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


class AuditVerification(models.Model):
    """Where a verification of the chain that reached the head ended: ``verify_audit_chain --resume`` starts there,
    after checking that the call still carries the hash it was verified with."""

    last_call_id = models.BigIntegerField()
    chain_hash = models.CharField(max_length=64)
    checked = models.PositiveBigIntegerField(help_text="Calls that verification recomputed.")
    started_after_id = models.BigIntegerField(null=True, blank=True)
    verified_at = models.DateTimeField()

    class Meta:
        ordering = ["-last_call_id"]

    def __str__(self) -> str:
        return f"verified through call {self.last_call_id}"


class ChainOrigin(models.Model):
    """Which binds the audit chain records: ``simulated`` (the demo, ``make run``) or ``kubernetes`` (a real cluster).

    Written under the chain lock by the first append, read by every ingester before it appends
    (``dashboard.audit.chain``) and by the start-up checks (``dashboard.checks``): a demo's simulated cycles
    never enter a real cluster's chain, nor the reverse, even when both are pointed at one database."""

    binds = models.CharField(max_length=16)
    first_appended_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"a chain of {self.binds} binds since {self.first_appended_at:%Y-%m-%d %H:%M}"


class BitStringField(models.TextField):  # type: ignore[type-arg]  # generic only in django-stubs, not at run time
    """``bit(256)`` on PostgreSQL (written and read as a string of 0 and 1), text elsewhere (unused there)."""

    def db_type(self, connection: Any) -> str | None:
        return "bit(256)" if connection.vendor == "postgresql" else super().db_type(connection)


class NodePosting(models.Model):
    """Which cycles considered a node (PostgreSQL): one bit per cycle, 256 cycles per row, by ``candidate_slot``.

    Written by the ingester in one upsert per batch (a bitwise OR), instead of a GIN index entry per node and cycle,
    which cost more than everything else the ingester writes. Read by ``dashboard.filters.cycles_considering``.
    """

    node = models.CharField(max_length=253)
    block = models.BigIntegerField(help_text="candidate_slot // 256 of the cycles this row covers.")
    bits = BitStringField(help_text="Bit (slot % 256), from the left, is set when that cycle considered the node.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["node", "block"], name="nodeposting_node_block")]

    def __str__(self) -> str:
        return f"{self.node} @ {self.block}"


class NodeTally(models.Model):
    """Per-node counts over the retained record, kept by the ingester and the pruner so listing nodes is cheap."""

    node = models.CharField(max_length=253, unique=True)
    considered = models.PositiveBigIntegerField(default=0, help_text="Filter calls that listed the node.")
    filtered_out = models.PositiveBigIntegerField(default=0, help_text="Filter calls that excluded it.")
    placements = models.PositiveBigIntegerField(
        default=0,
        help_text="Cycles bound to it (SchedulingCycle.chosen_node of a bound cycle): by schedlens, or by "
        "kube-scheduler as the placement watcher saw.",
    )
    preferred = models.PositiveBigIntegerField(
        default=0,
        db_default=0,  # rows written by code that predates the column (a rolling upgrade) get it too
        help_text="Cycles whose highest-scored node it was (SchedulingCycle.preferred_node).",
    )
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["node"]

    def __str__(self) -> str:
        return self.node


REASON_PLUGIN_LIMIT = 128
REASON_LIMIT = 256
"""Widths of ``NodeReasonTally``'s columns: longer strings are cut (``dashboard.ingest.sanitize.clip``), so that a
row's key always fits one index entry."""


class NodeReasonTally(models.Model):
    """Why nodes were filtered out, over the retained record: filter calls that failed the node for that plugin and
    reason, kept beside ``NodeTally`` by the same ingester, pruner and rebuild (``dashboard.services.node_tallies``).

    Reasons never carry node-specific figures (those are a verdict's detail), so there are few per plugin and the
    table stays about nodes × distinct reasons long, whatever the history's length.
    """

    node = models.CharField(max_length=253)
    plugin = models.CharField(max_length=REASON_PLUGIN_LIMIT)
    reason = models.CharField(max_length=REASON_LIMIT)
    count = models.PositiveBigIntegerField(default=0, help_text="Filter calls that failed the node for this reason.")

    class Meta:
        ordering = ["node", "-count", "plugin", "reason"]
        constraints = [
            models.UniqueConstraint(fields=["node", "plugin", "reason"], name="nodereasontally_node_plugin_reason")
        ]

    def __str__(self) -> str:
        return f"{self.node}: {self.plugin}: {self.reason}"


class NodeDayTally(models.Model):
    """What the calls stored on one day (UTC, their ``recorded_at``) added to ``NodeTally``'s call counts (considered,
    filtered out): what dropping that day's partition of calls takes off again without reading its calls
    (``dashboard.services.partitions``). Written by the ingester beside ``NodeTally``; used on PostgreSQL only, where
    days are dropped whole."""

    day = models.DateField()
    node = models.CharField(max_length=253)
    considered = models.PositiveBigIntegerField(default=0)
    filtered_out = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["day", "node"], name="nodedaytally_day_node")]

    def __str__(self) -> str:
        return f"{self.node} on {self.day}"


class NodeDayReasonTally(models.Model):
    """What the calls stored on one day added to ``NodeReasonTally`` (as ``NodeDayTally`` for ``NodeTally``)."""

    day = models.DateField()
    node = models.CharField(max_length=253)
    plugin = models.CharField(max_length=REASON_PLUGIN_LIMIT)
    reason = models.CharField(max_length=REASON_LIMIT)
    count = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "node", "plugin", "reason"], name="nodedayreasontally_day_node_plugin_reason"
            )
        ]

    def __str__(self) -> str:
        return f"{self.node} on {self.day}: {self.plugin}: {self.reason}"


class ProfileVersion(models.Model):
    """One exact definition of a profile, stored once: what a cycle whose ``profile_version`` names it was decided by.

    Written by the ingester from the notes each serving process spools when it loads its profiles
    (``dashboard.services.profile_versions``), never on a verb's path. When it was first and last served comes from
    the cycles (``cycle_profile_version`` index)."""

    digest = models.CharField(max_length=64, unique=True, help_text="Profile.version(): 12 hex digits of SHA-256.")
    profile = models.CharField(max_length=63, db_index=True)
    yaml = models.TextField(blank=True, help_text="The profile's entry in the profiles file, as loaded.")
    normalized = models.JSONField(help_text="Profile.describe(): every plugin, weight and arg, defaults filled in.")
    servers = models.JSONField(default=list, help_text="The replicas (hosts) that loaded it, in the order noted.")
    noted_at = models.DateTimeField(help_text="When a serving process first loaded it.")

    class Meta:
        ordering = ["profile", "noted_at", "id"]

    def __str__(self) -> str:
        return f"{self.profile} {self.digest}"
