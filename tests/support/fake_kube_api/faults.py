"""Fault injection: canned answers queued per (method, path), delays, dropped connections."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from tests.support.fake_kube_api.protocol import status_body


@dataclass
class Injected:
    """A canned answer queued for one (method, path).

    ``status=None``: only wait ``delay``, then handle the request normally (and wait ``hold`` before answering).
    """

    status: int | None
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    hold: float = 0.0
    """With ``status=None``: seconds to wait *after* handling the request, before answering (the API server did the
    work, e.g. created the Binding, and its answer is late or never comes)."""


DROP = -1
"""Injected status meaning: close the connection without answering (the client sees it drop)."""


class Faults:
    """The fault-injection part of :class:`~tests.support.fake_kube_api.server.FakeKubeAPI`."""

    lock: threading.RLock
    _injected: dict[tuple[str, str], deque[Injected]]
    _stopping: threading.Event

    def inject(
        self,
        method: str,
        path: str,
        status: int | None,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
        hold: float = 0.0,
        times: int = 1,
    ) -> None:
        """Queue ``times`` canned answers for ``method path``; a Status body is made if none given. ``hold`` (with
        ``status=None``): handle the request, then wait that long before answering."""
        if status is not None and body is None and status >= 400:
            try:
                reason = HTTPStatus(status).phrase.replace(" ", "")
            except ValueError:
                reason = ""
            body = status_body(status, reason, f"injected {status}")
        entry = Injected(status, body, dict(headers or {}), delay, hold)
        with self.lock:
            queue = self._injected.setdefault((method.upper(), path), deque())
            queue.extend(entry for _ in range(times))

    def _take_injected(self, method: str, path: str) -> Injected | None:
        with self.lock:
            queue = self._injected.get((method, path))
            return queue.popleft() if queue else None

    def sleep(self, seconds: float) -> None:
        """Wait, but wake immediately when the server stops."""
        if seconds > 0:
            self._stopping.wait(seconds)
