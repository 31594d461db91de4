"""The bind verb creates the v1 Binding through the official client against a Kubernetes-shaped server."""

from __future__ import annotations

import json

import pytest

from scheduler_core.kube.api import KubernetesBinder
from tests.support.fake_kube_api import FakeKubeAPI, api_client_for


@pytest.fixture
def kube_api():
    with FakeKubeAPI() as server:
        yield server


def test_bind_creates_a_binding_with_the_pod_uid_and_answers_success(client, runtime, kube_api):
    kube_api.add_pod("web-1", namespace="shop", uid="uid-1")
    runtime.extender.binder = KubernetesBinder(api_client_for(kube_api))
    body = b'{"PodName":"web-1","PodNamespace":"shop","PodUID":"uid-1","Node":"node-2"}'

    response = client.post("/extender/default/bind", data=body, content_type="application/json")

    assert json.loads(response.content) == {"Error": ""}
    (sent,) = kube_api.requests_to("POST", "/api/v1/namespaces/shop/pods/web-1/binding")
    assert sent.body["target"] == {"kind": "Node", "apiVersion": "v1", "name": "node-2"}
    assert sent.body["metadata"]["uid"] == "uid-1"
    assert kube_api.pod("web-1", "shop")["spec"]["nodeName"] == "node-2"


def test_bind_to_a_pod_already_on_another_node_answers_the_error(client, runtime, kube_api):
    kube_api.add_pod("web-1", namespace="shop", uid="uid-1", node_name="node-7")
    runtime.extender.binder = KubernetesBinder(api_client_for(kube_api))
    body = b'{"PodName":"web-1","PodNamespace":"shop","PodUID":"uid-1","Node":"node-2"}'

    response = client.post("/extender/default/bind", data=body, content_type="application/json")

    assert response.status_code == 200
    assert "already bound to another node" in json.loads(response.content)["Error"]
