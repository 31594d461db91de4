"""An embedded traffic source with realistic per-node traffic, so ``make run`` needs no Prometheus.

Each node gets a stable base rate spread over three orders of magnitude (100 kB/s to 100 MB/s, like a real
cluster's mix of quiet and busy nodes), a slow wave with its own phase (day/night load, compressed to
minutes so a demo shows movement) and a little jitter per refresh.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Iterable

from scheduler_core.traffic.base import TrafficQuery, TrafficSnapshot

WAVE_PERIOD_SECONDS = 600.0


def _unit(*parts: str) -> float:
    digest = hashlib.blake2b("/".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def synthetic_rate(node: str, device: str, at: float) -> float:
    """Bytes per second a node receives on a device at a moment; deterministic for tests and replays."""
    base = 10 ** (5 + 3 * _unit(node, device, "base"))
    phase = 2 * math.pi * _unit(node, device, "phase")
    wave = 1 + 0.6 * math.sin(2 * math.pi * at / WAVE_PERIOD_SECONDS + phase)
    jitter = 0.9 + 0.2 * _unit(node, device, str(int(at // 15)))
    return base * wave * jitter


class SyntheticTrafficSource:
    def __init__(self, node_names: Callable[[], Iterable[str]], clock: Callable[[], float] = time.time) -> None:
        self._node_names = node_names
        self._clock = clock

    def fetch(self, query: TrafficQuery) -> TrafficSnapshot:
        now = self._clock()
        window = query.window_seconds
        values = {name: round(synthetic_rate(name, query.device_name, now) * window, 0) for name in self._node_names()}
        return TrafficSnapshot(query=query, bytes_by_node=values, fetched_at=now, source="synthetic")
