"""History replay: recorded cycles replayed per second per core (``python -m benchmarks.replay``)."""
