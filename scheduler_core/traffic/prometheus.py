"""Received bytes per node, read from Prometheus (node-exporter's ``node_network_receive_bytes_total``).

This is the only module of the project that imports ``prometheus_api_client``; everything else sees
the :class:`~scheduler_core.traffic.base.TrafficSource` interface.

One PromQL query per fetch covers all nodes. Each HTTP attempt runs in a short-lived daemon thread
that the caller waits on for at most ``timeout_seconds``, because the HTTP client's own timeout covers
neither name resolution nor a server that trickles its answer byte by byte. So a fetch never takes
longer than ``timeout_seconds * (retries + 1)`` plus the back-off pauses between attempts.
"""

from __future__ import annotations

import logging
import math
import re
import socket
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Any, TypeVar
from urllib.parse import urlsplit

from prometheus_api_client.exceptions import PrometheusApiClientException
from prometheus_api_client.prometheus_connect import PrometheusConnect

from scheduler_core.traffic.base import TrafficQuery, TrafficSnapshot, TrafficSourceError

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

METRIC_NAME = "node_network_receive_bytes_total"
NO_NODE_LABEL = "<no node label>"
"""How a series that lacks the node label is listed in ``unmatched_series`` when it has no ``instance``."""

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# prometheus_api_client raises this for any non-200 answer; the status code is only in the message.
_HTTP_STATUS = re.compile(r"HTTP Status Code (\d{3})\b\s*(.*)", re.DOTALL)
_MAX_DETAIL_CHARS = 300


def escape_label_value(value: str) -> str:
    """Escape ``value`` for use inside a double-quoted PromQL label matcher."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def build_promql(query: TrafficQuery) -> str:
    """The one PromQL expression that answers ``query`` for every node at once.

    Raises :class:`TrafficSourceError` when the query cannot be expressed (bad label name, empty
    window, unknown mode): no request is sent then.
    """
    if not _LABEL_NAME.fullmatch(query.node_label):
        raise TrafficSourceError(
            f"node_label {query.node_label!r} is not a valid Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)"
        )
    minutes = query.time_range_minutes
    if isinstance(minutes, bool) or not isinstance(minutes, int) or minutes <= 0:
        raise TrafficSourceError(f"time_range_minutes must be a positive whole number, not {minutes!r}")
    selector = f'{METRIC_NAME}{{device="{escape_label_value(query.device_name)}"}}[{minutes}m]'
    if query.query_mode == "increase":
        # Bytes received in the window: handles counter resets and extrapolates to the window edges.
        return f"sum by ({query.node_label}) (increase({selector}))"
    if query.query_mode == "sum_over_time":
        # The original tutorial's query. It adds up the raw samples of a *counter*, so the number
        # grows with the counter's absolute value and with the scrape frequency rather than with the
        # traffic in the window. Kept only so that existing profiles keep their behaviour.
        return f"sum by ({query.node_label}) (sum_over_time({selector}))"
    raise TrafficSourceError(f"unknown query_mode {query.query_mode!r} (expected 'increase' or 'sum_over_time')")


class _AttemptFailed(Exception):
    def __init__(self, reason: str, *, retryable: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable


class PrometheusTrafficSource:
    """A :class:`TrafficSource` that asks Prometheus for the bytes each node received in the window.

    ``default_url`` is used when a query's ``address`` is empty. Failed attempts are retried
    ``retries`` times, pausing ``backoff_seconds``, then twice that, and so on; an HTTP 4xx answer
    other than 429 is not retried, since asking again would get the same answer.
    """

    def __init__(
        self,
        default_url: str,
        *,
        timeout_seconds: float = 3.0,
        retries: int = 2,
        backoff_seconds: float = 0.2,
        disable_ssl: bool = False,
    ) -> None:
        if not timeout_seconds > 0:
            raise ValueError(f"timeout_seconds must be positive, not {timeout_seconds!r}")
        if retries < 0:
            raise ValueError(f"retries must not be negative, not {retries!r}")
        if backoff_seconds < 0:
            raise ValueError(f"backoff_seconds must not be negative, not {backoff_seconds!r}")
        self.default_url = default_url
        self.timeout_seconds = float(timeout_seconds)
        self.retries = retries
        self.backoff_seconds = float(backoff_seconds)
        self.disable_ssl = disable_ssl

    def fetch(self, query: TrafficQuery) -> TrafficSnapshot:
        url = self._url(query.address)
        expression = build_promql(query)
        bytes_by_node, unmatched = self._with_retries(
            url, lambda: _parse_vector(self._query_once(url, expression), query.node_label)
        )
        return TrafficSnapshot(
            query=query,
            bytes_by_node=bytes_by_node,
            fetched_at=time.time(),
            source=expression,
            unmatched_series=unmatched,
        )

    def vector(self, expression: str, *, address: str = "") -> list[tuple[Mapping[str, str], float]]:
        """The samples of an instant query, each with its labels, retried like a fetch (the outcome job's reads:
        ``scheduler_core.outcomes``)."""
        url = self._url(address)
        return self._with_retries(url, lambda: _samples(self._query_once(url, expression)))

    def _url(self, address: str) -> str:
        url = (address or self.default_url).strip().rstrip("/")
        if not url:
            raise TrafficSourceError("no Prometheus URL: the query has no address and there is no default")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise TrafficSourceError(f"Prometheus URL {url!r} is not an http:// or https:// URL")
        return url

    def _with_retries(self, url: str, attempt_once: Callable[[], _T]) -> _T:
        attempts = self.retries + 1
        attempt = 1
        while True:
            try:
                return attempt_once()
            except _AttemptFailed as failure:
                if not failure.retryable or attempt == attempts:
                    raise TrafficSourceError(
                        f"Prometheus at {url} failed after {attempt} attempt(s): {failure.reason}"
                    ) from failure.__cause__
                pause = self.backoff_seconds * 2 ** (attempt - 1)
                logger.debug(
                    "Prometheus at %s: attempt %d/%d failed (%s); retrying in %.2fs",
                    url,
                    attempt,
                    attempts,
                    failure.reason,
                    pause,
                )
                time.sleep(pause)
                attempt += 1

    def _query_once(self, url: str, expression: str) -> object:
        """One HTTP request, abandoned after ``timeout_seconds`` whatever the client is doing."""
        outcome: Future[object] = Future()
        timeout = self.timeout_seconds

        def run() -> None:
            # A fresh client per attempt: an abandoned attempt may still be using its own.
            client = PrometheusConnect(
                url=url,
                disable_ssl=self.disable_ssl,
                # The client would otherwise retry 3 times with 1 s, 2 s, 4 s pauses on its own.
                retry=0,
                # Annotated ``int`` in the client but handed to requests, which takes a float.
                timeout=timeout,  # type: ignore[arg-type]
            )
            try:
                outcome.set_result(client.custom_query(expression))
            except BaseException as exc:
                outcome.set_exception(exc)
            finally:
                client.close()

        threading.Thread(target=run, name="prometheus-traffic-query", daemon=True).start()
        try:
            return outcome.result(timeout=timeout)
        except FutureTimeoutError as exc:
            raise _AttemptFailed(f"no answer within {timeout:g}s", retryable=True) from exc
        except PrometheusApiClientException as exc:
            raise _http_failure(str(exc)) from exc
        except ValueError as exc:
            # requests' JSONDecodeError (json's or simplejson's); its URL errors are ValueErrors too.
            if any("JSON" in cls.__name__ for cls in type(exc).__mro__):
                raise _AttemptFailed(f"the answer is not JSON ({_shorten(str(exc))})", retryable=True) from exc
            raise _AttemptFailed(_shorten(f"{type(exc).__name__}: {exc}"), retryable=False) from exc
        except (KeyError, TypeError, IndexError) as exc:
            raise _AttemptFailed(
                f"the answer is not a Prometheus query result ({type(exc).__name__}: {_shorten(str(exc))})",
                retryable=True,
            ) from exc
        except OSError as exc:  # requests' exceptions derive from OSError
            raise _AttemptFailed(_describe_transport_error(exc, timeout), retryable=True) from exc


def _http_failure(message: str) -> _AttemptFailed:
    match = _HTTP_STATUS.match(message)
    if match is None:
        return _AttemptFailed(_shorten(message), retryable=True)
    status = int(match.group(1))
    detail = _shorten(match.group(2).strip())
    retryable = status == 429 or status >= 500
    return _AttemptFailed(f"HTTP {status} {detail}".rstrip(), retryable=retryable)


def _describe_transport_error(exc: BaseException, timeout: float) -> str:
    """Name the root cause (refused, timed out, unresolvable) rather than the wrappers' prose."""
    root: BaseException = exc
    seen = {id(root)}
    while True:
        nxt = root.__cause__ or root.__context__
        if nxt is None or id(nxt) in seen:
            break
        seen.add(id(nxt))
        root = nxt
    if isinstance(root, ConnectionRefusedError):
        return "connection refused"
    if isinstance(root, TimeoutError) or "timed out" in str(exc).lower():
        return f"no answer within {timeout:g}s"
    if isinstance(root, socket.gaierror):
        return f"cannot resolve the host ({root})"
    return _shorten(f"{type(root).__name__}: {root}")


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_DETAIL_CHARS else text[: _MAX_DETAIL_CHARS - 1] + "…"


