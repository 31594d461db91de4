"""What ``make bench`` checks this study's figures against (issue 7: server side, loopback, 2 cores, recording on)."""

from __future__ import annotations

LATENCY_MS = {
    (100, "names"): (1, 3),
    (1000, "names"): (1.5, 5),
    (5000, "names"): (5, 15),
    (100, "nodes"): (12, 30),
    (1000, "nodes"): (90, 200),
    (5000, "nodes"): (600, 1200),
}
"""(nodes, mode) → (p50, p99) of a verb's round trip in ms; mode ``names`` sends NodeNames, ``nodes`` full Nodes."""

FILTER_OVER_FLOOR = 1.5
"""Full Nodes: the filter's round trip p50 over the decode floor (empty WSGI app + msgspec decode) at most this."""

SUSTAINED_PODS_PER_SECOND = {1000: 200, 5000: 80}
"""Nodes → pods/s a sustained run (NodeNames, ingest on) keeps, with zero errors and zero calls lost."""
