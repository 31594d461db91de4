"""The traffic prefetch against a real Prometheus: refresh time and the verbs on the snapshot path
(``python -m benchmarks.prefetch``)."""
