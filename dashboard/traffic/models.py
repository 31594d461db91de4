"""Every traffic refresh leaves a row: when, how long, what matched, what failed, and (sampled) the values."""

from __future__ import annotations

from django.db import models


class RefreshStatus(models.TextChoices):
    OK = "ok", "OK"
    ERROR = "error", "Error"


class TrafficRefresh(models.Model):
    """One run of ``schedlens.prefetch_traffic`` for one query."""

    query_key = models.CharField(max_length=16, help_text="Stable hash of the query; names its Redis snapshot.")
    query = models.JSONField(help_text="The query's fields (address, deviceName, window, nodeLabel, mode).")
    source = models.TextField(blank=True, help_text="The PromQL expression sent, or 'synthetic'.")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    duration_ms = models.FloatField()
    status = models.CharField(max_length=8, choices=RefreshStatus.choices)
    error = models.TextField(blank=True)
    nodes_matched = models.PositiveIntegerField(default=0, help_text="Nodes with a value in the snapshot.")
    nodes_without_metrics = models.PositiveIntegerField(
        null=True, blank=True, help_text="Known cluster nodes that matched no series (unknown without a node list)."
    )
    unmatched_series = models.JSONField(
        default=list, blank=True, help_text="Series that named no node (a mislabelled exporter is common)."
    )
    bytes_by_node = models.JSONField(
        null=True,
        blank=True,
        help_text="Bytes per node, kept on one refresh per history interval (traffic over time).",
    )
    worker = models.CharField(max_length=128, blank=True, help_text="host:pid of the process that refreshed.")

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [
            models.Index(fields=["query_key", "-started_at"], name="traffic_refresh_query_newest"),
            models.Index(fields=["started_at"], name="traffic_refresh_started"),
        ]

    def __str__(self) -> str:
        return f"{self.query_key} @ {self.started_at:%Y-%m-%d %H:%M:%S} ({self.status})"
