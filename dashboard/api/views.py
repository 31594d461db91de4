"""Read-only views of the audit API: parse, call a selector or service, serialize.

Every viewset is a ``ReadOnlyModelViewSet`` or answers GET only, so a write is a 405 for everyone who may
read (and a 401/403 for everyone else); ``tests/dashboard/api/test_auth.py`` checks every route.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, ClassVar

from django.conf import settings
from django.db.models import QuerySet
from django.http import HttpRequest, JsonResponse, StreamingHttpResponse
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.exceptions import APIException, NotFound, ValidationError
from rest_framework.filters import OrderingFilter
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.viewsets import GenericViewSet, ReadOnlyModelViewSet, ViewSet

from dashboard.api import exports
from dashboard.api.exceptions import ErrorSerializer
from dashboard.api.pagination import CycleCursorPagination, NodePagination
from dashboard.api.profile_version_views import (
    ProfileVersionSerializer,
    VersionQuerySerializer,
    version_reference,
    version_shown,
)
from dashboard.api.serializers import (
    ChainReportSerializer,
    CycleDetailSerializer,
    CycleSerializer,
    ExplanationSerializer,
    NodeSerializer,
    ProfileSerializer,
    TrafficRefreshSerializer,
    TrafficSnapshotSerializer,
    VerifyQuerySerializer,
    WhyQuerySerializer,
    WhySerializer,
)
from dashboard.api.throttling import ScopedThrottle
from dashboard.audit.chain import audit_chain_verify
from dashboard.filters import CycleFilterSet, NodeFilterSet, TrafficRefreshFilterSet
from dashboard.models import NodeTally, SchedulingCycle, VerbCall
from dashboard.outcomes.selectors import outcome_figures, outcomes_for_cycles
from dashboard.selectors.cycles import (
    CycleRead,
    cycle_explanation,
    cycle_export_queryset,
    cycle_latest_for_pod,
    cycle_list,
    cycle_list_with_calls,
)
from dashboard.selectors.nodes import node_list, node_reasons
from dashboard.selectors.profile_versions import cycle_profile_version, profile_version_history
from dashboard.selectors.profiles import ProfilesUnavailableError, profile_list
from dashboard.traffic.models import TrafficRefresh
from dashboard.traffic.selectors import traffic_refresh_list, traffic_snapshot_list

ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="A query parameter was refused (named in `field`)."),
    401: OpenApiResponse(ErrorSerializer, description="No or bad credentials."),
    403: OpenApiResponse(ErrorSerializer, description="Not in the auditor group."),
    429: OpenApiResponse(ErrorSerializer, description="Throttled; see Retry-After."),
}
NOT_FOUND = {404: OpenApiResponse(ErrorSerializer, description="No such object.")}


class ProfilesUnavailable(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "the profiles configuration cannot be read"


# --- cycles -----------------------------------------------------------------------------------------


@extend_schema_view(
    list=extend_schema(summary="Scheduling cycles, newest first", responses={200: CycleSerializer, **ERRORS}),
    retrieve=extend_schema(
        summary="One cycle with its calls (per-node verdicts and scores) and its explanation",
        responses={200: CycleDetailSerializer, **ERRORS, **NOT_FOUND},
    ),
)
class CycleViewSet(ReadOnlyModelViewSet[SchedulingCycle]):
    filterset_class = CycleFilterSet
    pagination_class = CycleCursorPagination

    def get_queryset(self) -> QuerySet[SchedulingCycle]:
        return cycle_list_with_calls() if self.action == "retrieve" else cycle_list()

    def get_serializer_class(self) -> type[CycleSerializer]:
        return CycleDetailSerializer if self.action == "retrieve" else CycleSerializer


class _FirstRenderer(BaseContentNegotiation):
    """Exports answer their own media type whatever ``Accept`` says; errors are JSON."""

    def select_parser(self, request: Request, parsers: Iterable[BaseParser]) -> BaseParser | None:
        return next(iter(parsers), None)

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        first = next(iter(renderers))
        return first, str(first.media_type)


class _CycleExport(GenericViewSet[SchedulingCycle]):
    """Every cycle the filters match, oldest first, streamed."""

    filterset_class = CycleFilterSet
    pagination_class = None
    renderer_classes = [JSONRenderer]
    content_negotiation_class = _FirstRenderer
    media_type: ClassVar[str]
    extension: ClassVar[str]  # not ``suffix``: ViewSetMixin.as_view() sets that to None (a view name's suffix)

    def get_queryset(self) -> QuerySet[SchedulingCycle]:
        return cycle_export_queryset()

    def _stream(self, queryset: QuerySet[SchedulingCycle]) -> Any:
        raise NotImplementedError

    def export(self, request: Request) -> StreamingHttpResponse:
        queryset = self.filter_queryset(self.get_queryset())
        response = StreamingHttpResponse(self._stream(queryset), content_type=self.media_type)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        response["Content-Disposition"] = f'attachment; filename="schedlens-cycles-{stamp}.{self.extension}"'
        return response


def _included(request: Request, allowed: tuple[str, ...]) -> set[str]:
    """``include=a,b``: what to add to each exported cycle; anything else is a 400 naming the field."""
    wanted = {part for part in request.query_params.get("include", "").split(",") if part}
    unknown = sorted(wanted - set(allowed))
    if unknown:
        raise ValidationError({"include": f"cannot include {', '.join(unknown)}: choose from {', '.join(allowed)}"})
    return wanted


def _explained(read: CycleRead) -> Any:
    return cycle_explanation(cycle=read.cycle, read=read)


def _outcomes(cycle_ids: list[int]) -> dict[int, dict[str, Any]]:
    return {pk: outcome_figures(o) for pk, o in outcomes_for_cycles(cycle_ids=cycle_ids).items()}


class CycleCsvExport(_CycleExport):
    media_type = "text/csv; charset=utf-8"
    extension = "csv"

    def _stream(self, queryset: QuerySet[SchedulingCycle]) -> Any:
        chunk_size = settings.SCHEDLENS_EXPORT_CHUNK_SIZE
        include = _included(self.request, ("explanation", exports.OUTCOME_PREFIX))
        if len(include) > 1:
            raise ValidationError({"include": "a CSV includes one of explanation, placement_outcome"})
        if "explanation" in include:
            return exports.cycles_explained_csv(queryset, chunk_size=chunk_size, explain=_explained)
        outcomes = _outcomes if exports.OUTCOME_PREFIX in include else None
        return exports.cycles_csv(queryset, chunk_size=chunk_size, outcomes=outcomes)

    @extend_schema(
        operation_id="cycles_export_csv",
        filters=True,
        summary="Cycles as CSV (streamed, oldest first)",
        parameters=[
            OpenApiParameter(
                "include",
                str,
                enum=["explanation", "placement_outcome"],
                description="`explanation`: one row per cycle and candidate node, with every figure its scores and "
                "answer follow from, in columns named like the why API's keys (a term's as `<plugin>.<key>`); "
                "`placement_outcome`: what followed the placement, its longest passed window's figures.",
            )
        ],
        responses={(200, "text/csv"): OpenApiTypes.STR, **ERRORS},
    )
    def export(self, request: Request) -> StreamingHttpResponse:
        return super().export(request)


class CycleNdjsonExport(_CycleExport):
    media_type = "application/x-ndjson"
    extension = "ndjson"

    def _stream(self, queryset: QuerySet[SchedulingCycle]) -> Any:
        include = _included(self.request, ("calls", "explanation", exports.OUTCOME_PREFIX))
        return exports.cycles_ndjson(
            queryset,
            chunk_size=settings.SCHEDLENS_EXPORT_CHUNK_SIZE,
            with_calls="calls" in include,
            explain=_explained if "explanation" in include else None,
            outcomes=_outcomes if exports.OUTCOME_PREFIX in include else None,
        )

    @extend_schema(
        operation_id="cycles_export_ndjson",
        filters=True,
        summary="Cycles as NDJSON, one object a line (streamed, oldest first)",
        parameters=[
            OpenApiParameter(
                "include",
                str,
                description="Comma-separated: `calls` (each cycle with its calls and their chain hashes), "
                "`explanation` (each cycle with its explanation, as the why API gives it), `placement_outcome` (what "
                "followed the placement, as `cycles/<id>/outcome/` gives it; null: none).",
            )
        ],
        responses={(200, "application/x-ndjson"): OpenApiTypes.STR, **ERRORS},
    )
    def export(self, request: Request) -> StreamingHttpResponse:
        return super().export(request)


# --- why --------------------------------------------------------------------------------------------


class WhyView(APIView):
    @extend_schema(
        summary="Why a pod went where it went: its latest cycle, explained",
        parameters=[WhyQuerySerializer],
        responses={200: WhySerializer, **ERRORS, **NOT_FOUND},
    )
    def get(self, request: Request) -> Response:
        query = WhyQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        cycle = cycle_latest_for_pod(**query.validated_data)
        if cycle is None:
            raise NotFound("no recorded cycle for this pod")
        explanation = cycle_explanation(cycle=cycle)
        cycle_data = CycleSerializer(cycle, context={"request": request}).data
        recorded = cycle_profile_version(profile=cycle.profile, digest=cycle.profile_version)
        return Response(
            {
                "cycle": cycle_data,
                "profile_version": version_reference(request, recorded),
                "explanation": ExplanationSerializer(explanation).data,
            }
        )


# --- nodes and profiles -----------------------------------------------------------------------------


class _TieBrokenOrdering(OrderingFilter):
    """Orders by what was asked, then by node name, so pages never shuffle rows with equal counts."""

    def get_ordering(self, request: Request, queryset: QuerySet[Any], view: Any) -> list[str]:
        ordering = list(super().get_ordering(request, queryset, view) or [])
        return [*ordering, "node"] if not {"node", "-node"} & set(ordering) else ordering


@extend_schema_view(
    list=extend_schema(
        summary="Nodes seen in the retained record: times considered, filtered out and why, placed on, preferred",
        responses={200: NodeSerializer, **ERRORS, 404: OpenApiResponse(ErrorSerializer, description="No such page.")},
    ),
    retrieve=extend_schema(summary="One node's counts", responses={200: NodeSerializer, **ERRORS, **NOT_FOUND}),
)
class NodeViewSet(ReadOnlyModelViewSet[NodeTally]):
    serializer_class = NodeSerializer
    filterset_class = NodeFilterSet
    filter_backends = [DjangoFilterBackend, _TieBrokenOrdering]
    ordering_fields = ["node", "considered", "filtered_out", "placements", "preferred", "last_seen_at"]
    ordering = ["node"]
    pagination_class = NodePagination
    lookup_field = "node"
    lookup_value_regex = r"[^/]+"
    _reasons: dict[str, list[dict[str, Any]]] | None = None

    def get_queryset(self) -> QuerySet[NodeTally]:
        return node_list()

    # Pages nodes only (their reasons are fetched per page); DRF's declares any rows.
    def paginate_queryset(self, queryset: QuerySet[NodeTally]) -> list[NodeTally] | None:  # type: ignore[override]
        page = super().paginate_queryset(queryset)
        if page is not None:  # the page's reasons in one query, not one per node
            self._reasons = node_reasons(nodes=[tally.node for tally in page])
        return page

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "reasons": self._reasons}


@extend_schema_view(
    list=extend_schema(
        summary="Traffic refresh runs, newest first", responses={200: TrafficRefreshSerializer, **ERRORS}
    ),
    retrieve=extend_schema(summary="One refresh run", responses={200: TrafficRefreshSerializer, **ERRORS, **NOT_FOUND}),
)
class TrafficRefreshViewSet(ReadOnlyModelViewSet[TrafficRefresh]):
    serializer_class = TrafficRefreshSerializer
    filterset_class = TrafficRefreshFilterSet
    pagination_class = CycleCursorPagination  # keyset on (started_at, id), like cycles

    def get_queryset(self) -> QuerySet[TrafficRefresh]:
        return traffic_refresh_list()


@extend_schema_view(
    list=extend_schema(
        summary="Recorded traffic snapshots (bytes per node), newest first",
        responses={200: TrafficSnapshotSerializer, **ERRORS},
    ),
    retrieve=extend_schema(summary="One snapshot", responses={200: TrafficSnapshotSerializer, **ERRORS, **NOT_FOUND}),
)
class TrafficSnapshotViewSet(ReadOnlyModelViewSet[TrafficRefresh]):
    serializer_class = TrafficSnapshotSerializer
    filterset_class = TrafficRefreshFilterSet
    pagination_class = CycleCursorPagination

    def get_queryset(self) -> QuerySet[TrafficRefresh]:
        return traffic_snapshot_list()


class ProfileViewSet(ViewSet):
    """The effective configuration the extender runs with; secret-looking values are masked."""

    lookup_field = "name"
    lookup_value_regex = r"[^/]+"
    filter_backends: list[Any] = []

    def _profiles(self) -> list[dict[str, Any]]:
        try:
            return profile_list()
        except ProfilesUnavailableError as exc:
            raise ProfilesUnavailable(f"the profiles configuration cannot be read: {exc}") from None

    @extend_schema(
        summary="Profiles (effective configuration)", responses={200: ProfileSerializer(many=True), **ERRORS}
    )
    def list(self, request: Request) -> Response:
        return Response(ProfileSerializer(self._profiles(), many=True).data)

    @extend_schema(
        summary="One profile",
        parameters=[OpenApiParameter("name", str, OpenApiParameter.PATH, description="The profile's name.")],
        responses={200: ProfileSerializer, **ERRORS, **NOT_FOUND},
    )
    def retrieve(self, request: Request, name: str | None = None) -> Response:
        for profile in self._profiles():
            if profile["name"] == name:
                return Response(ProfileSerializer(profile).data)
        raise NotFound(f"no profile {name!r}")


class ProfileVersionViewSet(ViewSet):
    """Recorded profile versions, oldest first per profile."""

    lookup_field = "digest"
    lookup_value_regex = r"[0-9a-f]{12,64}"
    filter_backends: list[Any] = []

    @extend_schema(
        summary="Recorded profile versions",
        parameters=[VersionQuerySerializer],
        responses={200: ProfileVersionSerializer(many=True), **ERRORS},
    )
    def list(self, request: Request) -> Response:
        query = VersionQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)  # a 400 naming the field
        history = profile_version_history(profile=query.validated_data.get("profile") or None)
        return Response([version_shown(entry) for entries in history.values() for entry in entries])

    @extend_schema(
        summary="One recorded profile version", responses={200: ProfileVersionSerializer, **ERRORS, **NOT_FOUND}
    )
    def retrieve(self, request: Request, digest: str | None = None) -> Response:
        for entries in profile_version_history().values():
            for entry in entries:
                if entry.version.digest == digest:
                    return Response(version_shown(entry))
        raise NotFound(f"no recorded profile version {digest!r}")


# --- tamper evidence --------------------------------------------------------------------------------


class AuditVerifyView(APIView):
    """Recompute the hash chain over the stored calls (from the last prune checkpoint) and report."""

    throttle_scope = "audit-verify"

    def get_throttles(self) -> list[Any]:
        return [*super().get_throttles(), ScopedThrottle()]

    @extend_schema(
        summary="Verify the hash chain of the record; reports the first broken link",
        parameters=[VerifyQuerySerializer],
        responses={200: ChainReportSerializer, **ERRORS, **NOT_FOUND},
    )
    def get(self, request: Request) -> Response:
        query = VerifyQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        try:
            report = audit_chain_verify(after_id=query.validated_data.get("after_id"))
        except VerbCall.DoesNotExist:
            raise NotFound("after_id names no stored call") from None
        return Response(ChainReportSerializer(report).data)


def api_not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Any other path under /api/: a JSON 404 in the API's error shape rather than Django's HTML page."""
    return JsonResponse({"error": "no such API route"}, status=404)
