"""Output shapes of the audit API (read-only: no serializer here ever saves)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from dashboard.api.exports import CALL_FIELDS
from dashboard.models import NodeTally, SchedulingCycle, VerbCall
from dashboard.selectors.cycles import CYCLE_FIELDS, CallRead, CycleRead, cycle_explanation, cycle_read
from dashboard.selectors.nodes import node_reasons
from dashboard.storage.call_record import record_builtins
from dashboard.traffic.models import TrafficRefresh

# --- explanation (mirrors scheduler_core.explanation.explain) ---------------------------------------------------


# An output shape of a plain object (``scheduler_core.explanation.explain``'s dataclasses): each field is its attribute.
# DRF's ``Serializer.to_representation`` looks every field of every object up through ``Field.get_attribute``,
# which also serves dotted sources, callables and mappings: generality an explanation pays for again on each of the
# dozen figures of each of hundreds of nodes and terms. Each value still goes through its field's own
# ``to_representation`` (and ``None`` stays ``None``), so the output is DRF's
# (tests/dashboard/api/test_plain_serializers.py).
# A comment, not a docstring: the schema would give every subclass its text as a description.
class _PlainSerializer(serializers.Serializer[Any]):
    @cached_property
    def _plain_fields(self) -> list[tuple[str, Callable[[Any], Any]]]:
        fields = list(self._readable_fields)
        assert all(f.source == f.field_name for f in fields), "a plain shape reads attributes of the same name"
        return [(f.field_name, f.to_representation) for f in fields if f.field_name is not None]  # (bound: all named)

    def to_representation(self, instance: Any) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for name, represent in self._plain_fields:
            value = getattr(instance, name)
            data[name] = None if value is None else represent(value)
        return data


class FilterVerdictSerializer(_PlainSerializer):
    plugin = serializers.CharField()
    reason = serializers.CharField()
    detail = serializers.CharField()


class ReconciledFiguresSerializer(_PlainSerializer):
    pod = serializers.CharField(help_text="namespace/name of the bound pod.")
    assumed_bytes = serializers.FloatField(help_text="What the pod was assumed to add over the query window.")
    observed_bytes = serializers.FloatField(help_text="The pod's own bytes over the same window, read with the node's.")
    counted_bytes = serializers.FloatField(help_text="max(0, assumed_bytes − observed_bytes): part of herd_bytes.")


class TrafficFiguresSerializer(_PlainSerializer):
    measured_bytes = serializers.FloatField(
        allow_null=True, help_text="Bytes received over the query window; null: no usable measurement."
    )
    herd_bytes = serializers.FloatField(help_text="Bytes assumed on top for pods bound there recently (herd estimate).")
    herd_binds = serializers.IntegerField(
        allow_null=True, help_text="How many recent binds herd_bytes come from (null: not counted in older records)."
    )
    herd_newest_bind_age_seconds = serializers.FloatField(
        allow_null=True, help_text="How long before the call the newest of those binds was made."
    )
    estimate_bytes = serializers.FloatField(allow_null=True, help_text="measured_bytes + herd_bytes.")
    max_estimate_bytes = serializers.FloatField(
        allow_null=True, help_text="The largest estimate among the candidates (it scores 0)."
    )
    max_estimate_node = serializers.CharField(help_text="The candidate with the largest estimate.")
    metric_age_seconds = serializers.FloatField(allow_null=True)
    missing_reason = serializers.CharField(
        help_text="Why there is no usable measurement (the node then scores the neutral value, or 0 under "
        "missingPolicy: fail)."
    )
    missing_score = serializers.FloatField(
        allow_null=True,
        help_text="What a node without a usable measurement scores: 50 (neutral) or 0 (missingPolicy: fail); null in "
        "records from before it was kept.",
    )
    herd_reconciled = ReconciledFiguresSerializer(
        many=True,
        help_text="Recent binds counted by their pods' own traffic (reconcileHerd); herd_bytes is their counted_bytes "
        "plus what the node's other herd_binds add decaying, rounded.",
    )


class ResourceFiguresSerializer(_PlainSerializer):
    requested = serializers.ListField(child=serializers.CharField(), help_text="Extended resources the pod requests.")
    resource_scores = serializers.DictField(
        child=serializers.FloatField(allow_null=True),
        help_text="The node's resourcesScore per requested resource (null: no NodeResources object).",
    )
    mean = serializers.FloatField(allow_null=True, help_text="Their mean; the score is it clamped to 0..100.")


class ImageFiguresSerializer(_PlainSerializer):
    requested = serializers.IntegerField(help_text="Images the pod names.")
    present = serializers.IntegerField(allow_null=True, help_text="How many of them the node holds.")
    images = serializers.ListField(child=serializers.CharField())


class ScoreTermSerializer(_PlainSerializer):
    plugin = serializers.CharField()
    weight = serializers.IntegerField()
    applicable = serializers.BooleanField()
    normalized = serializers.FloatField(help_text="The plugin's 0..100 score for the node.")
    weighted = serializers.FloatField(help_text="normalized × weight.")
    contribution = serializers.FloatField(help_text="Points added to the final score (weighted / sum of weights).")
    raw = serializers.FloatField(allow_null=True, help_text="The plugin's input (bytes for NetworkTraffic).")
    note = serializers.CharField()
    arithmetic = serializers.CharField(help_text="How normalized follows from the figures, written out with them.")
    traffic = TrafficFiguresSerializer(allow_null=True, help_text="NetworkTraffic's figures.")
    resources = ResourceFiguresSerializer(allow_null=True, help_text="NodeResourceFitByCR's figures.")
    images = ImageFiguresSerializer(allow_null=True, help_text="ImageLocality's figures.")


class NodeExplanationSerializer(_PlainSerializer):
    node = serializers.CharField()
    passed = serializers.BooleanField(allow_null=True, help_text="Null when no filter call was recorded.")
    unresolvable = serializers.BooleanField()
    verdicts = FilterVerdictSerializer(many=True, help_text="Failing filter plugins and their reasons.")
    traffic_bytes = serializers.FloatField(allow_null=True)
    terms = ScoreTermSerializer(many=True)
    final_score = serializers.FloatField(allow_null=True, help_text="0..100.")
    extender_score = serializers.IntegerField(allow_null=True, help_text="0..10, as answered to kube-scheduler.")
    rank = serializers.IntegerField(allow_null=True)
    final_arithmetic = serializers.CharField(help_text="The weighted mean of the applicable terms, written out.")
    answer_arithmetic = serializers.CharField(help_text="How the answer follows from the final score.")
    kube_scheduler_points = serializers.IntegerField(
        allow_null=True, help_text="answer × extender weight × 10, when the profile states the weight."
    )


class TrafficTermsSerializer(_PlainSerializer):
    window_minutes = serializers.IntegerField(
        allow_null=True, help_text="The traffic window (timeRangeInMinutes) the raw bytes cover; null: not known."
    )
    max_staleness_seconds = serializers.FloatField(
        allow_null=True, help_text="The age past which traffic counts as stale (maxStalenessSeconds); null: not known."
    )
    source = serializers.CharField(  # type: ignore[assignment]  # a declared field, popped from the class by DRF: not Field.source
        help_text="recorded: the profile version the cycle recorded; empty: not known."
    )
    unknown = serializers.CharField(
        help_text='Why they are not known, e.g. "not recorded; recorded before profile versions were kept"; else empty.'
    )
    profile = serializers.CharField(help_text="The profile they are looked up in: the cycle's.")
    version = serializers.CharField(help_text="The profile version they come from; empty: not known.")


class PodAssumedSerializer(_PlainSerializer):
    bytes = serializers.FloatField(help_text="Over the traffic window, like assumedBytesPerPod.")
    source = serializers.CharField(  # type: ignore[assignment]  # a declared field, popped from the class by DRF: not Field.source
        help_text="constant, learned (from the workload's pods) or override (annotation)."
    )
    text = serializers.CharField(help_text="Where the bytes come from, in words, with the figures.")
    workload = serializers.CharField(help_text="kind namespace/name of the pod's workload; empty: none known.")
    pods = serializers.IntegerField(help_text="How many measured pods a learned figure comes from.")
    bytes_per_second = serializers.FloatField(help_text="The learned rate: bytes = rate × window_seconds, rounded.")
    window_seconds = serializers.IntegerField(allow_null=True, help_text="The traffic window; null: not known.")


class ExplanationSerializer(_PlainSerializer):
    chosen_node = serializers.CharField()
    preferred_node = serializers.CharField()
    runner_up = serializers.CharField()
    margin = serializers.FloatField(allow_null=True)
    candidate_count = serializers.IntegerField()
    excluded_count = serializers.IntegerField()
    metric_age_seconds = serializers.FloatField(allow_null=True)
    metric_note = serializers.CharField()
    traffic_window_minutes = serializers.IntegerField(
        allow_null=True, help_text="traffic_terms.window_minutes: the record does not carry it."
    )
    traffic_terms = TrafficTermsSerializer(
        help_text="The traffic window and staleness limit the figures are read with, where they come from or why not."
    )
    metric_stale = serializers.BooleanField(
        allow_null=True,
        help_text="The extender refused the traffic as stale, or its age exceeds max_staleness_seconds; null: not "
        "known (no measurement, or no known limit).",
    )
    metric_staleness = serializers.CharField(
        help_text="That verdict in words, with the age and the limit it follows from; empty without a measurement."
    )
    nodes = NodeExplanationSerializer(many=True)
    summary = serializers.CharField()
    answer_scale = serializers.CharField(help_text="fixed (final / 10) or spread (min–max over the candidates).")
    answer_rule = serializers.CharField(help_text="The rule in words, with its figures.")
    spread_min = serializers.FloatField(allow_null=True, help_text="The lowest final score the spread maps to 0.")
    spread_max = serializers.FloatField(allow_null=True, help_text="The highest final score the spread maps to 10.")
    extender_weight = serializers.IntegerField(
        allow_null=True, help_text="The extender's weight in kube-scheduler, as the profile states it."
    )
    answer_tie = serializers.BooleanField(
        help_text="Our preferred node answered the same as a node that scored less: rounding erased our preference."
    )
    tied_nodes = serializers.ListField(
        child=serializers.CharField(), help_text="The other nodes that answered what our preferred node answered."
    )
    measured_leader = serializers.CharField(
        help_text="The node that would score highest on measured traffic alone (empty without herd bytes)."
    )
    herd_changed_ranking = serializers.BooleanField(
        help_text="The bytes assumed for recent binds moved our preference away from measured_leader."
    )
    pod_assumed = PodAssumedSerializer(
        allow_null=True,
        help_text="What the herd estimate assumes the pod adds to its node once bound, and where that comes from.",
    )


# --- cycles -----------------------------------------------------------------------------------------


class CycleSerializer(serializers.HyperlinkedModelSerializer[SchedulingCycle]):
    url = serializers.HyperlinkedIdentityField(view_name="api:cycle-detail")

    class Meta:
        model = SchedulingCycle
        fields = ["id", "url", *CYCLE_FIELDS[1:]]
        read_only_fields = fields


class VerbCallSerializer(serializers.ModelSerializer[Any]):  # serializes a CallRead: the model, decoded
    record = serializers.JSONField(
        help_text="The plugins' verdicts and scores, one list per quantity aligned with nodes."
    )
    response = serializers.JSONField(allow_null=True, help_text="The JSON answered to kube-scheduler.")

    class Meta:
        model = VerbCall
        fields = list(CALL_FIELDS)  # the same columns the NDJSON export writes for each call
        read_only_fields = fields

    def to_representation(self, instance: CallRead) -> dict[str, Any]:
        """A call decoded by ``dashboard.selectors.cycles.call_reads``: its columns, its record and its answer."""
        decoded = {"record": record_builtins(instance.recorded), "response": instance.answer}
        shown: dict[str, Any] = {}
        for field in self._readable_fields:
            name = str(field.field_name)  # bound to the serializer: always named
            shown[name] = decoded[name] if name in decoded else _column(field, instance.call)
        return shown


def _column(field: serializers.Field[Any, Any, Any, Any], call: VerbCall) -> Any:
    value = field.get_attribute(call)
    return None if value is None else field.to_representation(value)


class CycleDetailSerializer(CycleSerializer):
    calls = serializers.SerializerMethodField()
    explanation = serializers.SerializerMethodField()

    class Meta(CycleSerializer.Meta):
        fields = [*CycleSerializer.Meta.fields, "calls", "explanation"]
        read_only_fields = fields

    def _read(self, cycle: SchedulingCycle) -> CycleRead:
        """The cycle's calls decoded once, for both fields."""
        read: CycleRead | None = getattr(self, "_cycle_read", None)
        if read is None or read.cycle is not cycle:
            read = self._cycle_read = cycle_read(cycle=cycle)
        return read

    @extend_schema_field(VerbCallSerializer(many=True))
    def get_calls(self, cycle: SchedulingCycle) -> list[dict[str, Any]]:
        return [VerbCallSerializer().to_representation(call) for call in self._read(cycle).calls]

    @extend_schema_field(ExplanationSerializer)
    def get_explanation(self, cycle: SchedulingCycle) -> dict[str, Any]:
        return dict(ExplanationSerializer(cycle_explanation(cycle=cycle, read=self._read(cycle))).data)


