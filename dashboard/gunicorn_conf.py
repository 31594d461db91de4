"""gunicorn settings for the extender: threads for concurrent binds, keep-alive longer than Go's idle 90 s.

kube-scheduler keeps idle connections for 90 s; a server that closes them sooner races a new POST on the
same socket and the filter fails with EOF (protocol doc §2.4). So keep-alive is 120 s, which needs the
threaded worker (the sync worker closes every connection).
"""

import os

bind = f"{os.environ.get('HOST', '127.0.0.1')}:{os.environ.get('PORT', '8000')}"
worker_class = "gthread"
workers = int(os.environ.get("WEB_WORKERS", "2"))
threads = int(os.environ.get("WEB_THREADS", "8"))
keepalive = 120
timeout = 30
graceful_timeout = 10
accesslog = os.environ.get("ACCESS_LOG") or None
errorlog = "-"
