"""How a pod is scored: the engine, the plugins (``plugins``), the profiles that choose them and the versions
recorded of them, the answer on kube-scheduler's scale, the herd estimate, the traffic learned per workload, the
traffic window a cycle's figures are read with, and the human units of their reasons.

May import ``extender.record``, ``extender.protocol``, ``extender.lru`` and ``scheduler_core.traffic``'s interface;
never a Kubernetes adapter, an explanation or the verbs above it.
"""
