"""NodeResourceFitByCR (filter + score): which extended resources a node enables, from a NodeResources CR."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from itertools import repeat
from operator import attrgetter
from typing import ClassVar

from scheduler_core.extender.protocol.cluster import NodeInfo, NodeResourcesSpec, resources_lookup, resources_table
from scheduler_core.extender.record.structs import NODE_RESOURCE_FIT_BY_CR
from scheduler_core.extender.scoring.plugins.base import (
    PASS,
    CycleContext,
    PluginArgs,
    ScoreColumns,
    ScoreResult,
    Verdict,
    shared_column,
)


class NodeResourceFitByCRArgs(PluginArgs):
    pass


NO_CR = Verdict("no NodeResources object for node", unresolvable=True)
_name = attrgetter("name")


class NodeResourceFitByCR:
    """Filter: every extended resource the pod requests must be enabled in the node's ``resourcesFilter``.

    Score: the mean of ``resourcesScore`` over the requested extended resources, clamped to 0..100. Only
    extended resources (``example.com/gpu``) count: cpu and memory are the in-tree NodeResourcesFit's job.
    Failures are unresolvable: evicting pods cannot make a node enable a resource.
    """

    name: ClassVar[str] = NODE_RESOURCE_FIT_BY_CR
    args_type: ClassVar[type[PluginArgs]] = NodeResourceFitByCRArgs
    judges_nodes_alone: ClassVar[bool] = True

    def __init__(self, args: NodeResourceFitByCRArgs) -> None:
        self.args = args

    def filter(self, ctx: CycleContext, nodes: Sequence[NodeInfo]) -> Sequence[Verdict]:
        wanted = tuple(sorted(ctx.pod.extended_resources))
        names = map(_name, nodes)
        table = resources_table(ctx.cluster, ("filter", wanted), partial(_verdicts, wanted))
        if table is not None:  # one dict lookup per node, in C; once per candidate list and table
            found = table

            def verdicts() -> list[Verdict]:
                return list(map(found.get, names, repeat(NO_CR)))

            return shared_column(ctx.shared, (self.name, "filter", wanted), (table, nodes), verdicts)
        specs = map(resources_lookup(ctx.cluster), names)
        cache: dict[tuple[str, ...], Verdict] = {}
        return [NO_CR if spec is None else _verdict(wanted, spec, cache) for spec in specs]

    def score(self, ctx: CycleContext, nodes: Sequence[NodeInfo]) -> ScoreResult:
        wanted = tuple(sorted(ctx.pod.extended_resources))
        count = len(nodes)
        if not wanted:
            note = "pod requests no extended resource"
            return ScoreResult(ScoreColumns([0.0] * count, None, [note] * count), applicable=False, note=note)
        tables = resources_table(ctx.cluster, ("score", wanted), partial(_means, wanted))
        if tables is None:
            lookup = resources_lookup(ctx.cluster)
            names = list(map(_name, nodes))
            specs = {name: spec for name in names if (spec := lookup(name)) is not None}
            return _scores(wanted, names, _means(wanted, specs))
        memoized = tables  # once per candidate list and table
        return shared_column(
            ctx.shared,
            (self.name, "score", wanted),
            (tables, nodes),
            lambda: _scores(wanted, list(map(_name, nodes)), memoized),
        )


_Tables = tuple[dict[str, float], dict[str, float], dict[str, dict[str, float]]]
"""Node → mean ``resourcesScore`` of the wanted resources, the same clamped to 0..100, and per wanted resource
node → its ``resourcesScore`` (what the mean is of)."""


def _scores(wanted: tuple[str, ...], names: list[str], tables: _Tables) -> ScoreResult:
    means, clamped, by_resource = tables
    raws: list[float | None] = list(map(means.get, names))
    values = list(map(clamped.get, names, repeat(0.0)))
    details = None
    unmeasured = raws.count(None)  # once per candidate list and table (the result is shared), not per call
    if unmeasured:
        details = [NO_CR.reason if raw is None else "" for raw in raws]
    inputs = {resource: list(map(by_resource[resource].get, names)) for resource in wanted}
    columns = ScoreColumns(values, raws, details, unmeasured=unmeasured)
    return ScoreResult(columns, requested=wanted, inputs=inputs)


def _verdict(wanted: tuple[str, ...], spec: NodeResourcesSpec, cache: dict[tuple[str, ...], Verdict]) -> Verdict:
    """PASS, or the failure naming the missing resources (one Verdict per distinct missing set)."""
    missing = tuple(r for r in wanted if not spec.resources_filter.get(r, False))
    if not missing:
        return PASS
    verdict = cache.get(missing)
    if verdict is None:
        verdict = cache[missing] = Verdict(f"node does not enable {', '.join(missing)}", unresolvable=True)
    return verdict


def _verdicts(wanted: tuple[str, ...], specs: Mapping[str, NodeResourcesSpec]) -> dict[str, Verdict]:
    cache: dict[tuple[str, ...], Verdict] = {}
    return {name: _verdict(wanted, spec, cache) for name, spec in specs.items()}


def _means(wanted: tuple[str, ...], specs: Mapping[str, NodeResourcesSpec]) -> _Tables:
    by_resource = {r: {name: float(spec.resources_score.get(r, 0)) for name, spec in specs.items()} for r in wanted}
    means = {name: sum(by_resource[r][name] for r in wanted) / len(wanted) for name in specs}
    return means, {name: min(100.0, max(0.0, mean)) for name, mean in means.items()}, by_resource
