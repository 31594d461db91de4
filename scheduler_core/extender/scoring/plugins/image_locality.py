"""ImageLocality (score): prefer nodes that already hold the pod's images."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from itertools import repeat
from operator import attrgetter, contains
from typing import ClassVar, overload

import numpy as np
from numpy.typing import NDArray

from scheduler_core.extender.protocol.cluster import NodeInfo
from scheduler_core.extender.record.structs import IMAGE_LOCALITY
from scheduler_core.extender.scoring.plugins.base import (
    CycleContext,
    PluginArgs,
    ScoreColumns,
    ScoreResult,
    shared_column,
)

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


def _holding(nodes: Sequence[NodeInfo], image: str) -> NDArray[np.bool_]:
    """Whether each node holds ``image``."""
    return np.fromiter(map(contains, map(_images, nodes), repeat(image)), dtype=np.bool_, count=len(nodes))


class ImageLocality:
    """Share of the pod's images (init containers too) present in the node's ``status.images``, 0..100."""

    name: ClassVar[str] = IMAGE_LOCALITY
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
        # Membership tests in C (map over the nodes' image sets), one column per pod image and candidate list,
        # summed in numpy: no per-node Python. ``present · 100.0 / total`` is the same IEEE arithmetic as per node.
        counts = np.zeros(count, dtype=np.int64)
        for image in images:
            counts += shared_column(ctx.shared, (self.name, image), (nodes,), partial(_holding, nodes, image))
        total = len(images)
        values = counts * 100.0 / total
        present: list[int] = counts.tolist()
        raws: list[float] = counts.astype(np.float64).tolist()
        columns = ScoreColumns(values.tolist(), raws, _PresentDetails(present, total), unmeasured=0)
        return ScoreResult(columns, requested=tuple(images))
