"""The audit API's history replays: what ``POST /api/v1/replays/`` takes, and the replay with its report
(mirrors ``scheduler_core.history_replay.report.HistoryReplayReport``)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from dashboard.api.replay_learning_serializers import LearningComparisonSerializer, learning_data
from dashboard.replays.models import CompareLearning, HistoryReplay
from dashboard.replays.selectors import history_replay_report
from dashboard.replays.services import MAX_YAML_BYTES

# --- what a replay is started with ----------------------------------------------------------------------------------


class ReplaySelectionSerializer(serializers.Serializer[Any]):
    """Which recorded cycles; neither a time range nor ``last``: the last 1000."""

    since = serializers.CharField(required=False, allow_blank=True, help_text="Started at or after (ISO 8601).")
    until = serializers.CharField(required=False, allow_blank=True, help_text="Started before (ISO 8601).")
    last = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=2**31 - 1, help_text="The newest N cycles."
    )
    namespace = serializers.CharField(required=False, allow_blank=True, max_length=253, help_text="Pod namespace.")
    profile = serializers.CharField(
        required=False, allow_blank=True, max_length=63, help_text="The profile the cycles were recorded under."
    )
    node = serializers.CharField(
        required=False, allow_blank=True, max_length=253, help_text="A node among the cycles' candidates."
    )


class ReplayStartSerializer(serializers.Serializer[Any]):
    selection = ReplaySelectionSerializer(required=False)
    candidate_profile = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=63,
        help_text="A configured profile to replay under; with candidate_yaml, the profile of the YAML to use "
        "(needed when it defines several).",
    )
    candidate_yaml = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=MAX_YAML_BYTES,
        help_text="Profile YAML (the profiles file's shape); a mistake is a 400 naming the profile, plugin and field.",
    )
    candidate_version = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=64,
        help_text="A recorded profile version to replay under (its digest, as /api/v1/profile-versions/ lists them), "
        "instead of candidate_yaml.",
    )
    compare_learning = serializers.ChoiceField(
        choices=CompareLearning.choices,
        required=False,
        allow_blank=True,
        help_text="on: also compare the herd estimate with traffic learned per workload against the constant, under "
        "the candidate; off: the constant against learned traffic; empty: no comparison.",
    )


# --- the report -----------------------------------------------------------------------------------------------------


class CountSerializer(serializers.Serializer[Any]):
    k = serializers.IntegerField()
    n = serializers.IntegerField()
    basis = serializers.CharField(help_text="What k and n count.")


class SkipReasonSerializer(serializers.Serializer[Any]):
    reason = serializers.CharField()
    cycles = serializers.IntegerField()


class NodePlacementsSerializer(serializers.Serializer[Any]):
    node = serializers.CharField()
    before = serializers.IntegerField(help_text="Cycles that preferred the node under the recorded profile.")
    after = serializers.IntegerField(help_text="Cycles that prefer it under the candidate.")
    before_rate_sum = serializers.FloatField(help_text="Σ of its recorded traffic (bytes/s) over those cycles.")
    before_with_rate = serializers.IntegerField(help_text="How many of them had a traffic figure for it.")
    after_rate_sum = serializers.FloatField()
    after_with_rate = serializers.IntegerField()


class SpreadSerializer(serializers.Serializer[Any]):
    nodes = serializers.IntegerField()
    mean = serializers.FloatField(allow_null=True, help_text="Bytes per second.")
    stdev = serializers.FloatField(allow_null=True)
    max = serializers.FloatField(allow_null=True)
    max_node = serializers.CharField()
    min = serializers.FloatField(allow_null=True)
    min_node = serializers.CharField()
    max_over_min = serializers.FloatField(allow_null=True)
    basis = serializers.CharField()


class TrafficBalanceSerializer(serializers.Serializer[Any]):
    before = SpreadSerializer()
    after = SpreadSerializer()
    quietest_chosen_before = CountSerializer()
    quietest_chosen_after = CountSerializer()


class RejectionSerializer(serializers.Serializer[Any]):
    plugin = serializers.CharField()
    reason = serializers.CharField()
    nodes = serializers.IntegerField(help_text="Node-cycles.")
    cycles = serializers.IntegerField()


class ChangedDecisionSerializer(serializers.Serializer[Any]):
    cycle_id = serializers.IntegerField()
    started_at = serializers.CharField()
    pod_namespace = serializers.CharField()
    pod_name = serializers.CharField()
    profile = serializers.CharField()
    before_node = serializers.CharField()
    after_node = serializers.CharField()
    before_node_final_before = serializers.FloatField(allow_null=True)
    before_node_final_after = serializers.FloatField(allow_null=True)
    after_node_final_before = serializers.FloatField(allow_null=True)
    after_node_final_after = serializers.FloatField(allow_null=True)
    why = serializers.CharField()
    what_if = serializers.SerializerMethodField(
        help_text="The cycle's decision page what-if with the candidate's settings filled in."
    )
    cycle = serializers.SerializerMethodField(help_text="The cycle in this API.")

    def get_what_if(self, change: Any) -> str:
        params = self.context.get("what_if_params") or {}
        path = reverse("ui:what-if", args=[change["cycle_id"]])
        path = f"{path}?{urlencode(params)}" if params else path
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request is not None else path

    def get_cycle(self, change: Any) -> str:
        path = reverse("api:cycle-detail", args=[change["cycle_id"]])
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request is not None else path


class CandidateSerializer(serializers.Serializer[Any]):
    label = serializers.CharField()  # type: ignore[assignment]  # a declared field, popped from the class by DRF: not Field.label
    source = serializers.CharField(help_text="profile (configured) or yaml.")  # type: ignore[assignment]  # a declared field, popped from the class by DRF: not Field.source
    filters = serializers.ListField(child=serializers.CharField())
    weights = serializers.DictField(child=serializers.IntegerField())
    max_bytes_per_second = serializers.FloatField()
    fail_on_missing = serializers.BooleanField()
    answer_scale = serializers.CharField()
    what_if_params = serializers.DictField(child=serializers.CharField())


class HistoryReplayReportSerializer(serializers.Serializer[Any]):
    candidate = CandidateSerializer(allow_null=True)
    cycles_selected = serializers.IntegerField()
    cycles_replayed = serializers.IntegerField()
    cycles_skipped = serializers.IntegerField()
    skipped = SkipReasonSerializer(many=True)
    decisions_changed = CountSerializer()
    became_unschedulable = serializers.IntegerField()
    became_schedulable = serializers.IntegerField()
    feasible_to_infeasible = serializers.IntegerField()
    infeasible_to_feasible = serializers.IntegerField()
    ties_created = serializers.IntegerField()
    ties_removed = serializers.IntegerField()
    ties_before = serializers.IntegerField()
    ties_after = serializers.IntegerField()
    partially_scored = serializers.IntegerField()
    recorded_preferred_differs = serializers.IntegerField()
    placements = NodePlacementsSerializer(many=True)
    balance = TrafficBalanceSerializer()
    new_rejections = RejectionSerializer(many=True)
    sample = ChangedDecisionSerializer(many=True)
    sample_limit = serializers.IntegerField()
    figures = serializers.DictField(child=serializers.CharField(), help_text="Figure → what it follows from.")
    caveats = serializers.ListField(child=serializers.CharField(), help_text="What a replay cannot know.")
    seconds = serializers.FloatField()
    learning = LearningComparisonSerializer(
        allow_null=True, required=False, help_text="The comparison of learned traffic with the constant; null: none."
    )


# --- the replay -----------------------------------------------------------------------------------------------------


class ProgressSerializer(serializers.Serializer[Any]):
    done = serializers.IntegerField()
    total = serializers.IntegerField(allow_null=True, help_text="Null until the run has listed the cycles.")


class HistoryReplaySerializer(serializers.ModelSerializer[HistoryReplay]):
    url = serializers.HyperlinkedIdentityField(view_name="api:replay-detail")
    progress = serializers.SerializerMethodField()

    class Meta:
        model = HistoryReplay
        fields = [
            "id",
            "url",
            "created_at",
            "created_by",
            "status",
            "selection",
            "candidate_source",
            "candidate_profile",
            "candidate_scenario",
            "compare_learning",
            "progress",
            "started_at",
            "finished_at",
            "error",
        ]
        read_only_fields = fields

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, replay: HistoryReplay) -> dict[str, Any]:
        return {"done": replay.progress_done, "total": replay.progress_total}


class HistoryReplayDetailSerializer(HistoryReplaySerializer):
    report = serializers.SerializerMethodField()
    candidate_yaml = serializers.CharField(read_only=True)

    class Meta(HistoryReplaySerializer.Meta):
        fields = [*HistoryReplaySerializer.Meta.fields, "candidate_yaml", "report"]
        read_only_fields = fields

    @extend_schema_field(HistoryReplayReportSerializer(allow_null=True))
    def get_report(self, replay: HistoryReplay) -> dict[str, Any] | None:
        report = history_replay_report(replay)
        if report is None:
            return None
        params = report.candidate.what_if_params if report.candidate is not None else {}
        context = {**self.context, "what_if_params": params}
        data: dict[str, Any] = HistoryReplayReportSerializer(
            {k: v for k, v in (replay.report or {}).items() if k != "learning"}, context=context
        ).data
        data["learning"] = learning_data(report.learning) if report.learning is not None else None
        return data
