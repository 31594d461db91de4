"""Traffic learned per workload: what the herd estimate assumes a newly bound pod adds to its node.

A pod's workload is its owner, climbed one step by name (``scheduler_core.extender.protocol.workloads``); what it is
assumed to add and where that comes from is recorded as a ``scheduler_core.extender.record.structs.AssumedBytes``.

What a workload's pods did is learned in the background (the outcome job, from its measured placements: never a verb)
into a :class:`LearnedTraffic` table the verbs look up per pod in O(1). A pod's assumed bytes are, in this order:

1. the pod's ``schedlens.io/assumed-bytes`` annotation (bytes over the query window, like ``assumedBytesPerPod``);
2. its workload's learned figure, when the profile learns and the workload has at least ``MIN_SAMPLES`` pods measured;
3. the constant ``assumedBytesPerPod``.

The learned figure is a decayed high percentile (``PERCENTILE``) of the pods' rates after their warm-up: a pod's first
window after its bind (image pulls, caches filling) is left out, its rate taken over the rest of its longest window,
and a pod measured ``HALF_LIFE_DAYS`` ago weighs half as much as one measured now.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

import msgspec

from scheduler_core.extender.protocol.workloads import WorkloadKey
from scheduler_core.extender.record.structs import SOURCE_CONSTANT, SOURCE_LEARNED, SOURCE_OVERRIDE, AssumedBytes

PERCENTILE: Final = 0.9
MIN_SAMPLES: Final = 5
HALF_LIFE_DAYS: Final = 3.0
LOOKBACK_DAYS: Final = 7


@dataclass(frozen=True, slots=True)
class PodSample:
    """One measured pod of a workload: its rate after warm-up, in bytes per second, and when it was measured."""

    bytes_per_second: float
    at: float


def rate_after_warmup(windows: Iterable[tuple[int, float | None]]) -> float | None:
    """A pod's rate past its first window: ``(bytes(longest) − bytes(shortest)) / (longest − shortest)`` over its
    windows after the bind (``(seconds, pod bytes)``, each from the bind); None with fewer than two measured."""
    measured = sorted((s, b) for s, b in windows if b is not None)
    if len(measured) < 2:
        return None
    (first_s, first_b), (last_s, last_b) = measured[0], measured[-1]
    if last_s <= first_s:
        return None
    return max(0.0, last_b - first_b) / (last_s - first_s)


def decayed_percentile(samples: Iterable[PodSample], now: float, *, percentile: float, half_life_days: float) -> float:
    """The smallest rate whose decayed weight, with every smaller one's, reaches ``percentile`` of the total."""
    half_life = half_life_days * 86400.0
    weighted = sorted((s.bytes_per_second, 0.5 ** (max(0.0, now - s.at) / half_life)) for s in samples)
    total = sum(weight for _, weight in weighted)
    reached = 0.0
    for value, weight in weighted:
        reached += weight
        if reached >= percentile * total * (1 - 1e-12):
            return value
    return weighted[-1][0] if weighted else 0.0


class Learned(msgspec.Struct, frozen=True, gc=False):
    """One workload's learned traffic: bytes per second (times a query window: the assumed bytes) from ``pods``."""

    bytes_per_second: float
    pods: int


@dataclass(frozen=True, slots=True)
class LearnedTraffic:
    """What every workload's pods did, as learned in one background run; looked up per pod by workload key."""

    by_workload: Mapping[WorkloadKey, Learned] = field(default_factory=dict)
    learned_at: float = 0.0
    percentile: float = PERCENTILE
    lookback_days: int = LOOKBACK_DAYS
    min_samples: int = MIN_SAMPLES


NOTHING_LEARNED = LearnedTraffic()


class LearnedTrafficStore:
    """The table the verbs read (``current``, replaced whole by the background run that learns it: one reference
    assignment, so a verb reads a complete table without a lock and never waits for one)."""

    def __init__(self, current: LearnedTraffic = NOTHING_LEARNED) -> None:
        self.current = current


def learn(
    samples: Mapping[WorkloadKey, list[PodSample]],
    now: float,
    *,
    percentile: float = PERCENTILE,
    half_life_days: float = HALF_LIFE_DAYS,
    min_samples: int = MIN_SAMPLES,
    lookback_days: int = LOOKBACK_DAYS,
) -> LearnedTraffic:
    """The table of the workloads with at least ``min_samples`` pods measured in the last ``lookback_days``."""
    since = now - lookback_days * 86400.0
    table: dict[WorkloadKey, Learned] = {}
    for key, found in samples.items():
        recent = [s for s in found if s.at >= since]
        if len(recent) >= min_samples:
            rate = decayed_percentile(recent, now, percentile=percentile, half_life_days=half_life_days)
            table[key] = Learned(rate, len(recent))
    return LearnedTraffic(table, now, percentile, lookback_days, min_samples)


def assumed_bytes(
    *,
    constant: float,
    workload: WorkloadKey | None,
    override: float | None,
    learned: LearnedTraffic | None,
    window_seconds: int,
) -> AssumedBytes:
    """A pod's assumed bytes over a query window of ``window_seconds``; ``learned`` None: the profile does not learn."""
    name = workload.text() if workload is not None else ""
    if override is not None:
        return AssumedBytes(override, SOURCE_OVERRIDE, name)
    found = learned.by_workload.get(workload) if learned is not None and workload is not None else None
    if found is None or learned is None:
        return AssumedBytes(constant, SOURCE_CONSTANT, name)
    return AssumedBytes(
        float(round(found.bytes_per_second * window_seconds)),
        SOURCE_LEARNED,
        name,
        found.pods,
        found.bytes_per_second,
        learned.percentile,
        learned.lookback_days,
    )


def recompute(record: AssumedBytes, *, constant: float, window_seconds: int) -> float | None:
    """The bytes ``record`` must state, from its own figures (None: nothing to recompute, an override's own value)."""
    if record.source == SOURCE_CONSTANT:
        return constant
    if record.source == SOURCE_LEARNED:
        return float(round(record.bytes_per_second * window_seconds))
    return None


class _Stored(msgspec.Struct, array_like=True, gc=False):
    """A :class:`LearnedTraffic` as published to Redis: ``[learned_at, percentile, lookback, min, [[key, …], …]]``."""

    learned_at: float
    percentile: float
    lookback_days: int
    min_samples: int
    workloads: list[tuple[WorkloadKey, Learned]]


_stored_decoder = msgspec.msgpack.Decoder(_Stored)


def encode_learned(table: LearnedTraffic) -> bytes:
    workloads = sorted(table.by_workload.items(), key=lambda item: (item[0].namespace, item[0].kind, item[0].name))
    stored = _Stored(table.learned_at, table.percentile, table.lookback_days, table.min_samples, workloads)
    return msgspec.msgpack.encode(stored)


def decode_learned(data: bytes) -> LearnedTraffic:
    stored = _stored_decoder.decode(data)
    by_workload = dict(stored.workloads)
    return LearnedTraffic(by_workload, stored.learned_at, stored.percentile, stored.lookback_days, stored.min_samples)
