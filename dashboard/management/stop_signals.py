"""How a long-running command learns it is to stop: an Event set on SIGINT or SIGTERM.

The signal handler does nothing itself: Python writes each caught signal's number to the wakeup socket, and a thread
reading it sets the Event. Setting the Event in the handler deadlocked: Ctrl-C reaches the whole process group of
``make run`` or ``make serve`` and their traps then send SIGTERM, so a second signal could interrupt the first
handler inside the Event's non-reentrant lock, and the command (and the script waiting for it) never ended.
"""

from __future__ import annotations

import signal
import socket
import threading

_wakeup: list[socket.socket] = []
"""The wakeup socket's two ends, open for the process's life: Python writes to one whenever a signal arrives."""


def stop_on_signals() -> threading.Event:
    """Call once, from the main thread, before the command's loop."""
    stop = threading.Event()
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    _wakeup.extend((reader, writer))
    signal.set_wakeup_fd(writer.fileno())
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: None)

    def relay() -> None:
        reader.recv(1)
        stop.set()

    threading.Thread(target=relay, daemon=True, name="schedlens-stop-on-signals").start()
    return stop
