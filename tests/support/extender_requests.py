"""Requests to the extender's verbs as kube-scheduler sends them, through Django's test client."""

from __future__ import annotations

import json
import uuid

import msgspec

JSON = "application/json"


def pod(uid: str | None = None) -> dict:
    return {
        "metadata": {"name": "web-7d9f", "namespace": "shop", "uid": uid or str(uuid.uuid4()), "resourceVersion": "42"},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.25.4"}]},
    }


def args(the_pod: dict, nodes: list[str]) -> bytes:
    return msgspec.json.encode({"Pod": the_pod, "Nodes": None, "NodeNames": nodes})


def binding(the_pod: dict, node: str) -> bytes:
    meta = the_pod["metadata"]
    return msgspec.json.encode(
        {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}
    )


def call(client, verb: str, body: bytes) -> dict | list:
    response = client.post(f"/extender/default/{verb}", data=body, content_type=JSON)
    assert response.status_code == 200
    return json.loads(response.content)
