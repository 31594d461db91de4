"""A small, real HTTP server that answers like the Kubernetes API server, for tests.

It runs ``http.server.ThreadingHTTPServer`` on ``127.0.0.1:0`` in a background thread and keeps
pods in memory. Tests talk to it through the official ``kubernetes`` client (see
:func:`api_client_for`), so what is exercised is the real request the client builds and the real
JSON the API server would answer.

Implemented now:

* ``GET  /api/v1/namespaces/{ns}/pods/{name}``          -> 200 Pod, or 404 Status
* ``POST /api/v1/namespaces/{ns}/pods/{name}/binding``  -> 201 Status(Success), or the API server's errors:
  409 ``already assigned`` (pods/binding), 409 UID/resourceVersion precondition failed (pods), 404 not found,
  400 name mismatch, 422 missing target.

Fault injection: :meth:`FakeKubeAPI.inject` queues canned responses per (method, path), consumed
in order before normal handling (e.g. a 429 with ``Retry-After: 0`` once, then a 500 once).
``FakeKubeAPI.delay`` slows every request; an injected entry with ``status=None`` only delays and
then falls through to normal handling; ``status=DROP`` closes the connection without an answer.

Every request is recorded (:attr:`FakeKubeAPI.requests`) with its method, path, query and parsed JSON body.

Extending: register more routes with :meth:`FakeKubeAPI.add_route` (a regex on the path with named groups, and
a handler ``(server, request, match) -> Response``). A handler may return ``Response(chunks=...)`` to stream a
chunked body, which is what a watch (``?watch=true``) needs: one JSON event per line.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import kubernetes.client

JSON = dict[str, Any]


# ----------------------------------------------------------------------------
# Requests, responses, routes
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    """The parsed JSON body; the raw text if it was not JSON; None if there was no body."""


@dataclass
class Response:
    status: int
    body: Any = None
    """A JSON-serialisable object, ``str``/``bytes`` sent as is, or None for an empty body."""
    headers: dict[str, str] = field(default_factory=dict)
    chunks: Iterable[bytes] | None = None
    """When set, the body is streamed with chunked transfer encoding (for watch streams)."""


@dataclass
class Injected:
    """A canned answer queued for one (method, path).

    ``status=None``: only wait ``delay``, then handle the request normally.
    """

    status: int | None
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


DROP = -1
"""Injected status meaning: close the connection without answering (the client sees it drop)."""

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


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# ----------------------------------------------------------------------------
# The server
# ----------------------------------------------------------------------------


class FakeKubeAPI:
    """In-memory Kubernetes API answering over real HTTP. Use as a context manager or call start()/stop()."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.pods: dict[tuple[str, str], JSON] = {}
        self.requests: list[RecordedRequest] = []
        self.delay: float = 0.0
        """Seconds every request waits before it is answered."""
        self._injected: dict[tuple[str, str], deque[Injected]] = {}
        self._routes: list[Route] = []
        self._resource_version = 1000
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._install_default_routes()

    # ----- lifecycle -----

    def start(self) -> FakeKubeAPI:
        server = self

        class _Handler(_RequestHandler):
            fake = server

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-kube-api", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping in an injected delay
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeKubeAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    # ----- routing (extension point) -----

    def add_route(self, method: str, path_regex: str, handler: Handler) -> None:
        """Register a handler; ``path_regex`` must match the whole path (no query). Later routes win."""
        self._routes.insert(0, Route(method.upper(), re.compile(path_regex), handler))

    def _install_default_routes(self) -> None:
        ns_pod = r"/api/v1/namespaces/(?P<namespace>[^/]+)/pods/(?P<name>[^/]+)"
        self.add_route("GET", ns_pod, _get_pod)
        self.add_route("POST", ns_pod + "/binding", _create_binding)

    # ----- state -----

    def next_resource_version(self) -> str:
        with self.lock:
            self._resource_version += 1
            return str(self._resource_version)

    def add_pod(
        self,
        name: str,
        namespace: str = "default",
        *,
        uid: str | None = None,
        node_name: str | None = None,
        scheduler_name: str = "default-scheduler",
    ) -> JSON:
        """Create (or replace, i.e. recreate) a pod; returns its stored JSON."""
        pod: JSON = {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": uid or str(uuid.uuid4()),
                "resourceVersion": self.next_resource_version(),
                "creationTimestamp": _now(),
            },
            "spec": {
                "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}],
                "schedulerName": scheduler_name,
            },
            "status": {"phase": "Pending"},
        }
        if node_name:
            pod["spec"]["nodeName"] = node_name
        with self.lock:
            self.pods[(namespace, name)] = pod
        return pod

    def pod(self, name: str, namespace: str = "default") -> JSON | None:
        with self.lock:
            return self.pods.get((namespace, name))

    def delete_pod(self, name: str, namespace: str = "default") -> None:
        with self.lock:
            self.pods.pop((namespace, name), None)

    # ----- faults -----

    def inject(
        self,
        method: str,
        path: str,
        status: int | None,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
        times: int = 1,
    ) -> None:
        """Queue ``times`` canned answers for ``method path``; a Status body is made if none given."""
        if status is not None and body is None and status >= 400:
            try:
                reason = HTTPStatus(status).phrase.replace(" ", "")
            except ValueError:
                reason = ""
            body = status_body(status, reason, f"injected {status}")
        entry = Injected(status, body, dict(headers or {}), delay)
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

    # ----- records -----

    def requests_to(self, method: str, path: str) -> list[RecordedRequest]:
        with self.lock:
            return [r for r in self.requests if r.method == method.upper() and r.path == path]

    def _record(self, request: RecordedRequest) -> None:
        with self.lock:
            self.requests.append(request)

    # ----- dispatch -----

    def handle(self, request: RecordedRequest) -> Response:
        self.sleep(self.delay)
        injected = self._take_injected(request.method, request.path)
        if injected is not None:
            self.sleep(injected.delay)
            if injected.status is not None:
                return Response(injected.status, injected.body, injected.headers)
        for route in self._routes:
            if route.method != request.method:
                continue
            match = route.pattern.fullmatch(request.path)
            if match:
                return route.handler(self, request, match)
        return status_response(404, "NotFound", "the server could not find the requested resource")


