"""ImageLocality (score): prefer nodes that already hold the pod's images."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from scheduler_core.cluster import NodeInfo
from scheduler_core.plugins.base import CycleContext, NodeScore, PluginArgs, ScoreResult


class ImageLocalityArgs(PluginArgs):
    pass


class ImageLocality:
    """Share of the pod's images (init containers too) present in the node's ``status.images``, 0..100."""

    name: ClassVar[str] = "ImageLocality"
    args_type: ClassVar[type[PluginArgs]] = ImageLocalityArgs

    def __init__(self, args: ImageLocalityArgs) -> None:
        self.args = args

    def score(self, ctx: CycleContext, nodes: Sequence[NodeInfo]) -> ScoreResult:
        images = ctx.pod.images
        if not images:
            zero = NodeScore(0.0, None, "pod names no image")
            return ScoreResult([zero] * len(nodes), applicable=False, note="pod names no image")
        scores = []
        for node in nodes:
            present = sum(1 for image in images if image in node.images)
            scores.append(
                NodeScore(present * 100.0 / len(images), float(present), f"{present}/{len(images)} images present")
            )
        return ScoreResult(scores)
