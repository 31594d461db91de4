"""The extender protocol: kube-scheduler's v1 wire types, the frozen domain views of pods and nodes converted once
from them, a pod's workload, and the binding interface the bind verb calls; and why a document did not decode, in
our words (``decode_errors``, over ``json_syntax``'s scan of a text that is not JSON), for every refusal schedlens
shows.

The bottom of the hot path: imports nothing of ``scheduler_core`` but ``extender.lru``.
"""