# ----------------------------------------------------------------------------
# Default route handlers (messages as kube-apiserver writes them)
# ----------------------------------------------------------------------------


def pods_not_found(name: str) -> Response:
    details = {"name": name, "kind": "pods"}
    return status_response(404, "NotFound", f'pods "{name}" not found', details=details)


def _get_pod(server: FakeKubeAPI, request: RecordedRequest, match: re.Match[str]) -> Response:
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


def _create_binding(server: FakeKubeAPI, request: RecordedRequest, match: re.Match[str]) -> Response:
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
        pod_meta["resourceVersion"] = server.next_resource_version()
        conditions = [c for c in pod["status"].get("conditions", []) if c.get("type") != "PodScheduled"]
        conditions.append(
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": _now()}
        )
        pod["status"]["conditions"] = conditions
    success = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    return Response(201, success)


# ----------------------------------------------------------------------------
# HTTP plumbing
# ----------------------------------------------------------------------------


class _RequestHandler(BaseHTTPRequestHandler):
    fake: FakeKubeAPI
    protocol_version = "HTTP/1.1"  # keep-alive, as the client's connection pool expects

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _serve(self) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        request = RecordedRequest(
            method=self.command,
            path=parts.path,
            query=parse_qs(parts.query),
            headers={k: v for k, v in self.headers.items()},
            body=body,
        )
        self.fake._record(request)
        response = self.fake.handle(request)
        if response.status == DROP:
            self.close_connection = True
            return
        try:
            self._write(response)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout); nothing to do
            self.close_connection = True

    def _write(self, response: Response) -> None:
        self.send_response(response.status)
        headers = {"Content-Type": "application/json", **response.headers}
        if response.chunks is not None:
            headers["Transfer-Encoding"] = "chunked"
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            for chunk in response.chunks:
                if chunk:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        if response.body is None:
            data = b""
        elif isinstance(response.body, bytes):
            data = response.body
        elif isinstance(response.body, str):
            data = response.body.encode()
        else:
            data = json.dumps(response.body).encode()
        headers["Content-Length"] = str(len(data))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve


def watch_events(events: Iterable[tuple[str, JSON]]) -> Iterator[bytes]:
    """(type, object) pairs as a watch stream, one JSON event per line, for ``Response(chunks=...)``."""
    for kind, obj in events:
        yield json.dumps({"type": kind, "object": obj}).encode() + b"\n"


# ----------------------------------------------------------------------------
# Client helpers
# ----------------------------------------------------------------------------


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
