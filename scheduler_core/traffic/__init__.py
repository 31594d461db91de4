"""Where per-node network traffic comes from: one interface, several sources."""

from scheduler_core.traffic.base import (
    DEFAULT_DEVICE_NAME,
    DEFAULT_NODE_LABEL,
    DEFAULT_QUERY_MODE,
    DEFAULT_WINDOW_MINUTES,
    QueryMode,
    TrafficQuery,
    TrafficSnapshot,
    TrafficSource,
    TrafficSourceError,
)

__all__ = [
    "DEFAULT_DEVICE_NAME",
    "DEFAULT_NODE_LABEL",
    "DEFAULT_QUERY_MODE",
    "DEFAULT_WINDOW_MINUTES",
    "QueryMode",
    "TrafficQuery",
    "TrafficSnapshot",
    "TrafficSource",
    "TrafficSourceError",
]
