"""Dashboard and audit API server time on a bulk-loaded history (``python -m benchmarks.dashboard``).

``history`` records real cycles and bulk-loads copies of them; ``benchmarks.replay`` and ``benchmarks.history_scale``
load their histories with it too.
"""
