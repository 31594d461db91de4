"""One FilterSet per browsable model, shared by the audit API and the dashboard.

Usable with any queryset, e.g. ``CycleFilterSet(request.GET, queryset=SchedulingCycle.objects.all()).qs``;
check ``.is_valid()`` / ``.errors`` first to answer a 400 naming the bad field. Every filter is declared: a
query parameter never becomes an ORM keyword by itself, and a model field without a filter (or an explicit
exemption in ``tests/dashboard/test_filters.py``) fails the tests.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import connections
from django.db.models import BooleanField, F, Func, QuerySet, Value
from django_filters import rest_framework as filters
from django_filters.fields import IsoDateTimeField
from django_filters.widgets import BooleanWidget

from dashboard.models import NodeMode, NodePosting, NodeTally, Outcome, SchedulingCycle
from dashboard.traffic.models import RefreshStatus, TrafficRefresh

NODE_NAME = RegexValidator(
    r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$",
    "must be a Kubernetes node name (lowercase letters, digits, '-' and '.')",
)


PROFILE_VERSION = RegexValidator(
    r"^([0-9a-f]{12,64}|none)$", "must be a profile version's digest (hex digits), or none"
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


class _StrictBooleanWidget(BooleanWidget):
    """``true``/``false`` (any case, or ``1``/``0``) as django-filter reads them; anything else goes to the field as
    sent, to be refused there (django-filter's own widget reads it as "not given": every cycle would be listed)."""

    def value_from_datadict(self, data: Any, files: Any, name: str) -> Any:
        value = super().value_from_datadict(data, files, name)
        sent = data.get(name)
        return sent if value is None and sent not in (None, "") else value


class _StrictBooleanField(forms.NullBooleanField):
    def to_python(self, value: Any) -> bool | None:  # type: ignore[override]  # (as django-stubs declares it)
        if isinstance(value, str):  # the widget leaves only what it could not read as a string
            raise ValidationError("must be true or false", code="invalid")
        result: bool | None = super().to_python(value)
        return result


class StrictBooleanFilter(filters.BooleanFilter):
    """A boolean filter (``true``/``false``; absent: either) that refuses any other value with a 400."""

    field_class = _StrictBooleanField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", _StrictBooleanWidget)
        super().__init__(*args, **kwargs)


LISTED_BELOW_SHARE = 0.005
"""A node considered by fewer than this share of the cycles (its ``NodeTally.considered`` against the table's row
estimate) has its cycles listed from its postings first; a more common one is checked cycle by cycle as the
newest-first walk meets them (a walk that, at this share, stays within a few hundred rows per row listed)."""


class _Considered(Func):
    """``candidate_slot``'s bit is set in the node's ``NodePosting`` row (PostgreSQL), in one of two forms."""

    output_field = BooleanField()

    def __init__(self, node: str, *, listed: bool) -> None:
        super().__init__(F("candidate_slot"), Value(node))
        self.listed = listed

    # Renders its own SQL: no function, template or joiner to take (Func's), parameters as a list (Django takes one).
    def as_sql(self, compiler: Any, connection: Any, **extra_context: Any) -> tuple[str, list[Any]]:  # type: ignore[override]
        slot, node = self.get_source_expressions()
        slot_sql, slot_params = compiler.compile(slot)
        node_sql, node_params = compiler.compile(node)
        table = connection.ops.quote_name(NodePosting._meta.db_table)
        bits = 256
        if self.listed:
            # The node's slots, once (a rare node: a few index reads), then the cycles by their slot index.
            sql = (  # (identifiers and constants only: the node is a parameter)
                f"{slot_sql} = ANY(ARRAY(SELECT p.block * {bits} + o FROM {table} p, generate_series(0, {bits - 1}) o "  # noqa: S608
                f"WHERE p.node = {node_sql} AND get_bit(p.bits, o) = 1))"
            )
            return sql, [*slot_params, *node_params]
        # One index read per cycle walked (a common node: the walk meets enough of them soon).
        sql = (
            f"(SELECT get_bit(p.bits, mod({slot_sql}, {bits})::int) FROM {table} p "  # noqa: S608
            f"WHERE p.node = {node_sql} AND p.block = {slot_sql} / {bits}) = 1"
        )
        return sql, [*slot_params, *node_params, *slot_params]


def cycles_considering(queryset: QuerySet[SchedulingCycle], node: str) -> QuerySet[SchedulingCycle]:
    """Cycles whose candidates included ``node``.

    PostgreSQL: the cycle's bit (``candidate_slot``) in the node's ``NodePosting`` rows, which the ingester sets
    (and migration 0004 for cycles recorded before). A rare node's slots are listed first, a common node is
    checked cycle by cycle as the newest-first walk meets them: either form alone is slow for the other kind.
    Elsewhere (SQLite for ``make run``): ``candidate_nodes LIKE '%|node|%'``, exact because node names cannot
    contain ``|`` (``NODE_NAME`` refuses anything else before it gets here).
    """
    connection = connections[queryset.db]
    if connection.vendor == "postgresql":
        tally = NodeTally.objects.using(queryset.db).filter(node=node).values_list("considered", flat=True)
        considered = tally.first() or 0
        with connection.cursor() as cursor:
            # The table and, partitioned by day (migration 0008), its partitions: the parent itself counts none.
            cursor.execute(
                "SELECT sum(greatest(reltuples, 0)) FROM pg_class WHERE oid = %s::regclass OR oid IN "
                "(SELECT inhrelid FROM pg_inherits WHERE inhparent = %s::regclass)",
                [SchedulingCycle._meta.db_table] * 2,
            )
            row = cursor.fetchone()
        cycles = max(float(row[0] or 0.0) if row else 0.0, float(considered), 1.0)  # (-1: never analyzed)
        return queryset.filter(_Considered(node, listed=considered < LISTED_BELOW_SHARE * cycles))
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
    profile_version = filters.CharFilter(
        field_name="profile_version",
        method="filter_profile_version",
        validators=[PROFILE_VERSION],
        label="Profile version (its digest; none: recorded before versions were kept)",
    )
    # distinct=False: a column of the cycle itself cannot repeat a row, and DISTINCT would sort every bound cycle
    # before the page's LIMIT.
    outcome = filters.MultipleChoiceFilter(
        field_name="outcome", choices=Outcome.choices, label="Outcome", distinct=False
    )
    node_mode = filters.ChoiceFilter(field_name="node_mode", choices=NodeMode.choices, label="Node mode")
    chosen_node = filters.CharFilter(field_name="chosen_node", label="Node the pod was bound to")
    preferred_node = filters.CharFilter(field_name="preferred_node", label="Our highest-scored node")
    answer_tie = StrictBooleanFilter(
        field_name="answer_tie", label="Our preferred node tied with another on the 0..10 answer"
    )
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

    def filter_profile_version(
        self, queryset: QuerySet[SchedulingCycle], name: str, value: str
    ) -> QuerySet[SchedulingCycle]:
        return queryset.filter(profile_version="" if value == "none" else value) if value else queryset

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
    min_preferred = filters.NumberFilter(field_name="preferred", lookup_expr="gte", **_COUNT)
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
