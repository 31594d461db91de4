"""A small, real HTTP server that answers like the Kubernetes API server, for tests.

It runs ``http.server.ThreadingHTTPServer`` on ``127.0.0.1:0`` in a background thread and keeps
pods in memory. Tests talk to it through the official ``kubernetes`` client (see
:func:`api_client_for`), so what is exercised is the real request the client builds and the real
JSON the API server would answer.

The package, by concern (tests import from the package itself, the names below):

* :mod:`.server` -- :class:`FakeKubeAPI`: lifecycle (a context manager, or ``start()``/``stop()``), routes,
  recorded requests, dispatch;
* :mod:`.store` -- the objects in memory and every change to them (one resourceVersion counter for all
  collections, as in the API server): ``put_node``, ``add_pod``, ``delete_pod``, ``put_event``, ...;
* :mod:`.watch` -- list and watch of the collections (``FakeKubeAPI.COLLECTIONS``: nodes, pods in all
  namespaces, core/v1 events and the cluster-scoped NodeResources), bookmarks, expiry (410), closing watches;
* :mod:`.routes` -- ``GET`` a pod, ``POST`` a binding and an events.k8s.io/v1 Event, with kube-apiserver's errors;
* :mod:`.faults` -- :meth:`FakeKubeAPI.inject` queues canned responses per (method, path), consumed in order
  before normal handling (e.g. a 429 with ``Retry-After: 0`` once, then a 500 once). ``FakeKubeAPI.delay``
  slows every request; an injected entry with ``status=None`` only delays and then falls through to normal
  handling (with ``hold``, it handles the request and then holds the answer back: a Binding created whose answer is
  late); ``status=DROP`` closes the connection without an answer;
* :mod:`.http_handler` -- the HTTP plumbing (keep-alive, chunked bodies);
* :mod:`.protocol` -- requests as recorded (:attr:`FakeKubeAPI.requests`: method, path, query and parsed JSON
  body), responses, Status bodies;
* :mod:`.client` -- a real client of the server, a kubeconfig for it, kube-scheduler's FailedScheduling Event.

Extending: register more routes with :meth:`FakeKubeAPI.add_route` (a regex on the path with named groups, and
a handler ``(server, request, match) -> Response``). A handler may return ``Response(chunks=...)`` to stream a
chunked body, which is what a watch (``?watch=true``) needs: one JSON event per line (:func:`watch_events`).
"""

from tests.support.fake_kube_api.client import api_client_for, failed_scheduling_event, write_kubeconfig
from tests.support.fake_kube_api.faults import DROP, Injected
from tests.support.fake_kube_api.protocol import (
    JSON,
    Handler,
    RecordedRequest,
    Response,
    Route,
    status_body,
    status_response,
)
from tests.support.fake_kube_api.routes import create_binding, pods_not_found
from tests.support.fake_kube_api.server import FakeKubeAPI
from tests.support.fake_kube_api.store import Collection, field_selector_matches
from tests.support.fake_kube_api.watch import watch_events

__all__ = [
    "DROP",
    "JSON",
    "Collection",
    "FakeKubeAPI",
    "Handler",
    "Injected",
    "RecordedRequest",
    "Response",
    "Route",
    "api_client_for",
    "create_binding",
    "failed_scheduling_event",
    "field_selector_matches",
    "pods_not_found",
    "status_body",
    "status_response",
    "watch_events",
    "write_kubeconfig",
]
