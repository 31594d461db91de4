"""A threaded loopback TCP proxy that a test switches between passing, hanging, resetting and refusing.

Put it in front of a real service (PostgreSQL, Redis, …) and point the process under test at the proxy's port;
the service itself is never touched, so the suite's shared services stay up for everyone else.

Modes (``proxy.mode = …``, effective within ``POLL_SECONDS``):

- ``pass``: bytes flow both ways;
- ``hang``: connections stay open and new ones are accepted, but nothing is forwarded in either direction (a
  frozen server or a black-holed network: the kernel still acknowledges, the peer just never answers); what
  was sent meanwhile is delivered when the mode goes back to ``pass``;
- ``reset``: every open connection is reset (RST), and each new one is reset as soon as it is accepted;
- ``refuse``: the listening socket is closed (connects get ECONNREFUSED) and open connections are reset; the
  same port is listened on again when the mode changes.

Nothing here imports pytest.
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
from typing import Literal

Mode = Literal["pass", "hang", "reset", "refuse"]
POLL_SECONDS = 0.05
CHUNK = 65536


def _reset(sock: socket.socket) -> None:
    """Close with RST (SO_LINGER 0), as a crashed or rebooted peer does."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


class TcpProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._mode: Mode = "pass"
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._listener: socket.socket | None = None
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self.accepted = 0
        """Connections accepted so far (in any mode)."""

    # --- lifecycle ---------------------------------------------------------------------------------------

    def start(self) -> TcpProxy:
        self._listen()
        thread = threading.Thread(target=self._accept_loop, name="tcp-proxy-accept", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stopping.set()
        with self._changed:
            self._changed.notify_all()
            listener, self._listener = self._listener, None
            pairs, self._pairs = self._pairs, []
        if listener is not None:
            listener.close()
        for client, upstream in pairs:
            _reset(client)
            _reset(upstream)
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- mode ----------------------------------------------------------------------------------------------

    @property
    def mode(self) -> Mode:
        return self._mode

    @mode.setter
    def mode(self, mode: Mode) -> None:
        with self._changed:
            previous, self._mode = self._mode, mode
            pairs = list(self._pairs) if mode in ("reset", "refuse") else []
            if mode in ("reset", "refuse"):
                self._pairs = []
            listener = self._listener if mode == "refuse" else None
            if listener is not None:
                self._listener = None
            self._changed.notify_all()
        for client, upstream in pairs:
            _reset(client)
            _reset(upstream)
        if listener is not None:
            listener.close()
        if previous == "refuse" and mode != "refuse":
            self._listen()

    # --- internals -----------------------------------------------------------------------------------------

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        listener.settimeout(POLL_SECONDS)
        self.port = listener.getsockname()[1]
        with self._changed:
            self._listener = listener
            self._changed.notify_all()

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            with self._changed:
                while self._listener is None and not self._stopping.is_set():
                    self._changed.wait(POLL_SECONDS)
                listener = self._listener
            if listener is None:
                continue
            try:
                client, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted += 1
            if self._mode in ("reset", "refuse"):
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                _reset(client)
                continue
            with self._changed:
                self._pairs.append((client, upstream))
            thread = threading.Thread(target=self._pump, args=(client, upstream), name="tcp-proxy-pump", daemon=True)
            thread.start()

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        peers = {client: upstream, upstream: client}
        try:
            while not self._stopping.is_set():
                if self._mode == "hang":
                    with self._changed:
                        self._changed.wait(POLL_SECONDS)
                    continue
                try:
                    readable, _, _ = select.select(list(peers), [], [], POLL_SECONDS)
                except (OSError, ValueError):  # a socket was closed under us (reset/refuse/stop)
                    return
                if self._mode == "hang":
                    continue
                for sock in readable:
                    try:
                        data = sock.recv(CHUNK)
                    except OSError:
                        return
                    if not data:
                        return
                    try:
                        peers[sock].sendall(data)
                    except OSError:
                        return
        finally:
            with self._changed:
                if (client, upstream) in self._pairs:
                    self._pairs.remove((client, upstream))
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.close()
