"""schedlens domain: extender wire types, plugins, profiles, the scoring engine and metric sources.

Plain Python on purpose: nothing here imports Django, DRF, Celery or Redis (an import-linter contract in
``make test`` keeps it so), which makes the scheduling path fast to test and cheap to run.
"""
