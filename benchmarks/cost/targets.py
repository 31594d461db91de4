"""What ``make bench`` checks the cost per pod against (issue 43, at 1000 nodes).

Issue 43's other two targets are read elsewhere: the verbs in process (``python -m benchmarks.cost.verb_parts``,
≤ 0.6 ms per pod) and the API server and etcd CPU schedlens adds per pod against the no-op extender (≤ 1 ms), which
only a real control plane shows (the Kubernetes-shaped API server of this benchmark is Python)."""

from __future__ import annotations

CPU_VERSUS_NOOP = 2.0
"""CPU per scheduled pod of everything schedlens runs (verbs, bind, ingest, PostgreSQL) over the no-op extender's
(``shared/tools/noop-extender``), measured in the same run."""

ROUND_TRIP_P50_MS = 2.0
"""filter + prioritize round trip p50 (420 names), binds and ingest concurrent."""
