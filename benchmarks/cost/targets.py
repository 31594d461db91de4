"""What ``make bench`` checks the cost per pod against (issue 22, at 1000 nodes), in milliseconds."""

from __future__ import annotations

CPU_PER_POD_MS = 1.5
"""CPU of every schedlens process per scheduled pod (verbs, bind, ingest)."""

BIND_CPU_MS = 0.3
"""CPU of the bind verb, through the API server."""

ROUND_TRIP_P50_MS = 1.0
"""filter + prioritize round trip p50 (420 names), binds and ingest concurrent."""