def _samples(result: object) -> list[tuple[Mapping[str, str], float]]:
    """An instant-vector result's samples with their labels."""
    if not isinstance(result, list):
        raise _AttemptFailed(
            f"the answer is a {type(result).__name__}, not an instant vector: {_shorten(repr(result))}",
            retryable=True,
        )
    return [_parse_sample(item) for item in result]


def _parse_vector(result: object, node_label: str) -> tuple[dict[str, float], tuple[str, ...]]:
    """Turn an instant-vector result into bytes per node plus the series that name no node.

    Values that are not finite non-negative numbers are dropped: they are not byte counts.
    """
    bytes_by_node: dict[str, float] = {}
    unmatched: set[str] = set()
    dropped = 0
    for labels, value in _samples(result):
        if not (math.isfinite(value) and value >= 0):
            dropped += 1
            continue
        node = labels.get(node_label, "")
        if not node:
            unmatched.add(labels.get("instance") or NO_NODE_LABEL)
            continue
        # ``sum by`` leaves one series per node; add up defensively all the same.
        bytes_by_node[node] = bytes_by_node.get(node, 0.0) + value
    if dropped:
        logger.debug("dropped %d series whose value is not a byte count", dropped)
    return bytes_by_node, tuple(sorted(unmatched))


def _parse_sample(item: object) -> tuple[Mapping[str, str], float]:
    if isinstance(item, dict):
        labels: Any = item.get("metric")
        pair: Any = item.get("value")
        if (
            isinstance(labels, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items())
            and isinstance(pair, list)
            and len(pair) == 2
            and isinstance(pair[1], str)
        ):
            try:
                return labels, float(pair[1])
            except ValueError:
                pass
    raise _AttemptFailed(f"unexpected series in the answer: {_shorten(repr(item))}", retryable=True)
