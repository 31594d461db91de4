"""The verbs in process: filter and prioritize alone, and with their record encoded and spooled.

``python -m benchmarks.verbs`` (also over HTTP, against gunicorn); ``python -m benchmarks.verbs.record_encode``
breaks down what recording adds, part by part.
"""
