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

Collections with list + watch (``FakeKubeAPI.COLLECTIONS``): nodes (``/api/v1/nodes``), pods
(``/api/v1/pods``, all namespaces), events (``/api/v1/events``) and the cluster-scoped NodeResources objects
(``/apis/schedlens.io/v1alpha1/noderesources``). Like the API server they share one resourceVersion counter:

* a list answers ``{"kind": "<Kind>List", "metadata": {"resourceVersion"}, "items"}``; ``limit`` pages with a
  ``continue`` token; ``fieldSelector`` supports ``a.b=v`` / ``a.b!=v`` terms joined by commas;
* ``?watch=true&resourceVersion=N`` streams every change after N (``ADDED``/``MODIFIED``/``DELETED``, one JSON
  event per line), ``BOOKMARK`` events queued with :meth:`FakeKubeAPI.bookmark` when ``allowWatchBookmarks``
  is set, and ends at ``timeoutSeconds``, at :meth:`FakeKubeAPI.close_watches` or when the server stops;
* :meth:`FakeKubeAPI.expire` compacts history: open watches end and a watch from an older resourceVersion gets
  the API server's ``ERROR`` event with a 410 ``Expired`` Status, so the client must relist.

Every mutation (``put_node``, ``add_pod``, a binding, ``delete_pod``, ``put_event``, ...) is a watch event.

Fault injection: :meth:`FakeKubeAPI.inject` queues canned responses per (method, path), consumed
in order before normal handling (e.g. a 429 with ``Retry-After: 0`` once, then a 500 once).
``FakeKubeAPI.delay`` slows every request; an injected entry with ``status=None`` only delays and
then falls through to normal handling; ``status=DROP`` closes the connection without an answer.

