"""List + watch of Kubernetes collections: one of the four ``kube`` modules that import ``kubernetes``.

:class:`ListWatcher` keeps a handler in step with one collection the way client-go's reflector does:

1. list (in pages of ``page_size``), hand the complete set to the handler, remember the list's
   ``resourceVersion``;
2. watch from that ``resourceVersion`` (``allowWatchBookmarks``, server-side ``timeoutSeconds``) with
   ``kubernetes.watch.Watch().stream``; every ADDED / MODIFIED / DELETED goes to the handler at once,
   a BOOKMARK only moves the ``resourceVersion`` on;
3. when the stream ends normally (the server's timeout), watch again from the last ``resourceVersion``;
4. ``410 Gone`` (an ``ERROR`` event or an HTTP 410: the history was compacted) → relist, because the changes
   in between are lost;
5. any other failure (connection refused or dropped, 5xx, 403, bad JSON) → wait a capped exponential back-off
   with jitter, then resume the watch from the last ``resourceVersion`` (or relist if there was none).

Objects reach the handlers as the JSON the API server sent (``dict``); converting them into frozen domain
types is the handlers' business (:mod:`scheduler_core.kube.node_cache`, :mod:`scheduler_core.kube.placement_watch`).

Client quirk worked around: ``Watch.stream`` deserialises every event into the generated model named by the
list function's return annotation (pydantic models in client 37, slow and strict). Passing a ``lambda`` (no
annotation, no docstring) makes it yield the raw JSON instead, in every client version.
"""

from __future__ import annotations

import functools
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from scheduler_core.extender.protocol.cluster import NODE_RESOURCES_GROUP, NODE_RESOURCES_PLURAL, NODE_RESOURCES_VERSION

__all__ = [
    "Backoff",
    "ListWatcher",
    "Resource",
    "WatchHandler",
    "events_resource",
    "node_resources_resource",
    "nodes_resource",
    "pods_resource",
]

logger = logging.getLogger(__name__)

JSON = dict[str, Any]

DEFAULT_WATCH_TIMEOUT_SECONDS: Final = 300
"""Server-side end of one watch request; client-go's reflector picks 5..10 minutes. A fresh watch request
re-authenticates and moves to another API server replica when one goes away."""
DEFAULT_PAGE_SIZE: Final = 500
"""Items per list page, as client-go: large clusters are listed in chunks the API server can serve cheaply."""
_CONNECT_TIMEOUT: Final = 10.0
_READ_MARGIN: Final = 30.0
"""A watch's read timeout is its server-side timeout plus this: only a dead connection ever hits it."""


# ----------------------------------------------------------------------------
# Back-off
# ----------------------------------------------------------------------------


class Backoff:
    """Capped exponential back-off with jitter: ``initial``, ×``factor`` per failure, never above ``maximum``."""

    def __init__(
        self,
        *,
        initial: float = 0.8,
        maximum: float = 30.0,
        factor: float = 2.0,
        jitter: float = 0.2,
        rng: Callable[[], float] = random.random,
    ) -> None:
        if initial <= 0 or maximum < initial or factor < 1 or not 0 <= jitter < 1:
            raise ValueError("need 0 < initial <= maximum, factor >= 1, 0 <= jitter < 1")
        self.initial = initial
        """client-go starts at 800 ms: long enough not to hammer a restarting API server, short enough that a
        single dropped connection costs under a second."""
        self.maximum = maximum
        """client-go caps at 30 s: a cache more stale than that is reported (readiness, status) anyway."""
        self.factor = factor
        self.jitter = jitter
        """Spreads the reconnects of many replicas after an API server restart."""
        self._rng = rng
        self._next = initial

    def next(self) -> float:
        """The wait before the next attempt; each call without :meth:`reset` doubles the following one."""
        base = self._next
        self._next = min(self.maximum, self._next * self.factor)
        return base * (1 - self.jitter * self._rng())

    def reset(self) -> None:
        self._next = self.initial


# ----------------------------------------------------------------------------
# Resources
# ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Resource:
    """One collection to list and watch: a generated ``list_*`` function with its fixed arguments bound."""

    name: str
    """For logs and status, e.g. ``nodes`` or ``pods[spec.schedulerName=schedlens-scheduler]``."""
    list_call: Callable[..., Any]


def nodes_resource(api_client: client.ApiClient) -> Resource:
    return Resource("nodes", client.CoreV1Api(api_client).list_node)


