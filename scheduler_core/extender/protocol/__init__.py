"""The extender protocol: kube-scheduler's v1 wire types, the frozen domain views of pods and nodes converted once
from them, a pod's workload, and the binding interface the bind verb calls.

The bottom of the hot path: imports nothing of ``scheduler_core`` but ``extender.lru``.
"""