class VersionReferenceSerializer(serializers.Serializer[Any]):
    digest = serializers.CharField(help_text="Empty: recorded before profile versions were kept.")
    first_served = serializers.DateTimeField(allow_null=True, help_text="When its first cycle started.")
    url = serializers.CharField(help_text="This version at /api/v1/profile-versions/<digest>/; empty without one.")
    missing = serializers.CharField(help_text="Why the cycle has no known version; else empty.")


class WhySerializer(serializers.Serializer[Any]):
    cycle = CycleSerializer()
    profile_version = VersionReferenceSerializer(help_text="The profile version that decided the cycle.")
    explanation = ExplanationSerializer()


class WhyQuerySerializer(serializers.Serializer[Any]):
    namespace = serializers.CharField(required=False, max_length=253)
    name = serializers.CharField(required=False, max_length=253)
    pod_uid = serializers.CharField(required=False, max_length=64)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("pod_uid"):
            if attrs.get("namespace") or attrs.get("name"):
                raise serializers.ValidationError({"pod_uid": "give either pod_uid or namespace and name, not both"})
            return attrs
        if not attrs.get("namespace") or not attrs.get("name"):
            field = "name" if attrs.get("namespace") else "namespace"
            raise serializers.ValidationError({field: "give namespace and name, or pod_uid"})
        return attrs


