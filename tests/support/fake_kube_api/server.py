"""The server: :class:`FakeKubeAPI`, its lifecycle, routes, recorded requests and dispatch."""

from __future__ import annotations

import re
import threading
from collections import deque
from collections.abc import Callable
from http.server import ThreadingHTTPServer

from tests.support.fake_kube_api.faults import Faults, Injected
from tests.support.fake_kube_api.http_handler import RequestHandler
from tests.support.fake_kube_api.protocol import JSON, Handler, RecordedRequest, Response, Route, status_response
from tests.support.fake_kube_api.routes import create_binding, create_event, get_pod
from tests.support.fake_kube_api.store import Collection, ObjectStore, meta_key, namespaced_key
from tests.support.fake_kube_api.watch import Watches, list_or_watch


class FakeKubeAPI(ObjectStore, Watches, Faults):
    """In-memory Kubernetes API answering over real HTTP. Use as a context manager or call start()/stop()."""

    COLLECTIONS = ("nodes", "pods", "events", "noderesources")

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        """Notified on every change, bookmark, expiry and at stop: open watches wait on it."""
        self.collections: dict[str, Collection] = {
            "nodes": Collection("/api/v1/nodes", "Node", "v1", meta_key),
            "pods": Collection("/api/v1/pods", "Pod", "v1", namespaced_key),
            "events": Collection("/api/v1/events", "Event", "v1", namespaced_key),
            "noderesources": Collection(
                "/apis/schedlens.io/v1alpha1/noderesources", "NodeResources", "schedlens.io/v1alpha1", meta_key
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

        class _Handler(RequestHandler):
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
        self.add_route("GET", ns_pod, get_pod)
        self.add_route("POST", ns_pod + "/binding", create_binding)
        self.add_route("POST", r"/apis/events\.k8s\.io/v1/namespaces/(?P<namespace>[^/]+)/events", create_event)
        for name, collection in self.collections.items():
            self.add_route("GET", re.escape(collection.path), list_or_watch(name))

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
                response = route.handler(self, request, match)
                if injected is not None:
                    self.sleep(injected.hold)  # done, and the answer held back
                return response
        return status_response(404, "NotFound", "the server could not find the requested resource")
