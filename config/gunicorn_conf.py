"""gunicorn settings for the extender: threads for concurrent binds, keep-alive longer than Go's idle 90 s.

kube-scheduler keeps idle connections for 90 s; a server that closes them sooner races a new POST on the
same socket and the filter fails with EOF (protocol doc §2.4). So keep-alive is 120 s, which needs the
threaded worker (the sync worker closes every connection).
"""

import os
import ssl
from typing import Any

bind = f"{os.environ.get('HOST', '127.0.0.1')}:{os.environ.get('PORT', '8000')}"
# gthread, whose thread waits WEB_KEEPALIVE_LINGER_MS (default 5) for a connection's next request, while no other
# request waits for a thread, before handing it back to the poller: prioritize follows filter at once
# (config/gunicorn_worker.py).
worker_class = "config.gunicorn_worker.LingeringThreadWorker"
workers = int(os.environ.get("WEB_WORKERS", "2"))
threads = int(os.environ.get("WEB_THREADS", "8"))
keepalive = 120
timeout = 30
graceful_timeout = 10
accesslog = os.environ.get("ACCESS_LOG") or None
errorlog = "-"
# gunicorn's control socket (25+) lives at one path per user, $XDG_RUNTIME_DIR or ~/.gunicorn, and each server
# unlinks whatever is there as it starts and stops: two servers on one host (make run beside make serve, two
# replicas) would take each other's. The supervisor (Kubernetes, make serve) manages schedlens, never gunicornc.
control_socket_disable = True

# TLS for the extender endpoint (kube-scheduler's extender `tlsConfig`): SCHEDLENS_TLS_CERT + SCHEDLENS_TLS_KEY
# serve https; SCHEDLENS_TLS_CLIENT_CA also requires every client to present a certificate signed by that CA
# (mutual TLS: the scheduler's `tlsConfig.certFile`/`keyFile`). The urlPrefix must then say https://.
_tls_cert = os.environ.get("SCHEDLENS_TLS_CERT", "")
_tls_key = os.environ.get("SCHEDLENS_TLS_KEY", "")
_tls_client_ca = os.environ.get("SCHEDLENS_TLS_CLIENT_CA", "")
if _tls_client_ca and not _tls_cert:
    raise RuntimeError("SCHEDLENS_TLS_CLIENT_CA needs SCHEDLENS_TLS_CERT (and SCHEDLENS_TLS_KEY): TLS is off without")
if _tls_cert:
    certfile = _tls_cert
    keyfile = _tls_key or None  # None: the key is in the certificate file
    if _tls_client_ca:
        ca_certs = _tls_client_ca
        cert_reqs = ssl.CERT_REQUIRED


def on_starting(server: object) -> None:
    """Start the metrics of every worker afresh: prometheus-client's multiprocess directory must be empty when the
    server starts (a container restarted in the same pod finds its last run's files in the emptyDir)."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory and os.path.isdir(directory):
        for name in os.listdir(directory):
            if name.endswith(".db"):
                os.remove(os.path.join(directory, name))


def child_exit(server: object, worker: Any) -> None:
    """A worker that exited keeps its counters in the sums, and drops its live gauges (prometheus-client's docs)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


def post_worker_init(worker: object) -> None:
    """Freeze what the worker built at boot out of the cyclic garbage collector's way.

    By now the worker holds Django, the profiles and the node view (``config.wsgi`` builds the runtime at
    import): hundreds of thousands of long-lived objects that every full collection would walk again. A
    1000-node call allocates ~100,000 containers, enough to trigger collections mid-call; with the boot heap
    frozen (``gc.freeze``: moved to a permanent generation, never scanned) a full collection costs what the
    request itself allocated, not the whole process. A larger first-generation threshold makes those
    collections rarer; the verbs create no reference cycles, so garbage is freed by reference counting anyway.
    """
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