# --- nodes, profiles, verification ------------------------------------------------------------------


class NodeReasonSerializer(serializers.Serializer[Any]):
    plugin = serializers.CharField()
    reason = serializers.CharField()
    count = serializers.IntegerField(help_text="Filter calls that failed the node for this reason.")


class NodeSerializer(serializers.ModelSerializer[NodeTally]):
    # context["reasons"]: the reasons of the nodes serialized, read at once (selectors.node_reasons).
    reasons = serializers.SerializerMethodField(help_text="Why it was filtered out, most common first.")
    cycles = serializers.SerializerMethodField(help_text="The cycles that considered this node.")

    class Meta:
        model = NodeTally
        fields = ["node", "considered", "filtered_out", "placements", "preferred", "last_seen_at", "reasons", "cycles"]
        read_only_fields = fields

    @extend_schema_field(NodeReasonSerializer(many=True))
    def get_reasons(self, tally: NodeTally) -> list[dict[str, Any]]:
        reasons = self.context.get("reasons")
        if reasons is None or tally.node not in reasons:
            reasons = node_reasons(nodes=[tally.node])
        return reasons[tally.node]

    def get_cycles(self, tally: NodeTally) -> str:
        path = f"{reverse('api:cycle-list')}?{urlencode({'node_considered': tally.node})}"
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request is not None else path


class ScorePluginSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    weight = serializers.IntegerField()


class ProfileSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    filter = serializers.ListField(child=serializers.CharField(), help_text="Filter plugins, in order.")
    score = ScorePluginSerializer(many=True)
    pluginConfig = serializers.DictField(  # the key operators know from KubeSchedulerConfiguration
        child=serializers.DictField(), help_text="Effective args per plugin; secrets are masked as ***."
    )


class ChainReportSerializer(serializers.Serializer[Any]):
    ok = serializers.BooleanField()
    checked = serializers.IntegerField(help_text="Calls whose link was recomputed.")
    first_broken_id = serializers.IntegerField(allow_null=True, help_text="The first call that does not verify.")
    reason = serializers.CharField()
    start_after_id = serializers.IntegerField(
        allow_null=True, help_text="Verification started after this call (the prune checkpoint's, or after_id)."
    )
    start_hash = serializers.CharField()
    head_id = serializers.IntegerField(allow_null=True, help_text="The last call checked.")
    head_hash = serializers.CharField(help_text="Keep it outside the database to anchor the chain.")
    altered_parts = serializers.ListField(
        child=serializers.CharField(), help_text="Shared parts whose bytes no longer match their digest."
    )


class VerifyQuerySerializer(serializers.Serializer[Any]):
    after_id = serializers.IntegerField(
        required=False, min_value=0, max_value=2**63 - 1, help_text="Verify only the calls after this one."
    )


_REFRESH_FIELDS = [
    "id",
    "query_key",
    "query",
    "source",
    "started_at",
    "finished_at",
    "duration_ms",
    "status",
    "error",
    "nodes_matched",
    "nodes_without_metrics",
    "unmatched_series",
    "worker",
]


class TrafficRefreshSerializer(serializers.ModelSerializer[TrafficRefresh]):
    class Meta:
        model = TrafficRefresh
        fields = _REFRESH_FIELDS
        read_only_fields = fields


class TrafficSnapshotSerializer(serializers.ModelSerializer[TrafficRefresh]):
    class Meta:
        model = TrafficRefresh
        fields = [*_REFRESH_FIELDS, "bytes_by_node"]
        read_only_fields = fields
