"""What tests need around the server: a real client of it, a kubeconfig for it, an Event as kube-scheduler writes it."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import kubernetes.client

from tests.support.fake_kube_api.protocol import JSON, micro_now, now

if TYPE_CHECKING:
    from tests.support.fake_kube_api.server import FakeKubeAPI


def failed_scheduling_event(
    pod: JSON,
    message: str,
    *,
    scheduler_name: str = "schedlens-scheduler",
    count: int = 1,
    name: str | None = None,
) -> JSON:
    """A core/v1 view of the Event kube-scheduler (events.k8s.io/v1 recorder) writes when a cycle fails.

    ``count`` > 1 is a repeat: the events library keeps one Event and bumps ``series``.
    """
    meta = pod["metadata"]
    event: JSON = {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {
            "name": name or f"{meta['name']}.{uuid.uuid4().hex[:16]}",
            "namespace": meta["namespace"],
            "uid": str(uuid.uuid4()),
            "creationTimestamp": now(),
        },
        "involvedObject": {
            "kind": "Pod",
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta["uid"],
            "apiVersion": "v1",
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        "reason": "FailedScheduling",
        "message": message,
        "source": {},
        "firstTimestamp": None,
        "lastTimestamp": None,
        "type": "Warning",
        "eventTime": micro_now(),
        "action": "Scheduling",
        "reportingComponent": scheduler_name,
        "reportingInstance": f"{scheduler_name}-7c9d8f6b5-abcde",
    }
    if count > 1:
        event["series"] = {"count": count, "lastObservedTime": micro_now()}
    return event


def api_client_for(server: FakeKubeAPI | str) -> kubernetes.client.ApiClient:
    """A real ``kubernetes.client.ApiClient`` for ``server`` (or a base URL): plain HTTP, no auth/proxy."""
    url = server if isinstance(server, str) else server.url
    configuration = kubernetes.client.Configuration(host=url)
    configuration.proxy = None  # never route 127.0.0.1 through an environment proxy
    return kubernetes.client.ApiClient(configuration)


def write_kubeconfig(server: FakeKubeAPI, path: Path) -> Path:
    """Write a kubeconfig pointing at ``server`` (JSON is valid YAML) and return its path."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": server.url}}],
        "users": [{"name": "fake", "user": {}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
        "current-context": "fake",
    }
    path.write_text(json.dumps(config))
    return path
