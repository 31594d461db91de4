"""One FilterSet per browsable model, shared by the audit API and the dashboard.

Usable with any queryset, e.g. ``CycleFilterSet(request.GET, queryset=SchedulingCycle.objects.all()).qs``;
check ``.is_valid()`` / ``.errors`` first to answer a 400 naming the bad field. Every filter is declared: a
query parameter never becomes an ORM keyword by itself, and a model field without a filter (or an explicit
exemption in ``tests/api/test_filters.py``) fails the tests.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import connections
from django.db.models import F, Func, QuerySet, TextField, Value
from django_filters import rest_framework as filters
from django_filters.fields import IsoDateTimeField

from dashboard.models import NodeMode, NodeTally, Outcome, SchedulingCycle
from dashboard.traffic.models import RefreshStatus, TrafficRefresh

NODE_NAME = RegexValidator(
    r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$",
    "must be a Kubernetes node name (lowercase letters, digits, '-' and '.')",
)


class UtcDateTimeField(IsoDateTimeField):
    """ISO 8601 with any offset, handed to the database in UTC (PostgreSQL refuses offsets beyond ±15:59)."""

    def to_python(self, value: Any) -> datetime | None:
        parsed: datetime | None = super().to_python(value)
        if parsed is None:
            return None
        try:
            return parsed.astimezone(UTC)
        except (OverflowError, ValueError):
            raise ValidationError("date and time out of range", code="invalid") from None


class UtcDateTimeFilter(filters.IsoDateTimeFilter):
    field_class = UtcDateTimeField


def cycles_considering(queryset: QuerySet[SchedulingCycle], node: str) -> QuerySet[SchedulingCycle]:
    """Cycles whose candidates included ``node`` (``candidate_nodes`` is ``|node-1|node-2|``).

    PostgreSQL: ``string_to_array(candidate_nodes, '|') @> ARRAY[node]``, which the GIN index of migration
    0002 answers. Elsewhere (SQLite for ``make run``): ``LIKE '%|node|%'``, exact because node names cannot
    contain ``|`` (``NODE_NAME`` refuses anything else before it gets here).
    """
    if connections[queryset.db].vendor == "postgresql":
        names: Func = Func(
            F("candidate_nodes"), Value("|"), function="string_to_array", output_field=ArrayField(TextField())
        )
        return queryset.alias(candidate_names=names).filter(candidate_names__contains=[node])
    return queryset.filter(candidate_nodes__contains=f"|{node}|")


class CycleFilterSet(filters.FilterSet):
    started_after = UtcDateTimeFilter(
        field_name="started_at", lookup_expr="gte", label="Started at or after (ISO 8601)"
    )
    started_before = UtcDateTimeFilter(field_name="started_at", lookup_expr="lt", label="Started before")
    namespace = filters.CharFilter(field_name="pod_namespace", label="Pod namespace (exact)")
    pod = filters.CharFilter(field_name="pod_name", lookup_expr="icontains", label="Pod name contains")
    pod_uid = filters.CharFilter(field_name="pod_uid", label="Pod UID (exact)")
    profile = filters.CharFilter(field_name="profile", label="Extender profile (exact)")
    outcome = filters.MultipleChoiceFilter(field_name="outcome", choices=Outcome.choices, label="Outcome")
    node_mode = filters.ChoiceFilter(field_name="node_mode", choices=NodeMode.choices, label="Node mode")
    chosen_node = filters.CharFilter(field_name="chosen_node", label="Node the pod was bound to")
    preferred_node = filters.CharFilter(field_name="preferred_node", label="Our highest-scored node")
    node_considered = filters.CharFilter(
        field_name="candidate_nodes",
        method="filter_node_considered",
        validators=[NODE_NAME],
        label="A node among the candidates",
    )
    min_metric_age = filters.NumberFilter(
        field_name="metric_age_seconds",
        lookup_expr="gte",
        min_value=0,
        max_value=10**9,
        label="Metrics at least this old (seconds)",
    )

    class Meta:
        model = SchedulingCycle
        fields: list[str] = []

    def filter_node_considered(
        self, queryset: QuerySet[SchedulingCycle], name: str, value: str
    ) -> QuerySet[SchedulingCycle]:
        return cycles_considering(queryset, value) if value else queryset


_COUNT = {"min_value": 0, "max_value": 2**63 - 1}


class NodeFilterSet(filters.FilterSet):
    node = filters.CharFilter(field_name="node", lookup_expr="icontains", label="Node name contains")
    min_considered = filters.NumberFilter(field_name="considered", lookup_expr="gte", **_COUNT)
    min_filtered_out = filters.NumberFilter(field_name="filtered_out", lookup_expr="gte", **_COUNT)
    min_placements = filters.NumberFilter(field_name="placements", lookup_expr="gte", **_COUNT)
    seen_after = UtcDateTimeFilter(field_name="last_seen_at", lookup_expr="gte")
    seen_before = UtcDateTimeFilter(field_name="last_seen_at", lookup_expr="lt")

    class Meta:
        model = NodeTally
        fields: list[str] = []


class TrafficRefreshFilterSet(filters.FilterSet):
    query_key = filters.CharFilter(field_name="query_key", label="The query's key (names its Redis snapshot)")
    status = filters.ChoiceFilter(field_name="status", choices=RefreshStatus.choices, label="Refresh status")
    started_after = UtcDateTimeFilter(field_name="started_at", lookup_expr="gte", label="Started at or after")
    started_before = UtcDateTimeFilter(field_name="started_at", lookup_expr="lt", label="Started before")

    class Meta:
        model = TrafficRefresh
        fields: list[str] = []
