"""The default routes besides lists and watches, with the messages kube-apiserver writes.

* ``GET  /api/v1/namespaces/{ns}/pods/{name}``          -> 200 Pod, or 404 Status
* ``POST /api/v1/namespaces/{ns}/pods/{name}/binding``  -> 201 Status(Success), or the API server's errors:
  409 ``already assigned`` (pods/binding), 409 UID/resourceVersion precondition failed (pods), 404 not found,
  400 name mismatch, 422 missing target.
* ``POST /apis/events.k8s.io/v1/namespaces/{ns}/events`` creates an events.k8s.io/v1 Event: its body is kept in
  ``FakeKubeAPI.created_events`` and the Event answered back (201). ``FakeKubeAPI.events_failure`` switches it to
  failing: ``"403"`` (Forbidden, as without the RBAC rule), ``"500"``, or ``"slow"`` (answers 201 only after
  ``FakeKubeAPI.events_slow_seconds``, beyond a client's timeout).
"""

from __future__ import annotations

import copy
import re
import uuid
from typing import TYPE_CHECKING

from tests.support.fake_kube_api.protocol import RecordedRequest, Response, status_response
from tests.support.fake_kube_api.store import mark_scheduled

if TYPE_CHECKING:
    from tests.support.fake_kube_api.server import FakeKubeAPI


def pods_not_found(name: str) -> Response:
    details = {"name": name, "kind": "pods"}
    return status_response(404, "NotFound", f'pods "{name}" not found', details=details)


def get_pod(server: FakeKubeAPI, request: RecordedRequest, match: re.Match[str]) -> Response:
    pod = server.pod(match["name"], match["namespace"])
    if pod is None:
        return pods_not_found(match["name"])
    return Response(200, pod)


def _conflict(resource: str, name: str, cause: str) -> Response:
    # apierrors.NewConflict(resource, name, err)
    return status_response(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {resource} "{name}": {cause}',
        details={"name": name, "kind": resource},
    )


def create_binding(server: FakeKubeAPI, request: RecordedRequest, match: re.Match[str]) -> Response:
    namespace, name = match["namespace"], match["name"]
    binding = request.body if isinstance(request.body, dict) else {}
    meta = binding.get("metadata") or {}
    target = binding.get("target") or {}
    # BindingREST.Create
    if meta.get("name") != name:
        return status_response(400, "BadRequest", "name in URL does not match name in Binding object")
    if not target.get("name"):
        return status_response(
            422,
            "Invalid",
            f'Binding "{name}" is invalid: target.name: Required value',
            details={"name": name, "kind": "Binding"},
        )
    if target.get("kind") not in (None, "", "Node"):
        return status_response(
            422,
            "Invalid",
            f'Binding "{name}" is invalid: target.kind: Not supported: "{target.get("kind")}"',
            details={"name": name, "kind": "Binding"},
        )
    node = target["name"]
    with server.lock:
        pod = server.pods.get((namespace, name))
        if pod is None:
            return pods_not_found(name)
        # setPodNodeAndMetadata: storage preconditions (UID, resourceVersion) come first.
        key = f"/registry/pods/{namespace}/{name}"
        pod_meta = pod["metadata"]
        want_uid, want_rv = meta.get("uid"), meta.get("resourceVersion")
        if want_uid and want_uid != pod_meta["uid"]:
            cause = (
                f"StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: "
                f"Precondition failed: UID in precondition: {want_uid}, UID in object meta: {pod_meta['uid']}"
            )
            return _conflict("pods", name, cause)
        if want_rv and want_rv != pod_meta["resourceVersion"]:
            cause = (
                f"StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: "
                f"Precondition failed: ResourceVersion in precondition: {want_rv}, "
                f"ResourceVersion in object meta: {pod_meta['resourceVersion']}"
            )
            return _conflict("pods", name, cause)
        if pod_meta.get("deletionTimestamp"):
            cause = f"pod {name} is being deleted, cannot be assigned to a host"
            return _conflict("pods/binding", name, cause)
        if pod["spec"].get("nodeName"):
            return _conflict(
                "pods/binding", name, f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"'
            )
        pod["spec"]["nodeName"] = node
        mark_scheduled(pod)
        server.record_change("pods", "MODIFIED", pod)
    success = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    return Response(201, success)


def create_event(server: FakeKubeAPI, request: RecordedRequest, match: re.Match[str]) -> Response:
    namespace = match["namespace"]
    failure = server.events_failure
    if failure == "403":
        return status_response(
            403,
            "Forbidden",
            f'events.events.k8s.io is forbidden: User "system:serviceaccount:schedlens-system:schedlens" cannot '
            f'create resource "events" in API group "events.k8s.io" in the namespace "{namespace}"',
            details={"group": "events.k8s.io", "kind": "events"},
        )
    if failure == "500":
        return status_response(500, "InternalError", "Internal error occurred: etcdserver: request timed out")
    if failure == "slow":
        server.sleep(server.events_slow_seconds)
    event = request.body if isinstance(request.body, dict) else {}
    meta = event.get("metadata") or {}
    if meta.get("namespace", namespace) != namespace:
        message = "the namespace of the provided object does not match the namespace sent on the request"
        return status_response(400, "BadRequest", message)
    stored = copy.deepcopy(event)
    stored.setdefault("metadata", {})["namespace"] = namespace
    stored["metadata"]["uid"] = str(uuid.uuid4())
    stored["metadata"]["resourceVersion"] = server.next_resource_version()
    with server.lock:
        server.created_events.append(stored)
        server.changed.notify_all()
    return Response(201, stored)
