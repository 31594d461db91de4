"""The hot path: what runs per extender verb call, from request bytes to answer bytes and the call's record.

By concern, each a layer that imports only the layers below it (an import-linter contract):

- ``verbs`` (the four verbs), ``candidates`` (a call's nodes, looked up as seldom as possible) and
  ``filter_answer`` (a filter's answer): the calls themselves, on top.
- ``scoring``: the engine, the plugins, the profiles and their versions, the answer scale, the herd estimate and the
  traffic learned per workload.
- ``record``: the record of a call (its types, the spool's codec, the formulas of its derived columns, compression,
  bind intents).
- ``protocol``: the extender's wire types and the frozen domain views converted once from them; the binding
  interface the bind verb calls.
- ``lru``: the one cache shape, below them all.

May import ``scheduler_core.traffic``'s interface (the snapshot the plugins read) and nothing else of
``scheduler_core``: no Kubernetes adapter (``kube``), explanation, history replay, outcome or command-line tool, and
no Django, database or Redis (a forbidden contract). What the verbs need from outside (a binder, a cluster view, the
traffic) comes in as an interface defined here.
"""
