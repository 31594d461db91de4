"""The command-line face: ``kubectl schedlens`` (``kubectl_plugin``, with ``kubectl_pending`` for the pending pods
and ``failure_reasons`` for why a file or a server could not be reached), and the simulator that plays kube-scheduler
against a running extender (``manage.py simulate``, the benchmarks).

Clients from outside: they speak HTTP to a running schedlens. May import the hot path's record names; nothing in
``scheduler_core`` imports them.
"""
