"""gunicorn's threaded worker, with a kept-alive connection's thread waiting briefly for its next request.

kube-scheduler sends prioritize the moment filter's answer arrives, on the same keep-alive connection. The
stock gthread worker hands every answered connection back to its main thread (a pipe write, a poller
registration), which then sees the next request and submits it to the thread pool again: three thread
handoffs and half a dozen system calls between the request arriving and a thread reading it, all inside
kube-scheduler's scheduling cycle, and slower still when the GIL is busy with a concurrent bind.

Here the thread that wrote an answer keeps the connection for ``WEB_KEEPALIVE_LINGER_MS`` (gunicorn_conf.py)
and serves the next request itself when it arrives within that time; otherwise the connection goes back to
the main thread's poller exactly as before. A lingering thread sleeps in ``poll``: it costs no CPU, only its slot
in the pool. It lingers only while no other request waits for a thread, and stops within a millisecond once one
does: busy clients on a few connections cannot keep the pool from a request on another (stock gthread queues every
request behind the others), and a bind's thread does not sit out the linger while a filter waits.
"""

from __future__ import annotations

import os
import select
import threading
import time
from typing import Any

from gunicorn.workers.gthread import ThreadWorker

POLL_SLICE_MS = 1.0
"""How often a lingering thread looks whether a request waits for a thread (it then stops lingering)."""


class LingeringThreadWorker(ThreadWorker):
    """``gthread``, plus :meth:`handle` serving a connection's back-to-back requests on the same thread."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.linger_ms = linger_ms(os.environ)
        self.waiting = 0
        """Requests handed to the pool that no thread has started yet."""
        self._waiting_lock = threading.Lock()

    def enqueue_req(self, conn: Any) -> None:
        with self._waiting_lock:
            self.waiting += 1
        super().enqueue_req(conn)

    def handle(self, conn: Any) -> Any:
        with self._waiting_lock:
            self.waiting -= 1
        keepalive = super().handle(conn)
        while keepalive is True and self.alive and self._next_request_within(conn):
            keepalive = super().handle(conn)
        return keepalive

    def _next_request_within(self, conn: Any) -> bool:
        """Whether the connection has bytes to read (a request, or the client closing) within the linger, while no
        other request waits for a thread."""
        if self.linger_ms <= 0 or conn.parser is None or getattr(conn, "is_http2", False):
            return False  # (an HTTP/2 connection was served whole already)
        if conn.parser.unreader.buf.getvalue():  # read ahead with the previous body: the next request is here
            return True
        pending = getattr(conn.sock, "pending", None)  # TLS: bytes already decrypted wait in the SSL object
        if pending is not None and pending():
            return True
        poller = select.poll()
        poller.register(conn.sock, select.POLLIN)
        deadline = time.monotonic() + self.linger_ms / 1000
        while not self.waiting:
            left_ms = (deadline - time.monotonic()) * 1000
            if left_ms <= 0:
                return False
            if poller.poll(min(left_ms, POLL_SLICE_MS)):
                return True
        return False


def linger_ms(environ: Any) -> float:
    """``WEB_KEEPALIVE_LINGER_MS`` (default 5; 0 turns lingering off, the stock gthread behaviour)."""
    text = environ.get("WEB_KEEPALIVE_LINGER_MS", "") or "5"
    try:
        value = float(text)
    except ValueError:
        raise RuntimeError(f"WEB_KEEPALIVE_LINGER_MS must be a number of milliseconds, got {text!r}") from None
    if not 0 <= value <= 1000:
        raise RuntimeError(f"WEB_KEEPALIVE_LINGER_MS must be between 0 and 1000 milliseconds, got {text!r}")
    return value
