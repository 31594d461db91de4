"""The audit API's form of a history replay's comparison of learned traffic with the constant (mirrors
``scheduler_core.history_replay.report.LearningComparison``)."""

from __future__ import annotations

from typing import Any

import msgspec
from rest_framework import serializers

from scheduler_core.extender.record.structs import AssumedBytes
from scheduler_core.history_replay.report import LearningComparison


class _Count(serializers.Serializer[Any]):
    k = serializers.IntegerField()
    n = serializers.IntegerField()
    basis = serializers.CharField()


class AssumedSerializer(serializers.Serializer[Any]):
    bytes = serializers.FloatField(help_text="Over the query window, like assumedBytesPerPod.")
    source = serializers.CharField(help_text="constant or learned.")  # type: ignore[assignment]  # a declared field, popped from the class by DRF: not Field.source
    text = serializers.CharField(help_text="Where the bytes come from, in words, with the figures.")
    workload = serializers.CharField(help_text="kind namespace/name; empty: not known.")
    pods = serializers.IntegerField(help_text="How many measured pods a learned figure comes from (0: not learned).")
    bytes_per_second = serializers.FloatField(help_text="The learned rate: bytes = rate × window, rounded.")
    percentile = serializers.FloatField()
    lookback_days = serializers.IntegerField()


class ErrorSummarySerializer(serializers.Serializer[Any]):
    pods = serializers.IntegerField(help_text="Pods with a measured outcome.")
    mean = serializers.FloatField(allow_null=True)
    mean_abs = serializers.FloatField(allow_null=True)
    bounds = serializers.ListField(child=serializers.FloatField(), help_text="The histogram's upper bounds.")
    counts = serializers.ListField(child=serializers.IntegerField(), help_text="Pods per bucket; last: above all.")


class LearningSideSerializer(serializers.Serializer[Any]):
    mode = serializers.CharField()
    error = ErrorSummarySerializer()
    quietest = _Count()
    sources = serializers.DictField(child=serializers.IntegerField())


class NodeHerdSerializer(serializers.Serializer[Any]):
    node = serializers.CharField()
    measured_bytes = serializers.FloatField(allow_null=True)
    herd_before = serializers.FloatField()
    herd_after = serializers.FloatField()
    binds = serializers.IntegerField()


class LearningCycleSerializer(serializers.Serializer[Any]):
    cycle_id = serializers.IntegerField()
    started_at = serializers.CharField()
    pod_namespace = serializers.CharField()
    pod_name = serializers.CharField()
    workload = serializers.CharField()
    before_node = serializers.CharField()
    after_node = serializers.CharField()
    before_assumed = AssumedSerializer()
    after_assumed = AssumedSerializer()
    nodes = NodeHerdSerializer(many=True)
    measured_pod_bytes = serializers.FloatField(allow_null=True)
    measured_seconds = serializers.IntegerField()
    before_error = serializers.FloatField(allow_null=True)
    after_error = serializers.FloatField(allow_null=True)
    before_quietest = serializers.BooleanField(allow_null=True)
    after_quietest = serializers.BooleanField(allow_null=True)


class LearningComparisonSerializer(serializers.Serializer[Any]):
    before = serializers.CharField(help_text="The mode compared from: constant or learned.")
    after = serializers.CharField()
    constant_bytes = serializers.FloatField()
    decay_seconds = serializers.FloatField()
    window_seconds = serializers.IntegerField()
    cycles_compared = serializers.IntegerField()
    not_compared = serializers.DictField(child=serializers.IntegerField())
    changed = _Count()
    before_side = LearningSideSerializer()
    after_side = LearningSideSerializer()
    cycles = LearningCycleSerializer(many=True)
    cycles_limit = serializers.IntegerField()
    figures = serializers.DictField(child=serializers.CharField(), help_text="Figure → what it follows from.")
    caveats = serializers.ListField(child=serializers.CharField())


def _assumed(found: AssumedBytes) -> dict[str, Any]:
    return {**msgspec.structs.asdict(found), "text": found.text()}


def learning_data(learning: LearningComparison) -> dict[str, Any]:
    """The comparison as the API serves it: every field, the assumed bytes with their text."""
    data: dict[str, Any] = msgspec.to_builtins(learning)
    for entry, cycle in zip(data["cycles"], learning.cycles, strict=True):
        entry["before_assumed"] = _assumed(cycle.before_assumed)
        entry["after_assumed"] = _assumed(cycle.after_assumed)
    return dict(LearningComparisonSerializer(data).data)
