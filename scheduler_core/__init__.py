"""schedlens's domain, plain Python, by concern; each package's docstring says what it holds and may import.

- ``extender``: the hot path, what runs per verb call (``protocol``: wire types and the domain views converted from
  them; ``record``: the record of a call and its spool codec; ``scoring``: plugins, profiles, the engine; the verbs on
  top). It imports no Kubernetes adapter, explanation, command-line tool, database or Redis.
- ``traffic``: where per-node traffic comes from (the snapshot the plugins read, its sources).
- ``explanation``: why a pod went where it went, or is still pending, written out to be recomputed.
- ``history_replay``: a recorded decision (``what_if``) or a stretch of history replayed under another profile.
- ``outcomes``: what a placement did to traffic afterwards.
- ``kube``: the Kubernetes adapters (binding, Events, list + watch, the node cache, the placement watcher).
- ``cli``: the command-line face (``kubectl schedlens``, the simulator that plays kube-scheduler).

Nothing here imports Django, DRF, Celery or Redis (an import-linter contract in ``make test`` keeps it so, with the
contracts between these packages), which makes the scheduling path fast to test and cheap to run.
"""
