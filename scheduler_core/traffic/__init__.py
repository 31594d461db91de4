"""Where per-node network traffic comes from: one interface, several sources."""

from scheduler_core.traffic.base import (
    QueryMode,
    TrafficQuery,
    TrafficSnapshot,
    TrafficSource,
    TrafficSourceError,
)

__all__ = ["QueryMode", "TrafficQuery", "TrafficSnapshot", "TrafficSource", "TrafficSourceError"]
