"""A verb's verdicts and scores worked out for one order of the candidates, put in the order a request gave them.

kube-scheduler sends the same nodes in another order pod after pod (:mod:`scheduler_core.candidates`). Every
plugin's column is a function of each node alone, and the filter's outcome and the answer scale of the set (its
lowest and highest final score), so the columns of an earlier order of the same names, taken in this request's
order, are exactly what this order would have worked out: the record and the answer are the ones a fresh extender
gives this request. ``order[i]`` is the position, in the order worked out, of the request's i-th name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import compress
from typing import TypeVar

import msgspec

from scheduler_core.engine import FilterDecision
from scheduler_core.record import FilterRecord, PluginScores, PrioritizeRecord

_T = TypeVar("_T")


def _taken(column: Sequence[_T], order: list[int]) -> list[_T]:
    """``column`` in the request's order; an empty column (nothing recorded) stays empty."""
    return list(map(column.__getitem__, order)) if column else []


def _in_order(by_name: Mapping[str, _T], names: list[str]) -> dict[str, _T]:
    """``by_name``'s entries in the order of ``names`` (as the engine writes them: node order)."""
    return {name: by_name[name] for name in filter(by_name.__contains__, names)} if by_name else {}


def filter_in_order(
    decision: FilterDecision, record: FilterRecord, names: list[str], order: list[int]
) -> tuple[FilterDecision, FilterRecord]:
    """``run_filter``'s decision and record, worked out for another order of ``names``, in the order of ``names``."""
    passing = [False] * len(order)
    for index in decision.passed:
        passing[index] = True
    passed = list(compress(range(len(order)), map(passing.__getitem__, order)))
    unresolvable = set(record.unresolvable)
    reordered = msgspec.structs.replace(
        record,
        nodes=names,
        passed=list(map(names.__getitem__, passed)),
        failures=_in_order(record.failures, names),
        details=_in_order(record.details, names),
        unresolvable=list(filter(unresolvable.__contains__, names)) if unresolvable else [],
        traffic_bytes=_taken(record.traffic_bytes, order),
    )
    return FilterDecision(passed, dict(decision.failed), dict(decision.unresolvable)), reordered


def prioritize_in_order(record: PrioritizeRecord, names: list[str], order: list[int]) -> PrioritizeRecord:
    """``run_prioritize``'s record, worked out for another order of ``names``, in the order of ``names``."""
    return msgspec.structs.replace(
        record,
        nodes=names,
        plugins=[_plugin_in_order(plugin, names, order) for plugin in record.plugins],
        final=_taken(record.final, order),
        extender=_taken(record.extender, order),
    )


def _plugin_in_order(plugin: PluginScores, names: list[str], order: list[int]) -> PluginScores:
    return msgspec.structs.replace(
        plugin,
        scores=_taken(plugin.scores, order),
        raw=_taken(plugin.raw, order),
        herd_bytes=_taken(plugin.herd_bytes, order),
        notes=_in_order(plugin.notes, names),
        herd_binds=_taken(plugin.herd_binds, order),
        herd_newest_age_ms=_taken(plugin.herd_newest_age_ms, order),
        inputs={name: _taken(column, order) for name, column in plugin.inputs.items()},
    )
