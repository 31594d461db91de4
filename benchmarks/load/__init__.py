"""Verb latency and sustained pods/s over HTTP: a kube-scheduler-like client against gunicorn, recording on.

``python -m benchmarks.load latency|sustained``. ``client`` is the client, ``servers`` the gunicorn it runs against
(schedlens, or the floors: ``floor_settings``/``floor_urls``/``floor_wsgi``, served only by this study), ``measure``
the two measurements and ``targets`` what ``make bench`` checks them against. ``benchmarks/ab.py`` A/Bs two
variants with the same client.
"""
