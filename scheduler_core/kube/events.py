"""Events about pods (``events.k8s.io/v1``) written through the official ``kubernetes`` client.

Kept apart from binding (``kube.api``): an Event is best-effort and bounded by its own timeout, and a failure is
reported as a short kind for the caller to count, never raised, since no placement may wait on it. Posted as JSON
bytes through the client's own pool (``kube.http.JsonPoster``), as the Binding is: one per placement, and the
generated ``create_namespaced_event`` (pydantic validation, model objects) cost more than the request itself.
"""

from __future__ import annotations

import time
from typing import Any, Final
from urllib.parse import quote

import msgspec
import urllib3
from kubernetes import client

from scheduler_core.kube.http import JsonPoster, is_timeout, read_raw, with_bounded_retries
from scheduler_core.kube.pod_event import PodEvent

__all__ = ["NOTE_LIMIT_BYTES", "KubernetesEventWriter"]

NOTE_LIMIT_BYTES: Final = 1024
"""Kubernetes refuses an ``events.k8s.io/v1`` Event whose ``note`` is longer than 1 kB."""


def _truncate_utf8(text: str, limit: int) -> str:
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[: limit - 3].decode("utf-8", "ignore") + "..."


def _micro_time(now: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"


class KubernetesEventWriter:
    """The :class:`~scheduler_core.kube.pod_event.EventWriter` of a real cluster: writes one ``events.k8s.io/v1`` Event
    about a pod, within ``timeout_seconds``; never raises for the API.

    :meth:`create` returns "" when the Event was created, else a short failure *kind* (``"403"``, ``"timeout"``,
    ``"unreachable"``...) for the caller to count and log once.
    """

    def __init__(self, api_client: client.ApiClient, *, timeout_seconds: float = 2.0) -> None:
        if timeout_seconds <= 0:
            raise ValueError("timeout_seconds must be positive")
        self._timeout = float(timeout_seconds)
        self._api_client = with_bounded_retries(api_client)
        self._poster = JsonPoster(self._api_client)
        self._safe = self._api_client.configuration.safe_chars_for_path_param

    def close(self) -> None:
        self._api_client.close()  # type: ignore[no-untyped-call]

    def create(self, event: PodEvent) -> str:
        now = time.time()
        namespace, name = event.namespace, event.name
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{int(now * 1e9):x}"[:253], "namespace": namespace},
            "eventTime": _micro_time(now),
            "type": event.event_type,
            "reason": event.reason,
            "action": event.action,
            "note": _truncate_utf8(event.note, NOTE_LIMIT_BYTES),
            "reportingController": event.controller,
            "reportingInstance": event.instance[:128],
            "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name, "uid": event.uid},
        }
        url = self._poster.url(f"/apis/events.k8s.io/v1/namespaces/{quote(namespace, safe=self._safe)}/events")
        try:
            status, _ = read_raw(self._poster.post(url, msgspec.json.encode(body), self._timeout))
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            return "timeout" if is_timeout(exc) else "unreachable"
        return "" if 200 <= status <= 299 else str(status)
