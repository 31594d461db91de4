"""Spool → database: the ingester reads the verbs' spooled records (``spool_ingest``, ``spool_read_ahead``), turns
them into new calls (``new_calls``, ``sanitize``, ``call_builders``), joins them to their cycles (``cycles``,
``cycle_summary``, ``observed_binds``), counts them per node (``batch_tallies``) and writes them, sealed into the audit
chain (``record_writes``; ``dashboard.audit.chain``). ``in_process`` runs it as a thread of a web process."""