def node_resources_resource(api_client: client.ApiClient) -> Resource:
    custom = client.CustomObjectsApi(api_client)
    call = functools.partial(
        custom.list_cluster_custom_object, NODE_RESOURCES_GROUP, NODE_RESOURCES_VERSION, NODE_RESOURCES_PLURAL
    )
    return Resource(f"{NODE_RESOURCES_PLURAL}.{NODE_RESOURCES_GROUP}", call)


def pods_resource(api_client: client.ApiClient, *, field_selector: str = "") -> Resource:
    core = client.CoreV1Api(api_client)
    call = functools.partial(core.list_pod_for_all_namespaces, field_selector=field_selector or None)
    return Resource(f"pods[{field_selector}]" if field_selector else "pods", call)


def events_resource(api_client: client.ApiClient, *, field_selector: str = "") -> Resource:
    """core/v1 Events (kube-scheduler writes events.k8s.io/v1; the API server serves both views of them)."""
    core = client.CoreV1Api(api_client)
    call = functools.partial(core.list_event_for_all_namespaces, field_selector=field_selector or None)
    return Resource(f"events[{field_selector}]" if field_selector else "events", call)


# ----------------------------------------------------------------------------
# The list + watch loop
# ----------------------------------------------------------------------------


class WatchHandler(Protocol):
    def replace(self, items: list[JSON]) -> None:
        """The complete collection after a (re)list: anything not in ``items`` is gone."""

    def apply(self, event_type: str, obj: JSON) -> None:
        """One ``ADDED``, ``MODIFIED`` or ``DELETED`` change."""


class _Gone(Exception):
    """The resourceVersion we watch from was compacted away: relist."""


class _ResourceMissing(Exception):
    """The collection does not exist (404): e.g. the CRD is not installed."""


@dataclass(frozen=True, slots=True)
class WatchStatus:
    resource: str
    synced: bool
    """The first list has been handed to the handler (a missing, allowed collection counts as empty)."""
    missing: bool
    resource_version: str
    lists: int
    watch_events: int
    last_error: str
    last_event_age_seconds: float | None


