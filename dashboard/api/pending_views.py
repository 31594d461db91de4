"""``/api/v1/pending/``: the pods waiting now and why (``dashboard.placements.selectors``), read-only, for auditors."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from dashboard.api.exceptions import ErrorSerializer
from dashboard.api.pending_serializers import (
    PendingListSerializer,
    PendingPodDetailSerializer,
    PendingPodPathSerializer,
    PendingQuerySerializer,
)
from dashboard.placements.selectors import pending_list, pending_pod, pending_total

ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="A parameter was refused (named in `field`)."),
    401: OpenApiResponse(ErrorSerializer, description="No or bad credentials."),
    403: OpenApiResponse(ErrorSerializer, description="Not in the auditor group."),
    429: OpenApiResponse(ErrorSerializer, description="Throttled; see Retry-After."),
}


class PendingListView(APIView):
    @extend_schema(
        summary="Pods of our scheduler names waiting for a node now, each with what held back its latest attempt",
        operation_id="pending_list",
        parameters=[PendingQuerySerializer],
        responses={200: PendingListSerializer, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        query = PendingQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        namespace = query.validated_data.get("namespace")
        pods = pending_list(namespace=namespace)
        return Response(PendingListSerializer({"count": pending_total(namespace=namespace), "results": pods}).data)


class PendingPodView(APIView):
    @extend_schema(
        summary="One waiting pod: its recent attempts, reasons grouped with counts on both sides, the nodes closest "
        "to passing, what changed between attempts",
        operation_id="pending_retrieve",
        parameters=[
            OpenApiParameter("namespace", str, OpenApiParameter.PATH),
            OpenApiParameter("name", str, OpenApiParameter.PATH),
        ],
        responses={
            200: PendingPodDetailSerializer,
            **ERRORS,
            404: OpenApiResponse(ErrorSerializer, description="No pod of that name is waiting."),
        },
    )
    def get(self, request: Request, namespace: str, name: str) -> Response:
        path = PendingPodPathSerializer(data={"namespace": namespace, "name": name})
        path.is_valid(raise_exception=True)
        pod = pending_pod(**path.validated_data)
        if pod is None:
            raise NotFound(f"no pod {namespace}/{name} is waiting for a node")
        return Response(PendingPodDetailSerializer(pod).data)
