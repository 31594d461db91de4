"""A recorded cycle as a history replay reads it: its summary fields, and its inputs in arrays.

A history replay reads thousands of cycles, so their inputs are held as columns rather than an object per node
(:class:`CycleColumns`), and what many cycles share (the candidates, the filter's outcome, the traffic snapshot) as
one :class:`CycleShape`. :func:`columns_from_inputs` makes them from the records, ``dashboard.storage.replay_inputs``
straight from the stored bodies; a cycle the arrays cannot hold keeps its records (:class:`RecordedCycle`), for
:func:`scheduler_core.history_replay.what_if.replay`. The replay of the columns is
:mod:`~scheduler_core.history_replay.fast_replay`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
from numpy.typing import NDArray

from scheduler_core.extender.record.formulas import float_array
from scheduler_core.extender.record.structs import FILTER, NODE_CACHE, CycleRecords
from scheduler_core.extender.scoring.answer import DEFAULT_ANSWER_SCALE
from scheduler_core.extender.scoring.plugins.traffic import NetworkTraffic
from scheduler_core.history_replay.what_if import RecordedInputs, Scenario

Floats = NDArray[np.float64]
Bools = NDArray[np.bool_]
Ints = NDArray[np.int64]


@dataclass(slots=True)
class Stage:
    """What a scenario makes of a shape and its traffic figures, the same for every cycle that shares them: who
    passes, and the figures the scores start from."""

    passed: Bools
    """Reached prioritize in the replay (passed every filter and was sent to prioritize)."""
    feasible: Ints
    """Candidate positions of the nodes that passed, in candidate order."""
    sent: Ints
    """Their places in the prioritize lists (``len(positions)``: not sent, no recorded scores)."""
    all_sent: bool
    """Every node that passed was sent to prioritize (has recorded scores)."""
    sent_identity: bool
    """``sent`` is every place in order: the prioritize lists need no gathering."""
    all_known: bool
    """Every node that passed has a traffic figure."""
    score_raws: Floats
    """Per candidate, the raw bytes ``NetworkTraffic`` scores (NaN: none)."""
    usable: bool
    neutral: bool
    traffic_missing: Bools | None
    traffic_above: Bools | None
    reason_above: str


class CycleShape:
    """What many cycles share: the candidates, the filter's failures, passed nodes and traffic figures (one
    snapshot's, for one kind of pod), and which candidates were sent to prioritize. Arrays are never written to once
    made; what a scenario makes of a shape (:class:`Stage`) is kept on it."""

    __slots__ = (
        "_sent_of",
        "candidates",
        "failed_by",
        "failures",
        "filter_traffic",
        "has_filter",
        "positions",
        "prioritized",
        "recorded_passed",
        "stages",
    )

    def __init__(
        self,
        candidates: Sequence[str],
        *,
        has_filter: bool,
        failures: Mapping[str, Mapping[str, str]],
        failed_by: Mapping[str, Bools],
        recorded_passed: Bools,
        filter_traffic: Floats | None,
        positions: Ints | None,
    ) -> None:
        self.candidates = candidates
        self.has_filter = has_filter
        self.failures = failures
        """The filter's recorded failures: node → {plugin: reason}."""
        self.failed_by = failed_by
        """Recorded filter plugin → the candidates it failed (plugins in the order they first appear)."""
        self.recorded_passed = recorded_passed
        """The filter's ``passed`` (every candidate without a filter record)."""
        self.filter_traffic = filter_traffic
        """The filter's traffic figures (NaN: none for the node); None when it recorded none."""
        self.positions = positions
        """The candidate position of each node sent to prioritize, in the order sent; None without prioritize."""
        self.prioritized: Bools | None = None
        self._sent_of: Ints | None = None
        if positions is not None:
            self.prioritized = np.zeros(len(candidates), dtype=bool)
            self.prioritized[positions] = True
        self.stages: dict[tuple[Any, ...], tuple[Scenario, Stage]] = {}
        """What scenarios made of this shape, kept by :func:`~scheduler_core.history_replay.fast_replay.replay_batch`
        (keyed by the cycles' traffic key and the scenario)."""

    @property
    def sent_of(self) -> Ints:
        """Each candidate's place in the prioritize lists; ``len(positions)`` for a candidate not sent."""
        if self._sent_of is None:
            sent = len(self.positions) if self.positions is not None else 0
            found = np.full(len(self.candidates), sent, dtype=np.intp)
            if self.positions is not None:
                found[self.positions] = np.arange(sent, dtype=np.intp)
            self._sent_of = found
        return self._sent_of

    @property
    def filters_seen(self) -> list[str]:
        return list(self.failed_by)


