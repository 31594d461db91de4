"""Replay a stretch of recorded history under a candidate profile, and report what would have changed.

Each recorded cycle is replayed twice from its recorded inputs (:mod:`scheduler_core.history_replay.what_if`: the
recorded candidates, filter verdicts, traffic figures and scores, never the cluster): under the scenario it was recorded
with ("before") and under the candidate ("after"), so before and after compare like for like. The figures of both are
folded into one report by a :class:`~scheduler_core.history_replay.report_builder.ReportBuilder`.

The modules, by concern:

- :mod:`~scheduler_core.history_replay.report`: the report (plain msgspec Structs, JSON as they are), its caveats and
  what each figure follows from.
- :mod:`~scheduler_core.history_replay.report_text`: the report as text.
- :mod:`~scheduler_core.history_replay.recorded_cycles`: a recorded cycle as a replay reads it, in arrays.
- :mod:`~scheduler_core.history_replay.fast_replay`: the vectorized replay of many cycles at once, equal to
  :func:`scheduler_core.history_replay.what_if.replay` of each.
- :mod:`~scheduler_core.history_replay.scenarios`: the recorded scenario of a cycle and the candidate's description.
- :mod:`~scheduler_core.history_replay.report_builder`: replays cycles both ways and folds them into the report.
- :mod:`~scheduler_core.history_replay.learning`: the comparison of traffic learned per workload with the constant
  (each cycle replayed under the candidate with the herd bytes of each).
"""
