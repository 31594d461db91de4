"""Why a pod went where it went, or is still pending: a cycle's record written out as figures and plain language that
a person can recompute without reading code.

``explain`` the structured explanation, ``summary`` its one-line wording, ``figures`` the arithmetic each score
follows from, ``recompute`` an auditor's check of a served explanation, ``pending`` the refusals of a waiting pod.
May import the hot path (``extender``: the record types, the plugins' formulas and names) and ``traffic``; nothing
imports it back from the hot path.
"""
