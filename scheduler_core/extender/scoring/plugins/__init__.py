"""The plugin registry: every plugin schedlens knows, by the name profiles use."""

from __future__ import annotations

from scheduler_core.extender.scoring.plugins.base import (
    NEUTRAL_SCORE,
    CycleContext,
    FilterPlugin,
    NodeScore,
    PluginArgs,
    ScoreColumns,
    ScorePlugin,
    ScoreResult,
    Verdict,
)
from scheduler_core.extender.scoring.plugins.image_locality import ImageLocality
from scheduler_core.extender.scoring.plugins.node_resources import NodeResourceFitByCR
from scheduler_core.extender.scoring.plugins.traffic import NetworkTraffic, TrafficArgs, TrafficThreshold

PLUGINS: dict[str, type[NetworkTraffic | TrafficThreshold | NodeResourceFitByCR | ImageLocality]] = {
    plugin.name: plugin for plugin in (NetworkTraffic, TrafficThreshold, NodeResourceFitByCR, ImageLocality)
}
"""Name → plugin class. A class with ``filter`` is a filter plugin, with ``score`` a score plugin."""

FILTER_PLUGINS = frozenset(name for name, cls in PLUGINS.items() if hasattr(cls, "filter"))
SCORE_PLUGINS = frozenset(name for name, cls in PLUGINS.items() if hasattr(cls, "score"))

__all__ = [
    "FILTER_PLUGINS",
    "NEUTRAL_SCORE",
    "PLUGINS",
    "SCORE_PLUGINS",
    "CycleContext",
    "FilterPlugin",
    "NodeScore",
    "PluginArgs",
    "ScoreColumns",
    "ScorePlugin",
    "ScoreResult",
    "TrafficArgs",
    "Verdict",
]
