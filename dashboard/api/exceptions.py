"""The one place that shapes API errors: ``{"error": message}``, plus ``"field"`` naming the first bad input.

Mirrors the extender's ``{"error", "path"}`` answers. Status codes and headers (``WWW-Authenticate``,
``Retry-After``) are DRF's.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler


class ErrorSerializer(serializers.Serializer[Any]):
    error = serializers.CharField()
    field = serializers.CharField(required=False, help_text="The first query parameter that was refused.")


def _first_problem(detail: Any, field: str = "") -> tuple[str, str]:
    if isinstance(detail, dict) and detail:
        key, value = next(iter(detail.items()))
        return _first_problem(value, field or ("" if key == "non_field_errors" else str(key)))
    if isinstance(detail, list) and detail:
        return _first_problem(detail[0], field)
    return field, str(detail)


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    response = exception_handler(exc, context)
    if response is None:
        return None  # not an API exception: Django's 500
    if isinstance(exc, ValidationError):
        field, message = _first_problem(exc.detail)
        response.data = {"error": message, "field": field} if field else {"error": message}
    else:
        detail = response.data.get("detail", response.data) if isinstance(response.data, dict) else response.data
        response.data = {"error": str(detail)}
    return response
