"""Lists and watches: the collections' ``GET`` handlers and the controls a test has over open watch streams.

The collections (``FakeKubeAPI.COLLECTIONS``): nodes (``/api/v1/nodes``), pods (``/api/v1/pods``, all
namespaces), events (``/api/v1/events``) and the cluster-scoped NodeResources objects
(``/apis/schedlens.io/v1alpha1/noderesources``). Like the API server they share one resourceVersion counter:

* a list answers ``{"kind": "<Kind>List", "metadata": {"resourceVersion"}, "items"}``; ``limit`` pages with a
  ``continue`` token; ``fieldSelector`` supports ``a.b=v`` / ``a.b!=v`` terms joined by commas;
* ``?watch=true&resourceVersion=N`` streams every change after N (``ADDED``/``MODIFIED``/``DELETED``, one JSON
  event per line), ``BOOKMARK`` events queued with :meth:`Watches.bookmark` when ``allowWatchBookmarks`` is set,
  and ends at ``timeoutSeconds``, at :meth:`Watches.close_watches` or when the server stops;
* :meth:`Watches.expire` compacts history: open watches end and a watch from an older resourceVersion gets the
  API server's ``ERROR`` event with a 410 ``Expired`` Status, so the client must relist.
"""

from __future__ import annotations

import base64
import bisect
import copy
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from tests.support.fake_kube_api.protocol import JSON, Handler, RecordedRequest, Response, status_body, truthy
from tests.support.fake_kube_api.store import Collection, field_selector_matches

if TYPE_CHECKING:
    from tests.support.fake_kube_api.server import FakeKubeAPI


class Watches:
    """The watch controls of :class:`~tests.support.fake_kube_api.server.FakeKubeAPI`: bookmarks, expiry, closing."""

    changed: threading.Condition
    collections: dict[str, Collection]
    _resource_version: int
    next_resource_version: Callable[[], str]
    requests_to: Callable[[str, str], list[RecordedRequest]]

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
        return [r for r in self.requests_to("GET", path) if truthy(r.query.get("watch"))]

    def list_requests(self, collection: str) -> list[RecordedRequest]:
        path = self.collections[collection].path
        return [r for r in self.requests_to("GET", path) if not truthy(r.query.get("watch"))]


def _encode_continue(rv: int, offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"rv": rv, "start": offset}).encode()).decode()


def list_or_watch(collection: str) -> Handler:
    def handler(server: FakeKubeAPI, request: RecordedRequest, match: re.Match[str]) -> Response:
        if truthy(request.query.get("watch")):
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
    bookmarks = truthy(query.get("allowWatchBookmarks"))
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


def watch_events(events: Iterable[tuple[str, JSON]]) -> Iterator[bytes]:
    """(type, object) pairs as a watch stream, one JSON event per line, for ``Response(chunks=...)``."""
    for kind, obj in events:
        yield json.dumps({"type": kind, "object": obj}).encode() + b"\n"
