"""The live pending list as JSON for tools (kubernetes/kubernetes#53908's machine-readable "why pending").

Every reason comes with the figures it follows from: how many nodes it refused, the limit its check applies and,
per node named, what the check saw there.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rest_framework import serializers

from scheduler_core.explanation.pending import name_problem


class UnixTimeField(serializers.DateTimeField):
    """Unix seconds (how the domain keeps times) written as RFC 3339 in UTC, like every other time of the API."""

    def to_representation(self, value: Any) -> Any:
        if isinstance(value, int | float):
            value = datetime.fromtimestamp(value, tz=UTC)
        return super().to_representation(value)


class FigureSerializer(serializers.Serializer[Any]):
    node = serializers.CharField()
    figure = serializers.CharField(help_text="What the check saw on the node, e.g. `166.7 MB/s over the last 5 min`.")

    def to_representation(self, instance: Any) -> dict[str, Any]:
        node, figure = instance
        return {"node": node, "figure": figure}


class ReasonGroupSerializer(serializers.Serializer[Any]):
    source = serializers.ChoiceField(  # type: ignore[assignment]  # a declared field, popped from the class by DRF: not Field.source
        choices=["schedlens", "kube-scheduler"], help_text="Whose check: schedlens's filter or kube-scheduler's own."
    )
    plugin = serializers.CharField(help_text="schedlens's filter plugin; empty for kube-scheduler's reasons.")
    reason = serializers.CharField()
    nodes = serializers.IntegerField(help_text="Nodes this check refused (a node failing two checks counts in both).")
    limit = serializers.CharField(help_text="The limit the check applies, as its reason states it; may be empty.")
    node_names = serializers.ListField(
        child=serializers.CharField(), help_text="Up to 20 of them, by name; kube-scheduler names none."
    )
    figures = FigureSerializer(many=True, help_text="Per named node, what the check saw.")


class NearMissSerializer(serializers.Serializer[Any]):
    node = serializers.CharField()
    plugin = serializers.CharField()
    reason = serializers.CharField()
    figure = serializers.CharField(help_text="What the one failing check saw on the node (may be empty).")
    limit = serializers.CharField(help_text="The limit that check applies (may be empty).")


class AttemptSerializer(serializers.Serializer[Any]):
    at = UnixTimeField(help_text="When the attempt started (our filter call), else kube-scheduler's Event time.")
    cycle_id = serializers.IntegerField(allow_null=True, help_text="The recorded cycle; null: our filter not asked.")
    profile = serializers.CharField()
    summary = serializers.CharField()
    nodes_total = serializers.IntegerField(allow_null=True, help_text="Nodes kube-scheduler counted (else ours).")
    passed = serializers.IntegerField(allow_null=True, help_text="Nodes our filter passed; null: it was not asked.")
    reasons = ReasonGroupSerializer(many=True, source="groups")
    closest = NearMissSerializer(many=True, help_text="Nodes failing one check only: the figure and the limit.")
    message = serializers.CharField(help_text="kube-scheduler's FailedScheduling message, whole.")
    preemption = serializers.CharField()
    error = serializers.CharField(help_text="The error our extender answered, if any.")
    changes = serializers.ListField(child=serializers.CharField(), help_text="What differs from the attempt before.")


class PendingPodSerializer(serializers.Serializer[Any]):
    namespace = serializers.CharField()
    name = serializers.CharField()
    uid = serializers.CharField()
    scheduler_name = serializers.CharField()
    profile = serializers.CharField(help_text="The schedlens profile of its newest cycle, else the scheduler name.")
    waiting_since = serializers.DateTimeField(help_text="The pod's creationTimestamp.")
    waited_seconds = serializers.FloatField()
    attempts = serializers.IntegerField(help_text="Scheduling attempts seen since the pod was created.")
    last_attempt_at = serializers.DateTimeField(allow_null=True)
    summary = serializers.CharField(help_text="One line: the latest attempt's reasons, both sides, with counts.")
    reasons = serializers.SerializerMethodField()

    def get_reasons(self, pod: Any) -> list[dict[str, Any]]:
        latest = pod.view.latest
        return ReasonGroupSerializer(latest.groups if latest is not None else [], many=True).data  # type: ignore[return-value]


class PendingPodDetailSerializer(PendingPodSerializer):
    recent_attempts = AttemptSerializer(many=True, source="view.attempts", help_text="Newest first (up to 20).")


class PendingListSerializer(serializers.Serializer[Any]):
    count = serializers.IntegerField(help_text="Pods waiting (in the namespace asked), however many are listed.")
    results = PendingPodSerializer(many=True, help_text="The longest waiting first, at most 500.")


class PendingQuerySerializer(serializers.Serializer[Any]):
    namespace = serializers.CharField(required=False, max_length=63, help_text="Only pods in this namespace.")

    def validate_namespace(self, value: str) -> str:
        problem = name_problem(namespace=value)
        if problem is not None:
            raise serializers.ValidationError(problem[1])
        return value


class PendingPodPathSerializer(serializers.Serializer[Any]):
    namespace = serializers.CharField(max_length=63)
    name = serializers.CharField(max_length=253)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        problem = name_problem(namespace=attrs["namespace"], name=attrs["name"])
        if problem is not None:
            raise serializers.ValidationError({problem[0]: problem[1]})
        return attrs
