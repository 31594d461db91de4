"""``/api/v1/cycles/<id>/outcome/`` (what a placement did to traffic) and ``/api/v1/balance/`` (is traffic balanced:
the spread series, how often the chosen node stayed the quietest, the herd estimate's error per workload kind)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from dashboard.api.views import ERRORS, NOT_FOUND
from dashboard.outcomes.selectors import (
    balance_series,
    outcome_figures,
    outcome_get,
    pod_error_histograms,
    quietest_shares,
)

MAX_HOURS = 24 * 31


class BalanceQuerySerializer(serializers.Serializer[Any]):
    hours = serializers.FloatField(
        required=False, default=6.0, min_value=0.01, max_value=MAX_HOURS, help_text="How far back (default 6)."
    )
    profile = serializers.CharField(required=False, default="", max_length=63, help_text="One profile only.")


class OutcomeView(APIView):
    @extend_schema(
        summary="What a bound cycle's placement did to traffic: the estimate, each passed window, the error",
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT), **ERRORS, **NOT_FOUND},
    )
    def get(self, request: Request, pk: int) -> Response:
        outcome = outcome_get(cycle_id=pk)
        if outcome is None:
            raise NotFound("no outcome for this cycle (not bound, or its first window has not passed)")
        return Response(outcome_figures(outcome))


class BalanceView(APIView):
    @extend_schema(
        summary="Is traffic balanced: spread over time, the chosen node staying quietest, the estimate's error",
        parameters=[BalanceQuerySerializer],
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT), **ERRORS},
    )
    def get(self, request: Request) -> Response:
        query = BalanceQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        since = timezone.now() - timedelta(hours=query.validated_data["hours"])
        profile = query.validated_data["profile"]
        series = [
            {
                "at": s.at,
                "profile": s.profile,
                "nodes": s.nodes,
                "window_seconds": s.window_seconds,
                "mean_bytes": s.mean_bytes,
                "stdev_bytes": s.stdev_bytes,
                "cv": s.cv,
                "max_bytes": s.max_bytes,
                "min_bytes": s.min_bytes,
                "max_over_min": s.max_over_min,
            }
            for s in balance_series(since=since, profile=profile)
        ]
        quietest = [
            {"profile": q.profile, "stayed": q.stayed, "known": q.known, "share": q.share}
            for q in quietest_shares(since=since, profile=profile)
        ]
        histograms = [
            {
                "workload_kind": h.workload_kind,
                "profile": h.profile,
                "buckets": [{"le": b, "count": c} for b, c in zip((*h.bounds, "+Inf"), h.cumulative, strict=True)],
                "sum": h.total,
                "count": h.count,
            }
            for h in pod_error_histograms(since=since)
            if not profile or h.profile == profile
        ]
        return Response({"since": since, "spread": series, "stayed_quietest": quietest, "pod_error": histograms})
