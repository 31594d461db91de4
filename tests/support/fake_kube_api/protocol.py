"""What goes over the wire: requests as recorded, responses, routes, the API server's Status bodies and timestamps."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.support.fake_kube_api.server import FakeKubeAPI

JSON = dict[str, Any]


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    """The parsed JSON body; the raw text if it was not JSON; None if there was no body."""
    peer: tuple[str, int] = ("", 0)
    """The client's address and port: requests on one kept-alive connection share it."""


@dataclass
class Response:
    status: int
    body: Any = None
    """A JSON-serialisable object, ``str``/``bytes`` sent as is, or None for an empty body."""
    headers: dict[str, str] = field(default_factory=dict)
    chunks: Iterable[bytes] | None = None
    """When set, the body is streamed with chunked transfer encoding (for watch streams)."""


Handler = Callable[["FakeKubeAPI", RecordedRequest, "re.Match[str]"], Response]


@dataclass(frozen=True)
class Route:
    method: str
    pattern: re.Pattern[str]
    handler: Handler


def status_body(code: int, reason: str, message: str, *, details: JSON | None = None) -> JSON:
    """A ``metav1.Status`` as the API server writes it for a failure."""
    body: JSON = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return body


def status_response(code: int, reason: str, message: str, *, details: JSON | None = None) -> Response:
    return Response(code, status_body(code, reason, message, details=details))


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def micro_now() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"


def truthy(values: list[str] | None) -> bool:
    return bool(values) and values[0].lower() in {"true", "1"}
