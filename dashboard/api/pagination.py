"""Keyset pagination of cycles on (started_at, id): stable while new cycles arrive.

DRF's CursorPagination keys on the first ordering field only and pages through ties by offset; this cursor
holds both ``started_at`` and ``id``, so a page starts strictly after the last row shown whatever is inserted
meanwhile (new cycles land at the newest end). A cycle whose start moves earlier after it was shown (a call
that preceded its filter arrives late) can still move across a page boundary: that is the record being
completed, not the pagination losing its place.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db.models import Q, QuerySet
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import BasePagination, PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param

from dashboard.models import SchedulingCycle
from dashboard.selectors.cycles import newest_first_page

ORDERINGS = ("-started_at", "started_at")


@dataclass(frozen=True, slots=True)
class _Cursor:
    started_at: datetime
    id: int
    backwards: bool
    """True for a "previous" link: the rows just before the position, in page order."""

    def encode(self) -> str:
        data = {"t": self.started_at.isoformat(), "i": self.id, "b": self.backwards}
        return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> _Cursor:
        try:
            data = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
            started_at = datetime.fromisoformat(data["t"])
            if started_at.tzinfo is None:
                raise ValueError("naive time")
            row_id = int(data["i"])
            if not 0 <= row_id < 2**63:
                raise ValueError("id out of range")
            return cls(started_at.astimezone(UTC), row_id, bool(data["b"]))
        except (ValueError, TypeError, KeyError, binascii.Error, UnicodeDecodeError, OverflowError):
            raise ValidationError({"cursor": "not a cursor this API handed out"}) from None


def _after(cursor: _Cursor, newest_first: bool) -> Q:
    """Rows strictly after the cursor's position in the given direction."""
    if newest_first:
        return Q(started_at__lte=cursor.started_at) & (Q(started_at__lt=cursor.started_at) | Q(id__lt=cursor.id))
    return Q(started_at__gte=cursor.started_at) & (Q(started_at__gt=cursor.started_at) | Q(id__gt=cursor.id))


class CycleCursorPagination(BasePagination):
    page_size = 50
    max_page_size = 500
    cursor_query_param = "cursor"
    page_size_query_param = "page_size"
    ordering_query_param = "ordering"

    def _page_size(self, request: Request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        if not raw.isdigit() or not 1 <= int(raw) <= self.max_page_size:
            raise ValidationError({self.page_size_query_param: f"must be an integer from 1 to {self.max_page_size}"})
        return int(raw)

    def _newest_first(self, request: Request) -> bool:
        ordering = request.query_params.get(self.ordering_query_param, ORDERINGS[0])
        if ordering not in ORDERINGS:
            raise ValidationError({self.ordering_query_param: f"must be one of {', '.join(ORDERINGS)}"})
        return ordering == "-started_at"

    def paginate_queryset(  # type: ignore[override]  # cycles only (keyed on their fields); DRF's takes any rows
        self,
        queryset: QuerySet[SchedulingCycle],  # type: ignore[override]
        request: Request,
        view: Any = None,
    ) -> list[SchedulingCycle]:
        self.request = request
        size = self._page_size(request)
        newest_first = self._newest_first(request)
        raw = request.query_params.get(self.cursor_query_param)
        cursor = _Cursor.decode(raw) if raw else None

        walk_newest_first = newest_first != (cursor is not None and cursor.backwards)
        order = ["-started_at", "-id"] if walk_newest_first else ["started_at", "id"]
        rows = queryset.order_by(*order)
        if cursor is not None:
            rows = rows.filter(_after(cursor, walk_newest_first))
        if walk_newest_first:
            page = newest_first_page(rows, count=size + 1, below=cursor.started_at if cursor is not None else None)
        else:
            page = list(rows[: size + 1])
        more = len(page) > size
        page = page[:size]
        if cursor is not None and cursor.backwards:
            page.reverse()
            self.has_previous, self.has_next = more, True
        else:
            self.has_previous, self.has_next = cursor is not None, more
        self.page = page
        return page

    def _link(self, row: SchedulingCycle | None, backwards: bool) -> str | None:
        if row is None:
            return None
        url = self.request.build_absolute_uri()
        return replace_query_param(url, self.cursor_query_param, _Cursor(row.started_at, row.id, backwards).encode())

    def get_next_link(self) -> str | None:
        if not self.has_next:
            return None
        if not self.page:  # a "previous" walk past the newest row: start again from the top
            return remove_query_param(self.request.build_absolute_uri(), self.cursor_query_param)
        return self._link(self.page[-1], backwards=False)

    def get_previous_link(self) -> str | None:
        if not self.has_previous or not self.page:
            return None
        return self._link(self.page[0], backwards=True)

    def get_paginated_response(self, data: Sequence[Any]) -> Response:
        return Response({"next": self.get_next_link(), "previous": self.get_previous_link(), "results": data})

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        link = {"type": "string", "format": "uri", "nullable": True}
        return {
            "type": "object",
            "required": ["next", "previous", "results"],
            "properties": {"next": link, "previous": link, "results": schema},
        }

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            {
                "name": self.cursor_query_param,
                "in": "query",
                "required": False,
                "description": "Opaque position from a previous page's next/previous link.",
                "schema": {"type": "string"},
            },
            {
                "name": self.page_size_query_param,
                "in": "query",
                "required": False,
                "description": f"Cycles per page (default {self.page_size}).",
                "schema": {"type": "integer", "minimum": 1, "maximum": self.max_page_size},
            },
            {
                "name": self.ordering_query_param,
                "in": "query",
                "required": False,
                "description": "Newest first (default) or oldest first; ties broken by id.",
                "schema": {"type": "string", "enum": list(ORDERINGS)},
            },
        ]


class NodePagination(PageNumberPagination):
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000
