"""What ``make bench`` checks the record path against (issue 7, at 1000 nodes)."""

from __future__ import annotations

APPEND_P99_MS = 0.3
"""A verb's spool append, p99."""

STORED_KB_PER_CYCLE = 16
"""Bytes stored per 1000-node cycle, every column of the cycle, its calls, postings and shared parts."""

INGEST_CYCLES_PER_SECOND = 1000
"""Spool → PostgreSQL, as ``ingest_spool --follow`` drains a backlog."""

OUTAGE_MINUTES = 10
DRAIN_MINUTES = 3
"""The backlog an ``OUTAGE_MINUTES`` database outage leaves at the sustained rate drains in at most this."""