``POST /apis/events.k8s.io/v1/namespaces/{ns}/events`` creates an events.k8s.io/v1 Event: its body is kept in
:attr:`FakeKubeAPI.created_events` and the Event answered back (201). :attr:`FakeKubeAPI.events_failure` switches
it to failing: ``"403"`` (Forbidden, as without the RBAC rule), ``"500"``, or ``"slow"`` (answers 201 only after
:attr:`FakeKubeAPI.events_slow_seconds`, beyond a client's timeout).

Every request is recorded (:attr:`FakeKubeAPI.requests`) with its method, path, query and parsed JSON body.

Extending: register more routes with :meth:`FakeKubeAPI.add_route` (a regex on the path with named groups, and
a handler ``(server, request, match) -> Response``). A handler may return ``Response(chunks=...)`` to stream a
chunked body, which is what a watch (``?watch=true``) needs: one JSON event per line.
"""

from __future__ import annotations

import base64
import bisect
import copy
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


def _micro_now() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"


@dataclass
class Collection:
    """One listable, watchable resource: its objects and the history of changes a watch replays."""

    path: str
    kind: str
    api_version: str
    key: Callable[[JSON], Any]
    objects: dict[Any, JSON] = field(default_factory=dict)
    history: list[tuple[int, str, JSON]] = field(default_factory=list)
    """(resourceVersion, event type, snapshot of the object), oldest first."""
    oldest_watchable: int = 0
    """A watch from a resourceVersion below this gets ERROR 410 Expired."""
    epoch: int = 0
    """Bumped to end every open watch of this collection."""
    watches_started: int = 0
    """Watch streams established so far (see :meth:`FakeKubeAPI.wait_for_watch`)."""


def _meta_key(obj: JSON) -> str:
    return str(obj["metadata"]["name"])


def _namespaced_key(obj: JSON) -> tuple[str, str]:
    meta = obj["metadata"]
    return (str(meta.get("namespace") or "default"), str(meta["name"]))


def _field(obj: JSON, dotted: str) -> str:
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def field_selector_matches(selector: str, obj: JSON) -> bool:
    """``a.b=v,c!=w`` (also ``==``), as the API server evaluates a fieldSelector on the fields it supports."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            path, value = term.split("!=", 1)
            if _field(obj, path) == value:
                return False
        else:
            path, value = term.replace("==", "=").split("=", 1)
            if _field(obj, path) != value:
                return False
    return True


# ----------------------------------------------------------------------------
# The server
# ----------------------------------------------------------------------------


class FakeKubeAPI:
    """In-memory Kubernetes API answering over real HTTP. Use as a context manager or call start()/stop()."""

    COLLECTIONS = ("nodes", "pods", "events", "noderesources")

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        """Notified on every change, bookmark, expiry and at stop: open watches wait on it."""
        self.collections: dict[str, Collection] = {
            "nodes": Collection("/api/v1/nodes", "Node", "v1", _meta_key),
            "pods": Collection("/api/v1/pods", "Pod", "v1", _namespaced_key),
            "events": Collection("/api/v1/events", "Event", "v1", _namespaced_key),
            "noderesources": Collection(
                "/apis/schedlens.io/v1alpha1/noderesources", "NodeResources", "schedlens.io/v1alpha1", _meta_key
            ),
        }
        self.pods: dict[tuple[str, str], JSON] = self.collections["pods"].objects
        self.requests: list[RecordedRequest] = []
        self.created_events: list[JSON] = []
        """Bodies of the events.k8s.io/v1 Events created, in order."""
        self.events_failure: str | None = None
        """None: Events are created; "403", "500": refused so; "slow": answered after ``events_slow_seconds``."""
        self.events_slow_seconds: float = 5.0
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
        with self.changed:
            self.changed.notify_all()  # and ends open watches
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
        self.add_route("POST", r"/apis/events\.k8s\.io/v1/namespaces/(?P<namespace>[^/]+)/events", _create_event)
        for name, collection in self.collections.items():
            self.add_route("GET", re.escape(collection.path), _list_or_watch(name))

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
            if (namespace, name) in self.pods:  # a recreated pod: the old one goes first
                self.delete_pod(name, namespace)
            self.record_change("pods", "ADDED", pod)
        return pod

    def pod(self, name: str, namespace: str = "default") -> JSON | None:
        with self.lock:
            return self.pods.get((namespace, name))

    def delete_pod(self, name: str, namespace: str = "default") -> None:
        with self.lock:
            pod = self.pods.get((namespace, name))
            if pod is not None:
                self.record_change("pods", "DELETED", pod)

    def set_pod_node(self, name: str, node: str, namespace: str = "default") -> JSON:
        """What a binding by someone else (kube-scheduler itself) looks like: spec.nodeName set, PodScheduled."""
        with self.lock:
            pod = self.pods[(namespace, name)]
            pod["spec"]["nodeName"] = node
            _mark_scheduled(pod)
            self.record_change("pods", "MODIFIED", pod)
            return pod

    # ----- nodes, NodeResources, events -----

    def put_node(
        self, name: str, *, labels: dict[str, str] | None = None, images: list[list[str]] | None = None
    ) -> JSON:
        """Create or replace a Node (ADDED the first time, MODIFIED after)."""
        node: JSON = {
            "kind": "Node",
            "apiVersion": "v1",
            "metadata": {
                "name": name,
                "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
                "labels": {"kubernetes.io/hostname": name, **(labels or {})},
                "creationTimestamp": _now(),
            },
            "spec": {},
            "status": {
                "images": [{"names": names, "sizeBytes": 1000} for names in images or []],
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        with self.lock:
            existed = name in self.collections["nodes"].objects
            self.record_change("nodes", "MODIFIED" if existed else "ADDED", node)
        return node

    def delete_node(self, name: str) -> None:
        with self.lock:
            node = self.collections["nodes"].objects.get(name)
            if node is not None:
                self.record_change("nodes", "DELETED", node)

    def put_node_resources(
        self,
        name: str,
        *,
        resources_filter: dict[str, bool] | None = None,
        resources_score: dict[str, int] | None = None,
    ) -> JSON:
        obj: JSON = {
            "apiVersion": "schedlens.io/v1alpha1",
            "kind": "NodeResources",
            "metadata": {"name": name, "uid": str(uuid.uuid4()), "generation": 1, "creationTimestamp": _now()},
            "spec": {"resourcesFilter": resources_filter or {}, "resourcesScore": resources_score or {}},
        }
        with self.lock:
            existed = name in self.collections["noderesources"].objects
            self.record_change("noderesources", "MODIFIED" if existed else "ADDED", obj)
        return obj

    def delete_node_resources(self, name: str) -> None:
        with self.lock:
            obj = self.collections["noderesources"].objects.get(name)
            if obj is not None:
                self.record_change("noderesources", "DELETED", obj)

    def put_event(self, event: JSON) -> JSON:
        """Create or update a core/v1 Event (see :func:`failed_scheduling_event`)."""
        with self.lock:
            existed = _namespaced_key(event) in self.collections["events"].objects
            self.record_change("events", "MODIFIED" if existed else "ADDED", event)
        return event

    # ----- history (what watches replay) -----

    def record_change(self, collection: str, kind: str, obj: JSON) -> None:
        """Store (or delete) ``obj`` under a new resourceVersion and wake the watches."""
        with self.changed:
            store = self.collections[collection]
            rv = self.next_resource_version()
            obj["metadata"]["resourceVersion"] = rv
            if kind == "DELETED":
                store.objects.pop(store.key(obj), None)
            else:
                store.objects[store.key(obj)] = obj
            store.history.append((int(rv), kind, copy.deepcopy(obj)))
            self.changed.notify_all()

    def bookmark(self, collection: str) -> str:
        """Queue a BOOKMARK at the current resourceVersion for watches that allow bookmarks; returns it."""
        with self.changed:
            store = self.collections[collection]
            rv = self._resource_version
            marker = {"kind": store.kind, "apiVersion": store.api_version, "metadata": {"resourceVersion": str(rv)}}
            store.history.append((rv, "BOOKMARK", marker))
            self.changed.notify_all()
            return str(rv)

    def expire(self, collection: str) -> None:
        """Compact the history: open watches end, and watching from any resourceVersion seen so far gets 410."""
        with self.changed:
            store = self.collections[collection]
            store.oldest_watchable = int(self.next_resource_version())
            store.history.clear()
            store.epoch += 1
            self.changed.notify_all()

    def close_watches(self, collection: str) -> None:
        """End the open watches of ``collection`` normally, as the API server does at ``timeoutSeconds``."""
        with self.changed:
            self.collections[collection].epoch += 1
            self.changed.notify_all()

    def wait_for_watch(self, collection: str, count: int = 1, timeout: float = 10.0) -> None:
        """Block until ``count`` watch streams of ``collection`` have been established.

        A request is recorded before it is served: only after this returns do :meth:`close_watches`,
        :meth:`expire` and :meth:`bookmark` reach that watch for sure.
        """
        store = self.collections[collection]
        with self.changed:
            if not self.changed.wait_for(lambda: store.watches_started >= count, timeout):
                raise AssertionError(f"{store.watches_started} of {count} {collection} watches within {timeout} s")

    def watch_requests(self, collection: str) -> list[RecordedRequest]:
        path = self.collections[collection].path
        return [r for r in self.requests_to("GET", path) if _truthy(r.query.get("watch"))]

    def list_requests(self, collection: str) -> list[RecordedRequest]:
        path = self.collections[collection].path
        return [r for r in self.requests_to("GET", path) if not _truthy(r.query.get("watch"))]

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
        with self.changed:
            self.requests.append(request)
            self.changed.notify_all()

    def wait_for_request(self, predicate: Callable[[RecordedRequest], bool], timeout: float = 10.0) -> RecordedRequest:
        """Block until a request matching ``predicate`` has arrived (already, or later); fail after ``timeout``."""
        with self.changed:
            found: list[RecordedRequest] = []

            def arrived() -> bool:
                found[:] = [r for r in self.requests if predicate(r)]
                return bool(found)

            if not self.changed.wait_for(arrived, timeout):
                raise AssertionError(f"no matching request within {timeout} s")
            return found[-1]

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


def _mark_scheduled(pod: JSON) -> None:
    conditions = [c for c in pod["status"].get("conditions", []) if c.get("type") != "PodScheduled"]
    conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": _now()})
    pod["status"]["conditions"] = conditions


def _truthy(values: list[str] | None) -> bool:
    return bool(values) and values[0].lower() in {"true", "1"}


def _encode_continue(rv: int, offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"rv": rv, "start": offset}).encode()).decode()


def _list_or_watch(collection: str) -> Handler:
    def handler(server: FakeKubeAPI, request: RecordedRequest, match: re.Match[str]) -> Response:
        if _truthy(request.query.get("watch")):
            return Response(200, chunks=_watch_stream(server, collection, request))
        return _list(server, collection, request)

    return handler


def _list(server: FakeKubeAPI, collection: str, request: RecordedRequest) -> Response:
    """A consistent list at the current resourceVersion (pages continue from an offset of the current state)."""
    selector = (request.query.get("fieldSelector") or [""])[0]
    limit = int((request.query.get("limit") or ["0"])[0] or 0)
    token = (request.query.get("continue") or [""])[0]
    with server.lock:
        store = server.collections[collection]
        rv = server._resource_version
        items = [copy.deepcopy(store.objects[k]) for k in sorted(store.objects, key=str)]
    items = [item for item in items if field_selector_matches(selector, item)]
    start = 0
    if token:
        start = int(json.loads(base64.urlsafe_b64decode(token))["start"])
    metadata: JSON = {"resourceVersion": str(rv)}
    if limit and start + limit < len(items):
        metadata["continue"] = _encode_continue(rv, start + limit)
        page = items[start : start + limit]
    else:
        page = items[start:]
    return Response(
        200, {"kind": f"{store.kind}List", "apiVersion": store.api_version, "metadata": metadata, "items": page}
    )


def _watch_stream(server: FakeKubeAPI, collection: str, request: RecordedRequest) -> Iterator[bytes]:
    store = server.collections[collection]
    query = request.query
    selector = (query.get("fieldSelector") or [""])[0]
    bookmarks = _truthy(query.get("allowWatchBookmarks"))
    timeout = float((query.get("timeoutSeconds") or ["0"])[0] or 0)
    deadline = time.monotonic() + timeout if timeout > 0 else None
    requested = (query.get("resourceVersion") or [""])[0]
    gone: JSON | None = None
    with server.lock:
        epoch = store.epoch
        initial: list[JSON] = []
        if requested in ("", "0"):  # "any": the current state as ADDED events, then the changes
            since = server._resource_version
            initial = [copy.deepcopy(store.objects[k]) for k in sorted(store.objects, key=str)]
        else:
            since = int(requested)
        if since < store.oldest_watchable:
            gone = status_body(410, "Expired", f"too old resource version: {since} ({store.oldest_watchable})")
        # History is ordered by resourceVersion; replay what came after `since`, then follow the tail.
        position = bisect.bisect_right([entry[0] for entry in store.history], since)
        store.watches_started += 1
        server.changed.notify_all()
    if gone is not None:  # the API server answers 200 and then this one ERROR event
        yield _event_line("ERROR", gone)
        return
    for obj in initial:
        if field_selector_matches(selector, obj):
            yield _event_line("ADDED", obj)
    while True:
        with server.changed:
            while position >= len(store.history):
                remaining = None if deadline is None else deadline - time.monotonic()
                if store.epoch != epoch or server._stopping.is_set() or (remaining is not None and remaining <= 0):
                    return
                server.changed.wait(remaining)
            # What was queued before a close (a bookmark, say) still goes out; the next turn ends the stream.
            pending = store.history[position:]
            position = len(store.history)
        for _, kind, obj in pending:
            if kind == "BOOKMARK" and not bookmarks:
                continue
            if kind == "BOOKMARK" or field_selector_matches(selector, obj):
                yield _event_line(kind, obj)


def _event_line(kind: str, obj: JSON) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


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
        _mark_scheduled(pod)
        server.record_change("pods", "MODIFIED", pod)
    success = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    return Response(201, success)


def _create_event(server: FakeKubeAPI, request: RecordedRequest, match: re.Match[str]) -> Response:
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
            "creationTimestamp": _now(),
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
        "eventTime": _micro_now(),
        "action": "Scheduling",
        "reportingComponent": scheduler_name,
        "reportingInstance": f"{scheduler_name}-7c9d8f6b5-abcde",
    }
    if count > 1:
        event["series"] = {"count": count, "lastObservedTime": _micro_now()}
    return event


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