@dataclass(slots=True)
class PluginColumns:
    """One score plugin of a cycle's prioritize record, aligned with the nodes sent to prioritize."""

    name: str
    weight: int
    applicable: bool
    scores: Floats | None
    """Normalized 0..100, one per node sent, never NaN; None for ``NetworkTraffic`` when not read (its scores are
    computed again from the raw figures)."""


@dataclass(slots=True)
class CycleColumns:
    """What one cycle recorded, as a history replay reads it: its :class:`CycleShape` and its own figures, in arrays
    (no object per node).

    Built by :func:`columns_from_inputs` from the records, or straight from the stored bodies
    (``dashboard.storage.replay_inputs``); replayed by :func:`~scheduler_core.history_replay.fast_replay.replay_batch`,
    which gives what
    :func:`scheduler_core.history_replay.what_if.replay` gives for the same records
    (``tests/scheduler_core/history_replay/test_fast_replay.py``).
    """

    shape: CycleShape
    plugins: list[PluginColumns]
    traffic_raw: Floats | None = None
    """``NetworkTraffic``'s raw figures, one per node sent (NaN: none); None when it recorded none, or when
    ``raw_is_filter``."""
    raw_is_filter: bool = False
    """``NetworkTraffic`` recorded raw figures, and they are the filter's for the same nodes."""
    herd: Floats | None = None
    """``NetworkTraffic``'s herd bytes, one per node sent; None: none."""
    answer_scale: str = DEFAULT_ANSWER_SCALE
    """The scale the cycle answered on (:attr:`RecordedInputs.answer_scale`)."""

    @property
    def candidates(self) -> Sequence[str]:
        return self.shape.candidates

    @property
    def has_traffic_plugin(self) -> bool:
        return any(p.name == NetworkTraffic.name for p in self.plugins)

    def traffic_key(self) -> tuple[Any, ...]:
        """Cycles of one shape with the same key read the same traffic figures
        (:func:`~scheduler_core.history_replay.fast_replay._traffic_arrays`)."""
        if self.raw_is_filter:
            return (FILTER,)
        if self.traffic_raw is None:
            return ("none", self.has_traffic_plugin)
        return ("own", id(self))


SMALLEST_BYTES = 1e-300
"""Traffic figures (bytes) the vectorized replay takes: 0 or at least this, finite. Anything else (never a byte
count) could overflow ``100 / max`` into a NaN score, which :func:`scheduler_core.history_replay.what_if.replay` orders
by the position it meets it at: such a cycle is replayed by that function itself."""


def byte_counts(values: Floats | None) -> bool:
    """``values`` (NaN: none) are byte counts the vectorized replay takes (:data:`SMALLEST_BYTES`)."""
    if values is None:
        return True
    return not (np.count_nonzero((values < SMALLEST_BYTES) & (values != 0)) or np.isinf(values).any())


def _floats_or_none(values: Sequence[float | None]) -> Floats | None:
    """``values`` as float64 (None → NaN); None when one is not a finite number or None.

    In passes in C, never a Python step per value: a record holds one value per candidate."""
    array = float_array(values)  # every one a float
    if array is None:
        try:
            array = np.array(values, dtype=np.float64)  # numpy makes None NaN
        except (TypeError, ValueError):
            return None
    if np.isinf(array).any() or np.count_nonzero(np.isnan(array)) != values.count(None):  # a NaN that was no None
        return None
    return array


