"""A loopback TCP balancer: one address in front of several replicas, each NEW connection to the next replica.

What a Kubernetes Service does for kube-scheduler's extender calls: the balancing is per connection, never per
request, so every request of one keep-alive connection reaches the same replica, and a client that holds several
connections reaches several replicas. Round-robin (kube-proxy picks at random) so that a test knows which
connection went where: ``assigned`` counts the connections given to each target.

Two threads per connection, each copying one direction with blocking reads: no polling, so an idle keep-alive
connection costs nothing. Nothing here imports pytest.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Sequence

CHUNK = 65536
ACCEPT_POLL_SECONDS = 0.1
"""How often the accept loop looks whether it was stopped."""


class RoundRobinBalancer:
    def __init__(self, target_ports: Sequence[int], target_host: str = "127.0.0.1") -> None:
        if not target_ports:
            raise ValueError("a balancer needs at least one target")
        self.targets = [(target_host, port) for port in target_ports]
        self.port = 0
        self.assigned = [0] * len(self.targets)
        """Connections given to each target so far."""
        self._next = 0
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._accepter: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> RoundRobinBalancer:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(256)
        listener.settimeout(ACCEPT_POLL_SECONDS)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._accepter = threading.Thread(target=self._accept_loop, name="balancer-accept", daemon=True)
        self._accepter.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._accepter is not None:
            self._accepter.join(timeout=5)
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            sockets, self._open = list(self._open), set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def __enter__(self) -> RoundRobinBalancer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except (TimeoutError, OSError):
                continue
            client.settimeout(None)
            # Accepted in the order the clients connected: the next target, whatever happens to this one.
            with self._lock:
                index = self._next
                self._next = (index + 1) % len(self.targets)
                self.assigned[index] += 1
            try:
                upstream = socket.create_connection(self.targets[index], timeout=5)
            except OSError:
                client.close()  # as a Service whose chosen endpoint refuses: the client sees the connection fail
                continue
            upstream.settimeout(None)
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._open.update((client, upstream))
            done = threading.Barrier(2, action=lambda c=client, u=upstream: self._close(c, u))
            for source, sink in ((client, upstream), (upstream, client)):
                copier = threading.Thread(target=self._copy, args=(source, sink, done), name="balancer-copy")
                copier.daemon = True
                copier.start()

    def _copy(self, source: socket.socket, sink: socket.socket, done: threading.Barrier) -> None:
        try:
            while True:
                data = source.recv(CHUNK)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        # Half-close, as a real proxy does: the other direction may still be answering.
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
        with contextlib.suppress(threading.BrokenBarrierError):
            done.wait(timeout=None)

    def _close(self, client: socket.socket, upstream: socket.socket) -> None:
        with self._lock:
            self._open.discard(client)
            self._open.discard(upstream)
        for sock in (client, upstream):
            with contextlib.suppress(OSError):
                sock.close()
