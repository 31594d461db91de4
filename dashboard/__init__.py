"""The Django app of schedlens: the extender's HTTP layer, the spool and its ingest, the cycle record and its audit
chain, the dashboard and the audit API. The project's configuration (settings, URLs, WSGI, Celery) is ``config``."""
