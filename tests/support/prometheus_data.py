"""Counters the traffic tests write into a real Prometheus, and the arithmetic that makes them exact.

The data (see :func:`make_traffic_data`) are node-exporter style
``node_network_receive_bytes_total`` counters sampled every 15 s from 20 minutes before to
10 minutes after the moment the fixture is built. The samples reaching into the future are what
make ``increase()`` exact: an instant query at any time during the run finds samples less than one
interval inside both edges of its window, so Prometheus extrapolates to exactly the window edges,
and a counter growing at a constant ``rate`` yields exactly ``rate * window_seconds``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.support.prometheus_server import Series

METRIC = "node_network_receive_bytes_total"
STEP_SECONDS = 15
HISTORY_SECONDS = 20 * 60
FUTURE_SECONDS = 10 * 60

NODE_A_ETH0_RATE = 1000.0
NODE_A_LO_RATE = 50.0
NODE_A_ODD_DEVICE_RATE = 7.0
NODE_B_ETH0_RATE = 4000.0
NODE_B_LO_RATE = 70.0
NODE_C_LO_RATE = 10.0
UNLABELLED_ETH0_RATE = 300.0

ODD_DEVICE = 'we"ird\\dev'
"""A device name with a double quote and a backslash, which must be escaped in PromQL."""
UNLABELLED_INSTANCE = "10.0.0.9:9100"
NODE_B_RESET_BEFORE_ANCHOR = 150
"""node-b's exporter restarts 150 s before the anchor: inside any 5-minute window of the run."""


@dataclass(frozen=True)
class TrafficData:
    anchor: int
    """Unix seconds when the data were made; samples lie on ``anchor + k * STEP_SECONDS``."""
    series: tuple[Series, ...]

    def samples(self, **labels: str) -> list[tuple[float, float]]:
        """The samples of the one series whose labels are exactly ``labels``."""
        (match,) = [s for s in self.series if dict(s.labels) == labels]
        return list(match.samples)


def counter_samples(
    anchor: int, rate: float, *, start_value: float = 1e9, reset_at: int | None = None
) -> list[tuple[float, float]]:
    """A counter growing by ``rate`` bytes per second from ``start_value``.

    With ``reset_at`` (a sample timestamp), the exporter restarts just after the sample before it:
    the counter starts again from zero, so the sample at ``reset_at`` is ``rate * STEP_SECONDS``.
    """
    first = anchor - HISTORY_SECONDS
    samples: list[tuple[float, float]] = []
    for ts in range(first, anchor + FUTURE_SECONDS + 1, STEP_SECONDS):
        if reset_at is not None and ts >= reset_at:
            value = rate * (ts - (reset_at - STEP_SECONDS))
        else:
            value = start_value + rate * (ts - first)
        samples.append((float(ts), value))
    return samples


def make_traffic_data(anchor: int) -> TrafficData:
    def series(rate: float, reset_at: int | None = None, **labels: str) -> Series:
        return Series(METRIC, labels, counter_samples(anchor, rate, reset_at=reset_at))

    return TrafficData(
        anchor=anchor,
        series=(
            series(NODE_A_ETH0_RATE, device="eth0", instance="10.0.0.1:9100", kubernetes_node="node-a"),
            series(NODE_A_LO_RATE, device="lo", instance="10.0.0.1:9100", kubernetes_node="node-a"),
            series(NODE_A_ODD_DEVICE_RATE, device=ODD_DEVICE, instance="10.0.0.1:9100", kubernetes_node="node-a"),
            series(
                NODE_B_ETH0_RATE,
                reset_at=anchor - NODE_B_RESET_BEFORE_ANCHOR,
                device="eth0",
                instance="10.0.0.2:9100",
                kubernetes_node="node-b",
            ),
            series(NODE_B_LO_RATE, device="lo", instance="10.0.0.2:9100", kubernetes_node="node-b"),
            # node-c only has loopback traffic: no eth0 series at all.
            series(NODE_C_LO_RATE, device="lo", instance="10.0.0.3:9100", kubernetes_node="node-c"),
            # A mislabelled exporter: eth0 traffic but no kubernetes_node label.
            series(UNLABELLED_ETH0_RATE, device="eth0", instance=UNLABELLED_INSTANCE),
        ),
    )


HERD_RATES = {
    "node-001": 10_000.0,
    "node-002": 100_000.0,
    "node-003": 150_000.0,
    "node-004": 200_000.0,
    "node-005": 1_000_000.0,
    "node-006": 1_000_000.0,
    "node-007": 1_000_000.0,
    "node-008": 1_000_000.0,
}
"""Bytes/s on eth0: four quiet nodes (one clearly the quietest) and four busy ones."""
QUIET = ("node-001", "node-002", "node-003", "node-004")


def herd_series(anchor: int) -> tuple[Series, ...]:
    """A cluster with a few quiet and a few busy nodes named like the simulator's."""
    return tuple(
        Series(METRIC, {"device": "eth0", "instance": f"10.1.0.{i}:9100", "kubernetes_node": node}, samples)
        for i, (node, rate) in enumerate(HERD_RATES.items(), start=1)
        for samples in [counter_samples(anchor, rate)]
    )
