"""The record path at 1000 nodes: spool append, ingest into PostgreSQL, bytes stored per cycle.

``python -m benchmarks.record`` (``path`` does the work; ``targets`` is what ``make bench`` checks).
"""
