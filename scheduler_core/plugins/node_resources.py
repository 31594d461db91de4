"""NodeResourceFitByCR (filter + score): which extended resources a node enables, from a NodeResources CR."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from scheduler_core.cluster import NodeInfo
from scheduler_core.plugins.base import PASS, CycleContext, NodeScore, PluginArgs, ScoreResult, Verdict


class NodeResourceFitByCRArgs(PluginArgs):
    pass


NO_CR = Verdict("no NodeResources object for node", unresolvable=True)


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
        verdicts: list[Verdict] = []
        for node in nodes:
            spec = ctx.cluster.node_resources(node.name)
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
        if not wanted:
            zero = NodeScore(0.0, None, "pod requests no extended resource")
            return ScoreResult([zero] * len(nodes), applicable=False, note="pod requests no extended resource")
        scores: list[NodeScore] = []
        for node in nodes:
            spec = ctx.cluster.node_resources(node.name)
            if spec is None:
                scores.append(NodeScore(0.0, None, "no NodeResources object for node"))
                continue
            values = [spec.resources_score.get(r, 0) for r in wanted]
            mean = sum(values) / len(values)
            scores.append(NodeScore(min(100.0, max(0.0, mean)), mean))
        return ScoreResult(scores)
