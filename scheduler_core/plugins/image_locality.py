"""ImageLocality (score): prefer nodes that already hold the pod's images."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from operator import add, attrgetter, contains, mul, truediv
from typing import ClassVar, overload

from scheduler_core.cluster import NodeInfo
from scheduler_core.plugins.base import CycleContext, PluginArgs, ScoreColumns, ScoreResult

_images = attrgetter("images")


class ImageLocalityArgs(PluginArgs):
    pass


class _PresentDetails(Sequence[str]):
    """``"k/n images present"`` per node, formatted only when read (the record never stores it)."""

    __slots__ = ("_present", "_total")

    def __init__(self, present: list[int], total: int) -> None:
        self._present = present
        self._total = total

    def __len__(self) -> int:
        return len(self._present)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [f"{p}/{self._total} images present" for p in self._present[index]]
        return f"{self._present[index]}/{self._total} images present"


class ImageLocality:
    """Share of the pod's images (init containers too) present in the node's ``status.images``, 0..100."""

    name: ClassVar[str] = "ImageLocality"
    args_type: ClassVar[type[PluginArgs]] = ImageLocalityArgs
    reads_node_images: ClassVar[bool] = True

    def __init__(self, args: ImageLocalityArgs) -> None:
        self.args = args

    def score(self, ctx: CycleContext, nodes: Sequence[NodeInfo]) -> ScoreResult:
        images = ctx.pod.images
        count = len(nodes)
        if not images:
            note = "pod names no image"
            return ScoreResult(ScoreColumns([0.0] * count, None, [note] * count), applicable=False, note=note)
        # Membership tests in C (map over the nodes' image sets), one pass per pod image: no per-node Python.
        sets = list(map(_images, nodes))
        present: list[int] = [0] * count
        for image in images:
            present = list(map(add, present, map(contains, sets, repeat(image))))
        total = len(images)
        values = list(map(truediv, map(mul, present, repeat(100.0)), repeat(total)))
        return ScoreResult(ScoreColumns(values, list(map(float, present)), _PresentDetails(present, total)))
