"""Reliability runs written to ``benchmarks/results-reliability.md``: ``python -m benchmarks.reliability.fuzz``
(the fuzz tests at thousands of cases) and ``python -m benchmarks.reliability.soak`` (minutes of load with faults)."""