def columns_from_inputs(inputs: RecordedInputs) -> CycleColumns | None:
    """The columns of ``inputs``; None when the cycle holds what only
    :func:`scheduler_core.history_replay.what_if.replay` handles (duplicate node names, nodes unknown to the node cache,
    prioritized nodes that were not candidates, lists not aligned with their nodes, figures that are not finite
    numbers)."""
    candidates = inputs.candidates
    count = len(candidates)
    index = {name: i for i, name in enumerate(candidates)}
    if len(index) != count:
        return None
    fr, pr = inputs.filter, inputs.prioritize
    failures: Mapping[str, Mapping[str, str]] = {}
    failed_by: dict[str, Bools] = {}
    filter_traffic: Floats | None = None
    recorded_passed = np.ones(count, dtype=bool)
    if fr is not None:
        failures = fr.failures
        for node, reasons in failures.items():
            if NODE_CACHE in reasons:
                return None
            position = index.get(node)
            for failing in reasons:
                mask = failed_by.get(failing)
                if mask is None:
                    mask = failed_by[failing] = np.zeros(count, dtype=bool)
                if position is not None:
                    mask[position] = True
        recorded_passed = np.zeros(count, dtype=bool)
        for node in fr.passed:
            if node in index:
                recorded_passed[index[node]] = True
        if fr.traffic_bytes:
            if len(fr.traffic_bytes) != count:
                return None
            filter_traffic = _floats_or_none(fr.traffic_bytes)
            if filter_traffic is None or not byte_counts(filter_traffic):
                return None
    positions: Ints | None = None
    plugins: list[PluginColumns] = []
    traffic_raw: Floats | None = None
    herd: Floats | None = None
    if pr is not None:
        found = [index.get(node, -1) for node in pr.nodes]
        if -1 in found or len(set(found)) != len(found):
            return None
        positions = np.asarray(found, dtype=np.intp)
        traffic_plugins = 0
        for plugin in pr.plugins:
            if plugin.name == NODE_CACHE or len(plugin.scores) != len(found):
                return None
            scores = _floats_or_none(plugin.scores)
            if scores is None or np.isnan(scores).any():
                return None
            plugins.append(PluginColumns(plugin.name, plugin.weight, plugin.applicable, scores))
            if plugin.name == NetworkTraffic.name:
                traffic_plugins += 1
                if plugin.raw:
                    if len(plugin.raw) != len(found):
                        return None
                    traffic_raw = _floats_or_none(plugin.raw)
                    if traffic_raw is None or not byte_counts(traffic_raw):
                        return None
                if plugin.herd_bytes:
                    if len(plugin.herd_bytes) != len(found):
                        return None
                    herd = _floats_or_none(plugin.herd_bytes)
                    if herd is None or np.isnan(herd).any() or not byte_counts(herd):
                        return None
        if traffic_plugins > 1:
            return None
    shape = CycleShape(
        candidates,
        has_filter=fr is not None,
        failures=failures,
        failed_by=failed_by,
        recorded_passed=recorded_passed,
        filter_traffic=filter_traffic,
        positions=positions,
    )
    raw_is_filter = (
        traffic_raw is not None
        and filter_traffic is not None
        and positions is not None
        and np.array_equal(traffic_raw, filter_traffic[positions], equal_nan=True)
    )
    return CycleColumns(
        shape,
        plugins,
        traffic_raw=None if raw_is_filter else traffic_raw,
        raw_is_filter=raw_is_filter,
        herd=herd,
        answer_scale=inputs.answer_scale,
    )


@dataclass(slots=True)
class RecordedCycle:
    """One recorded cycle as a replay reads it: the summary fields the report names, and its inputs as columns
    (the fast path), else as records (:func:`scheduler_core.history_replay.what_if.replay`), else why it cannot be
    replayed."""

    cycle_id: int
    started_at: str
    pod_namespace: str
    pod_name: str
    profile: str
    preferred_node: str
    """As recorded."""
    columns: CycleColumns | None = None
    inputs: RecordedInputs | None = None
    weights: Sequence[tuple[str, int]] | None = None
    """The prioritize record's plugins (name, weight); None without one."""
    skipped: str = ""
    """Why it cannot be replayed (then neither columns nor inputs)."""
    profile_version: str = ""
    """The version of the profile it was decided by (its baseline); empty: recorded before versions were kept."""


def recorded_cycle_from_records(
    cycle_id: int,
    records: CycleRecords,
    *,
    started_at: str = "",
    pod_namespace: str = "",
    pod_name: str = "",
    profile: str = "",
    preferred_node: str = "",
) -> RecordedCycle:
    """A :class:`RecordedCycle` from a cycle's records: columns when the fast path reads them, else the records for
    :func:`scheduler_core.history_replay.what_if.replay`."""
    cycle = RecordedCycle(cycle_id, started_at, pod_namespace, pod_name, profile, preferred_node)
    if records.unreadable:
        cycle.skipped = "a stored call body cannot be read"
        return cycle
    if records.untyped:
        cycle.skipped = f"a record does not read as the engine's: {records.untyped[:120]}"
        return cycle
    if records.filter is None and records.prioritize is None:
        cycle.skipped = "no filter or prioritize record (the cycle never reached our plugins)"
        return cycle
    try:
        inputs = RecordedInputs.from_records(records.filter, records.prioritize)
    except (msgspec.ValidationError, TypeError, ValueError):  # whatever a library said: not for the report
        cycle.skipped = "a record does not read as the engine's"
        return cycle
    return with_inputs(cycle, inputs)


def with_inputs(cycle: RecordedCycle, inputs: RecordedInputs) -> RecordedCycle:
    if not inputs.candidates:
        cycle.skipped = "no candidate nodes recorded"
        return cycle
    cycle.weights = [(p.name, p.weight) for p in inputs.prioritize.plugins] if inputs.prioritize is not None else None
    cycle.columns = columns_from_inputs(inputs)
    if cycle.columns is None:
        cycle.inputs = inputs
    return cycle