class ListWatcher:
    """Keeps ``handler`` in step with ``resource`` in a daemon thread until :meth:`stop`."""

    def __init__(
        self,
        resource: Resource,
        handler: WatchHandler,
        *,
        watch_timeout_seconds: int = DEFAULT_WATCH_TIMEOUT_SECONDS,
        page_size: int = DEFAULT_PAGE_SIZE,
        backoff: Backoff | None = None,
        missing_ok: bool = False,
        on_change: Callable[[], None] | None = None,
        wait: Callable[[float], object] | None = None,
    ) -> None:
        self.resource = resource
        self._handler = handler
        self._watch_timeout = int(watch_timeout_seconds)
        self._page_size = int(page_size)
        self._backoff = backoff or Backoff()
        self._missing_ok = missing_ok
        """A 404 on the list means "none": the NodeResources CRD is optional (the plugin then sees no object)."""
        self._on_change = on_change or (lambda: None)
        self._stop = threading.Event()
        self._wait = wait if wait is not None else self._stop.wait
        """How a back-off is waited out; tests record the waits instead of spending them."""
        self._thread: threading.Thread | None = None
        self._watch: watch.Watch | None = None
        self._lock = threading.Lock()
        self._synced = threading.Event()
        self._missing = False
        self._resource_version = ""
        self._lists = 0
        self._events = 0
        self._last_error = ""
        self._last_event_at: float | None = None

    # ----- lifecycle -----

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self.run, name=f"schedlens-watch-{self.resource.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop and break an open watch connection; waits up to ``timeout`` for the thread."""
        self._stop.set()
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return
        deadline = time.monotonic() + timeout
        while thread.is_alive() and time.monotonic() < deadline:
            with self._lock:
                current = self._watch
            if current is not None:
                # Shuts the socket down, so a read blocked on an idle stream returns at once. Repeated because a
                # request still being sent has no socket to shut yet.
                current.stop()  # type: ignore[no-untyped-call]
            thread.join(0.05)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    def status(self) -> WatchStatus:
        age = None if self._last_event_at is None else round(time.monotonic() - self._last_event_at, 3)
        return WatchStatus(
            resource=self.resource.name,
            synced=self.synced,
            missing=self._missing,
            resource_version=self._resource_version,
            lists=self._lists,
            watch_events=self._events,
            last_error=self._last_error,
            last_event_age_seconds=age,
        )

    # ----- the loop -----

    def run(self) -> None:
        """List, then watch and re-watch, relisting after 410 and backing off after failures, until stopped."""
        resource_version: str | None = None
        gone_without_progress = False
        while not self._stop.is_set():
            try:
                if resource_version is None:
                    resource_version = self._list()
                progressed, resource_version = self._watch_once(resource_version)
                if progressed:
                    self._backoff.reset()
                    gone_without_progress = False
                self._last_error = ""
            except _Gone as exc:
                logger.info("%s: %s; relisting", self.resource.name, exc)
                resource_version = None
                if gone_without_progress:  # a relist that is itself too old at once: do not spin
                    self._wait(self._backoff.next())
                gone_without_progress = True
            except _ResourceMissing as exc:
                self._last_error = str(exc)
                self._wait(self._backoff.next())
            except Exception as exc:  # connection, HTTP, JSON: all mean "try again later"
                if self._stop.is_set():
                    break
                self._last_error = _describe(exc)
                delay = self._backoff.next()
                logger.warning("%s: %s; retrying in %.1f s", self.resource.name, self._last_error, delay)
                self._wait(delay)
        logger.debug("%s: watch loop stopped", self.resource.name)

    def _list(self) -> str:
        items: list[JSON] = []
        token: str | None = None
        while True:
            try:
                response = self.resource.list_call(
                    limit=self._page_size,
                    _continue=token,
                    _preload_content=False,
                    _request_timeout=(_CONNECT_TIMEOUT, 60.0),
                )
            except ApiException as exc:
                if exc.status == 410:  # the continue token expired mid-list
                    raise _Gone(f"list continue token expired: {_reason(exc)}") from None
                if exc.status == 404 and self._missing_ok:
                    self._lists += 1
                    if not self._missing or not self.synced:
                        logger.warning("%s: not served by the API server (404); treated as empty", self.resource.name)
                    self._missing = True
                    self._handler.replace([])
                    self._synced.set()
                    self._on_change()
                    raise _ResourceMissing(f"{self.resource.name} not served by the API server (404)") from None
                raise
            document = _read_json(response)
            items.extend(document.get("items") or [])
            metadata = document.get("metadata") or {}
            token = metadata.get("continue") or None
            if token is None:
                break
        self._lists += 1
        self._missing = False
        self._handler.replace(items)
        self._resource_version = str(metadata.get("resourceVersion") or "")
        self._synced.set()
        self._on_change()
        logger.info("%s: listed %d at resourceVersion %s", self.resource.name, len(items), self._resource_version)
        return self._resource_version

    def _watch_once(self, resource_version: str) -> tuple[bool, str]:
        """One watch request; returns whether any event arrived and the resourceVersion to resume from."""
        w = watch.Watch()  # type: ignore[no-untyped-call]
        with self._lock:
            if self._stop.is_set():
                return False, resource_version
            self._watch = w
        progressed = False
        list_call = self.resource.list_call
        try:
            # A lambda has no return annotation, so Watch.stream yields raw JSON (see the module docstring).
            stream = w.stream(  # type: ignore[no-untyped-call]
                lambda **kwargs: list_call(**kwargs),
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=self._watch_timeout,
                _request_timeout=(_CONNECT_TIMEOUT, self._watch_timeout + _READ_MARGIN),
            )
            for event in stream:
                if self._stop.is_set():
                    break
                kind = str(event.get("type") or "")
                obj = event.get("raw_object", event.get("object"))
                if not isinstance(obj, dict):
                    continue
                new_version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
                if kind == "BOOKMARK":
                    resource_version = new_version or resource_version
                    self._resource_version = resource_version
                    continue
                if kind not in ("ADDED", "MODIFIED", "DELETED"):
                    continue
                self._handler.apply(kind, obj)
                progressed = True
                self._events += 1
                self._last_event_at = time.monotonic()
                if new_version:
                    resource_version = self._resource_version = new_version
                self._on_change()
        except ApiException as exc:
            if exc.status == 410:
                raise _Gone(f"watch expired: {_reason(exc)}") from None
            raise
        finally:
            with self._lock:
                self._watch = None
        return progressed, resource_version


# ----------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------


def _read_json(response: object) -> JSON:
    if not isinstance(response, urllib3.BaseHTTPResponse):
        raise TypeError(f"expected a raw urllib3 response, got {type(response).__name__}")
    try:
        data = response.data
    finally:
        response.release_conn()
    document = json.loads(data)
    if not isinstance(document, dict):
        raise ValueError("the API server answered a list with something other than a JSON object")
    return document


def _reason(exc: ApiException) -> str:
    body = exc.body
    if isinstance(body, bytes | str) and body:
        try:
            status: Mapping[str, Any] = json.loads(body)
            return str(status.get("message") or exc.reason)
        except (ValueError, AttributeError):
            pass
    return str(exc.reason or exc.status)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return f"API server answered {exc.status}: {_reason(exc)}"
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        exc = exc.reason
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__
