"""A history replay: what to replay (the selection and the candidate), how far it got, and the report."""

from __future__ import annotations

from django.db import models


class ReplayStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class CandidateSource(models.TextChoices):
    PROFILE = "profile", "A configured profile"
    YAML = "yaml", "Profile YAML given with the replay"
    VERSION = "version", "A recorded profile version"


class CompareLearning(models.TextChoices):
    NONE = "", "No comparison"
    ON = "on", "Learned traffic against the constant (learning turned on)"
    OFF = "off", "The constant against learned traffic (learning turned off)"


class HistoryReplay(models.Model):
    """One replay of recorded cycles under a candidate profile (``dashboard.replays.services``)."""

    created_at = models.DateTimeField()
    created_by = models.CharField(max_length=150, blank=True, help_text="The user who started it (empty: a command).")
    status = models.CharField(max_length=8, choices=ReplayStatus.choices, default=ReplayStatus.QUEUED)
    selection = models.JSONField(
        default=dict,
        help_text="Which cycles: since, until, last, namespace, profile, node (ReplaySelection).",
    )
    candidate_source = models.CharField(max_length=8, choices=CandidateSource.choices)
    candidate_profile = models.CharField(
        max_length=63, blank=True, help_text="The candidate profile's name (configured, or in candidate_yaml)."
    )
    candidate_yaml = models.TextField(blank=True, help_text="Profile YAML given with the replay (empty: configured).")
    candidate_version = models.CharField(
        max_length=64, blank=True, default="", help_text="The recorded profile version replayed under (its digest)."
    )
    candidate_scenario = models.JSONField(
        default=dict, help_text="The candidate as replayed (scheduler_core.history_replay.report.CandidateDescription)."
    )
    compare_learning = models.CharField(
        max_length=3,
        choices=CompareLearning.choices,
        blank=True,
        default=CompareLearning.NONE,
        help_text="Also compare the herd estimate with traffic learned per workload and with the constant.",
    )
    progress_done = models.PositiveIntegerField(default=0, help_text="Cycles looked at so far.")
    progress_total = models.PositiveIntegerField(
        null=True, blank=True, help_text="Cycles selected; empty until the run has listed them."
    )
    report = models.JSONField(
        null=True, blank=True, help_text="scheduler_core.history_replay.report.HistoryReplayReport (when done)."
    )
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="Last progress written by the runner.")
    runner = models.CharField(max_length=128, blank=True, help_text="Which process runs it (host:pid).")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["-created_at", "-id"], name="replay_newest"),
            models.Index(fields=["status", "created_at"], name="replay_status"),
        ]

    def __str__(self) -> str:
        return f"replay {self.pk} of {self.candidate_profile or 'YAML'} ({self.status})"

    @property
    def finished(self) -> bool:
        return self.status in (ReplayStatus.DONE, ReplayStatus.FAILED)
