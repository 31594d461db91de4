"""``/api/v1/replays/``: start a replay of recorded history under a candidate profile (``POST``, the one write of
the audit API), list the replays kept, read one with its progress and report.

Whoever may read the audit record may start a replay: it reads the record and writes only its own row. Starting
has its own budget (``SCHEDLENS_API_REPLAY_START_RATE``) on top of the user's.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import ReadOnlyModelViewSet

from dashboard.api.exceptions import ErrorSerializer
from dashboard.api.replay_serializers import (
    HistoryReplayDetailSerializer,
    HistoryReplaySerializer,
    ReplayStartSerializer,
)
from dashboard.api.throttling import ScopedThrottle
from dashboard.replays.models import HistoryReplay
from dashboard.replays.selectors import history_replay_list
from dashboard.replays.services import ReplayRequestInvalid, history_replay_start

ERRORS = {
    401: OpenApiResponse(ErrorSerializer, description="No or bad credentials."),
    403: OpenApiResponse(ErrorSerializer, description="Not in the auditor group."),
    429: OpenApiResponse(ErrorSerializer, description="Throttled; see Retry-After."),
}
BAD_QUERY = {400: OpenApiResponse(ErrorSerializer, description="A query parameter was refused (named in `field`).")}
NOT_FOUND = {404: OpenApiResponse(ErrorSerializer, description="No such replay.")}


class ReplayPagination(CursorPagination):
    """Newest first, 50 a page; a cursor this API did not hand out is a 400 naming it, as on the cycles."""

    ordering = "-id"
    page_size = 50

    def decode_cursor(self, request: Request) -> Any:
        try:
            return super().decode_cursor(request)
        except NotFound:
            raise ValidationError({self.cursor_query_param: "not a cursor this API handed out"}) from None


@extend_schema_view(
    list=extend_schema(
        summary="History replays, newest first (without their reports)",
        responses={200: HistoryReplaySerializer, **BAD_QUERY, **ERRORS},
    ),
    retrieve=extend_schema(
        summary="One history replay: its status, progress and, when done, its report",
        responses={200: HistoryReplayDetailSerializer, **ERRORS, **NOT_FOUND},
    ),
)
class ReplayViewSet(ReadOnlyModelViewSet[HistoryReplay]):
    pagination_class = ReplayPagination
    filter_backends: list[Any] = []
    throttle_scope = "replay-start"

    def get_queryset(self) -> QuerySet[HistoryReplay]:
        return history_replay_list() if self.action == "list" else HistoryReplay.objects.all()

    def get_serializer_class(self) -> type[HistoryReplaySerializer]:
        return HistoryReplayDetailSerializer if self.action == "retrieve" else HistoryReplaySerializer

    def get_throttles(self) -> list[Any]:
        throttles = super().get_throttles()
        return [*throttles, ScopedThrottle()] if self.action == "create" else throttles

    @extend_schema(
        summary="Start a replay of recorded history under a candidate profile",
        request=ReplayStartSerializer,
        responses={
            202: HistoryReplaySerializer,
            400: OpenApiResponse(
                ErrorSerializer,
                description="Refused: `field` names the input (`candidate_yaml`: the message names the profile, "
                "the plugin and the field; `selection.<field>`).",
            ),
            **ERRORS,
        },
    )
    def create(self, request: Request) -> Response:
        given = ReplayStartSerializer(data=request.data)
        if not given.is_valid():
            raise ValidationError(_flat(given.errors))
        data = given.validated_data
        try:
            replay = history_replay_start(
                selection=dict(data.get("selection") or {}),
                candidate_profile=data.get("candidate_profile", ""),
                candidate_yaml=data.get("candidate_yaml", ""),
                candidate_version=data.get("candidate_version", ""),
                compare_learning=data.get("compare_learning", ""),
                created_by=request.user.get_username(),
            )
        except ReplayRequestInvalid as exc:
            raise ValidationError(exc.errors) from None
        body = HistoryReplaySerializer(replay, context=self.get_serializer_context()).data
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["url"]})


def _flat(errors: Any, prefix: str = "") -> dict[str, Any]:
    """``{"selection": {"last": [...]}}`` → ``{"selection.last": [...]}``: the error names the field by its path."""
    flat: dict[str, Any] = {}
    for key, value in errors.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flat(value, f"{name}."))
        else:
            flat[name] = value
    return flat
