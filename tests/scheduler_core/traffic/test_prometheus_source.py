"""PrometheusTrafficSource against a real Prometheus serving counters written by the test.

Why ``increase`` can be asserted exactly is explained in ``conftest.py``: every window of the run
has samples within one scrape interval of both edges, so Prometheus extrapolates to the edges and a
constant-rate counter gives ``rate * window_seconds`` (up to float rounding).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from scheduler_core.traffic.base import TrafficQuery, TrafficSnapshot, TrafficSourceError
from scheduler_core.traffic.prometheus import NO_NODE_LABEL, PrometheusTrafficSource
from tests.support.prometheus_data import (
    NODE_A_ETH0_RATE,
    NODE_A_LO_RATE,
    NODE_A_ODD_DEVICE_RATE,
    NODE_B_ETH0_RATE,
    NODE_B_LO_RATE,
    NODE_C_LO_RATE,
    ODD_DEVICE,
    UNLABELLED_INSTANCE,
    TrafficData,
)
from tests.support.prometheus_server import PrometheusServer

pytestmark = pytest.mark.prometheus

EXACT = 1e-9


def fetch(url: str, **query: object) -> TrafficSnapshot:
    return PrometheusTrafficSource(url, timeout_seconds=5.0).fetch(TrafficQuery(**query))  # type: ignore[arg-type]


def sums_over_time_possible(
    samples: Sequence[tuple[float, float]], window: float, earliest: float, latest: float
) -> set[float]:
    """Every value ``sum_over_time(x[window])`` can take for an evaluation time in [earliest, latest].

    The sum only changes where a sample enters or leaves the window, so evaluating it at both ends
    and on either side of every such point in between covers all possibilities, whether the window
    is closed or open at its start.
    """

    def at(t: float) -> float:
        return sum(v for ts, v in samples if t - window <= ts <= t)

    moments = {earliest, latest}
    for ts, _ in samples:
        for edge in (ts, ts + window):
            if earliest <= edge <= latest:
                moments.update({edge - 0.001, edge, edge + 0.001})
    return {at(t) for t in moments}


# --- what the numbers mean ------------------------------------------------------------------------


def test_increase_mode_reports_bytes_received_in_the_window(prometheus_url: str) -> None:
    snapshot = fetch(prometheus_url, device_name="eth0", time_range_minutes=5)

    assert snapshot.bytes_by_node["node-a"] == pytest.approx(NODE_A_ETH0_RATE * 300, rel=EXACT)
    assert snapshot.error == ""


def test_a_counter_reset_inside_the_window_neither_loses_nor_invents_bytes(
    prometheus_url: str, traffic_data: TrafficData
) -> None:
    before = time.time()
    snapshot = fetch(prometheus_url, device_name="eth0", time_range_minutes=5)

    node_b = traffic_data.samples(device="eth0", instance="10.0.0.2:9100", kubernetes_node="node-b")
    in_window = [v for ts, v in node_b if before - 300 <= ts <= before]
    assert any(later < earlier for earlier, later in itertools.pairwise(in_window)), (
        "the data should reset inside the window"
    )
    assert snapshot.bytes_by_node["node-b"] == pytest.approx(NODE_B_ETH0_RATE * 300, rel=EXACT)


def test_the_window_length_follows_time_range_minutes(prometheus_url: str) -> None:
    snapshot = fetch(prometheus_url, device_name="eth0", time_range_minutes=10)

    assert snapshot.bytes_by_node["node-a"] == pytest.approx(NODE_A_ETH0_RATE * 600, rel=EXACT)


def test_the_device_filter_counts_only_that_interface(prometheus_url: str) -> None:
    snapshot = fetch(prometheus_url, device_name="lo", time_range_minutes=5)

    assert dict(snapshot.bytes_by_node) == pytest.approx(
        {"node-a": NODE_A_LO_RATE * 300, "node-b": NODE_B_LO_RATE * 300, "node-c": NODE_C_LO_RATE * 300},
        rel=EXACT,
    )


def test_a_node_without_series_for_the_device_is_absent(prometheus_url: str) -> None:
    snapshot = fetch(prometheus_url, device_name="eth0")

    assert "node-c" not in snapshot.bytes_by_node
    assert set(snapshot.bytes_by_node) == {"node-a", "node-b"}


def test_a_series_without_the_node_label_is_listed_as_unmatched_and_counted_for_no_node(
    prometheus_url: str,
) -> None:
    snapshot = fetch(prometheus_url, device_name="eth0")

    # ``sum by (kubernetes_node)`` folds every unlabelled series into one group without labels.
    assert snapshot.unmatched_series == (NO_NODE_LABEL,)
    assert set(snapshot.bytes_by_node) == {"node-a", "node-b"}


def test_node_label_chooses_the_label_that_names_the_node(prometheus_url: str) -> None:
    snapshot = fetch(prometheus_url, device_name="eth0", node_label="instance")

    assert set(snapshot.bytes_by_node) == {"10.0.0.1:9100", "10.0.0.2:9100", UNLABELLED_INSTANCE}
    assert snapshot.unmatched_series == ()


def test_device_names_with_quotes_and_backslashes_are_escaped(prometheus_url: str) -> None:
    snapshot = fetch(prometheus_url, device_name=ODD_DEVICE)

    assert 'device="we\\"ird\\\\dev"' in snapshot.source
    assert dict(snapshot.bytes_by_node) == pytest.approx({"node-a": NODE_A_ODD_DEVICE_RATE * 300}, rel=EXACT)


def test_sum_over_time_mode_adds_up_the_raw_counter_samples(prometheus_url: str, traffic_data: TrafficData) -> None:
    earliest = time.time() - 0.001  # Prometheus truncates its evaluation time to milliseconds
    snapshot = fetch(prometheus_url, device_name="eth0", query_mode="sum_over_time")
    latest = time.time()

    for node, instance in (("node-a", "10.0.0.1:9100"), ("node-b", "10.0.0.2:9100")):
        samples = traffic_data.samples(device="eth0", instance=instance, kubernetes_node=node)
        possible = sums_over_time_possible(samples, 300, earliest, latest)
        assert any(snapshot.bytes_by_node[node] == pytest.approx(p, rel=EXACT) for p in possible), (
            node,
            snapshot.bytes_by_node[node],
            possible,
        )
    assert snapshot.source == (
        'sum by (kubernetes_node) (sum_over_time(node_network_receive_bytes_total{device="eth0"}[5m]))'
    )


def test_the_snapshot_names_its_query_and_when_it_was_fetched(prometheus_url: str) -> None:
    query = TrafficQuery(address=prometheus_url, device_name="eth0", time_range_minutes=5)
    before = time.time()
    snapshot = PrometheusTrafficSource("http://unused.invalid").fetch(query)
    after = time.time()

    assert snapshot.query == query
    assert snapshot.source == (
        'sum by (kubernetes_node) (increase(node_network_receive_bytes_total{device="eth0"}[5m]))'
    )
    assert before <= snapshot.fetched_at <= after


def test_the_query_address_overrides_the_default_url(prometheus_url: str, closed_port_url: str) -> None:
    source = PrometheusTrafficSource(closed_port_url, retries=0)

    snapshot = source.fetch(TrafficQuery(address=prometheus_url))

    assert set(snapshot.bytes_by_node) == {"node-a", "node-b"}
    with pytest.raises(TrafficSourceError, match="connection refused"):
        source.fetch(TrafficQuery())


# --- what goes wrong ------------------------------------------------------------------------------


@pytest.mark.parametrize("label", ["kubernetes-node", "1node", "", "node name", 'x")) or vector(1) (("'])
def test_an_invalid_node_label_is_rejected_before_any_request(label: str, closed_port_url: str) -> None:
    source = PrometheusTrafficSource(closed_port_url, retries=0)

    with pytest.raises(TrafficSourceError, match="node_label") as raised:
        source.fetch(TrafficQuery(node_label=label))

    assert repr(label) in str(raised.value)
    assert "refused" not in str(raised.value)


@pytest.mark.parametrize(
    ("field", "value"), [("time_range_minutes", 0), ("time_range_minutes", -5), ("query_mode", "rate")]
)
def test_a_query_that_cannot_be_expressed_is_rejected_before_any_request(
    field: str, value: object, closed_port_url: str
) -> None:
    source = PrometheusTrafficSource(closed_port_url, retries=0)

    with pytest.raises(TrafficSourceError, match=field.split("_")[-1]) as raised:
        source.fetch(TrafficQuery(**{field: value}))  # type: ignore[arg-type]

    assert "refused" not in str(raised.value)


@pytest.mark.parametrize("address", ["prometheus:9090", "ftp://prometheus:21", "http://"])
def test_an_address_that_is_not_an_http_url_is_rejected_before_any_request(address: str) -> None:
    with pytest.raises(TrafficSourceError, match="not an http"):
        PrometheusTrafficSource("http://unused.invalid").fetch(TrafficQuery(address=address))


def test_an_unreachable_prometheus_fails_quickly_after_its_retries(closed_port_url: str) -> None:
    source = PrometheusTrafficSource(closed_port_url, timeout_seconds=2.0, retries=2, backoff_seconds=0.05)

    started = time.monotonic()
    with pytest.raises(TrafficSourceError) as raised:
        source.fetch(TrafficQuery())
    elapsed = time.monotonic() - started

    message = str(raised.value)
    assert closed_port_url in message
    assert "connection refused" in message
    assert "after 3 attempt(s)" in message
    assert elapsed < 1.0  # two back-offs of 0.05 s and 0.1 s, and refusals are immediate


def test_a_frozen_prometheus_fails_within_the_timeout_and_answers_again_once_resumed(
    own_prometheus: PrometheusServer,
) -> None:
    source = PrometheusTrafficSource(own_prometheus.url, timeout_seconds=0.5, retries=1, backoff_seconds=0.1)
    own_prometheus.pause()
    try:
        started = time.monotonic()
        with pytest.raises(TrafficSourceError, match=r"no answer within 0\.5s") as raised:
            source.fetch(TrafficQuery())
        elapsed = time.monotonic() - started
    finally:
        own_prometheus.resume()

    assert own_prometheus.url in str(raised.value)
    assert "after 2 attempt(s)" in str(raised.value)
    assert elapsed < 0.5 * 2 + 0.1 + 0.5  # two timeouts, one back-off, and scheduling slack
    assert set(source.fetch(TrafficQuery()).bytes_by_node) == {"node-a", "node-b"}


def test_a_stopped_prometheus_is_reported_as_refusing_connections(own_prometheus: PrometheusServer) -> None:
    source = PrometheusTrafficSource(own_prometheus.url, retries=0)
    assert source.fetch(TrafficQuery()).bytes_by_node

    own_prometheus.stop()

    with pytest.raises(TrafficSourceError, match="connection refused"):
        source.fetch(TrafficQuery())


def test_an_http_client_error_is_reported_without_retrying(prometheus_url: str) -> None:
    # Prometheus answers 404 under a path prefix it does not serve.
    source = PrometheusTrafficSource(prometheus_url, retries=3, backoff_seconds=10.0)

    started = time.monotonic()
    with pytest.raises(TrafficSourceError, match="HTTP 404") as raised:
        source.fetch(TrafficQuery(address=f"{prometheus_url}/no-such-prefix"))

    assert "after 1 attempt(s)" in str(raised.value)
    assert time.monotonic() - started < 5.0  # a retry would have waited 10 s first


def test_an_answer_that_is_not_json_is_reported(prometheus_url: str) -> None:
    # With a trailing "#", the client's "/api/v1/query" becomes a URL fragment and the request goes
    # to Prometheus' /-/ready, which answers 200 with plain text.
    source = PrometheusTrafficSource(prometheus_url, retries=1, backoff_seconds=0.01)

    with pytest.raises(TrafficSourceError, match="not JSON") as raised:
        source.fetch(TrafficQuery(address=f"{prometheus_url}/-/ready#"))

    assert "after 2 attempt(s)" in str(raised.value)


# --- retry policy, checked against a tiny HTTP server that only ever answers one status -----------


class _StatusServer:
    def __init__(self, status: int) -> None:
        self.hits = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.hits += 1
                body = b'{"status":"error","error":"go away"}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def status_server(request: pytest.FixtureRequest) -> Iterator[_StatusServer]:
    server = _StatusServer(request.param)
    yield server
    server.close()


@pytest.mark.parametrize(
    ("status_server", "attempts"),
    [(503, 3), (500, 3), (429, 3), (400, 1), (422, 1)],
    indirect=["status_server"],
)
def test_server_errors_and_throttling_are_retried_but_other_client_errors_are_not(
    status_server: _StatusServer, attempts: int
) -> None:
    source = PrometheusTrafficSource(status_server.url, retries=2, backoff_seconds=0.01)

    with pytest.raises(TrafficSourceError, match=f"after {attempts} attempt") as raised:
        source.fetch(TrafficQuery())

    assert status_server.hits == attempts
    assert "go away" in str(raised.value)
