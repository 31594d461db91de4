"""Cost per scheduled pod as kube-scheduler pays it: CPU of every schedlens process, and the round trips.

``python -m benchmarks.cost`` (``--variant`` for an A/B; results in ``benchmarks/results-cost.md``). In the order a
run uses them: ``stack`` starts the processes as deployed and reads their CPU, ``driver`` sends what kube-scheduler
v1.28 sends (``python -m benchmarks.cost.driver`` prints its candidate lists), ``measure`` runs the phases,
``report`` writes the tables, ``per_pod`` is the command and ``targets`` what ``make bench`` checks. ``bind_parts``
splits the bind verb's CPU in process, part by part; ``verb_parts``, ``ingest_parts`` and ``record_parts`` the verbs',
the ingester's and what reading a record and the ``Explained`` Event's summary cost.
"""
