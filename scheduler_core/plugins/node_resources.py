"""NodeResourceFitByCR (filter + score): which extended resources a node enables, from a NodeResources CR."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import ClassVar

from scheduler_core.cluster import NodeInfo, resources_lookup
from scheduler_core.plugins.base import PASS, CycleContext, PluginArgs, ScoreColumns, ScoreResult, Verdict


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

    name: ClassVar[str] = "NodeResourceFitByCR"
    args_type: ClassVar[type[PluginArgs]] = NodeResourceFitByCRArgs

    def __init__(self, args: NodeResourceFitByCRArgs) -> None:
        self.args = args

    def filter(self, ctx: CycleContext, nodes: Sequence[NodeInfo]) -> Sequence[Verdict]:
        wanted = sorted(ctx.pod.extended_resources)
        specs = list(map(resources_lookup(ctx.cluster), map(_name, nodes)))
        if not wanted:  # the common pod: only the object's existence matters
            return [NO_CR if spec is None else PASS for spec in specs]
        verdicts: list[Verdict] = []
        for spec in specs:
            if spec is None:
                verdicts.append(NO_CR)
                continue
            missing = [r for r in wanted if not spec.resources_filter.get(r, False)]
            if missing:
                verdicts.append(Verdict(f"node does not enable {', '.join(missing)}", unresolvable=True))
            else:
                verdicts.append(PASS)
        return verdicts

    def score(self, ctx: CycleContext, nodes: Sequence[NodeInfo]) -> ScoreResult:
        wanted = sorted(ctx.pod.extended_resources)
        count = len(nodes)
        if not wanted:
            note = "pod requests no extended resource"
            return ScoreResult(ScoreColumns([0.0] * count, None, [note] * count), applicable=False, note=note)
        values: list[float] = []
        raws: list[float | None] = []
        details: list[str] = []
        for spec in map(resources_lookup(ctx.cluster), map(_name, nodes)):
            if spec is None:
                values.append(0.0)
                raws.append(None)
                details.append("no NodeResources object for node")
                continue
            scores = [spec.resources_score.get(r, 0) for r in wanted]
            mean = sum(scores) / len(scores)
            values.append(min(100.0, max(0.0, mean)))
            raws.append(mean)
            details.append("")
        return ScoreResult(ScoreColumns(values, raws, details))
