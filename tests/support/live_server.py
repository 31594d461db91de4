"""Start schedlens under gunicorn in a subprocess, as production runs it, for tests that need real HTTP."""

from __future__ import annotations

import os
import queue
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.support.paths import REPO
from tests.support.processes import free_port


def start_script(name: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """``scripts/<name>`` as an operator starts it (``make run``, ``make serve``): its own process group, so a test
    can stop it and everything it started as Ctrl-C would, with its output read by :func:`read_until`."""
    return subprocess.Popen(
        ["bash", str(REPO / "scripts" / name)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def read_until(process: subprocess.Popen[str], marker: str, deadline: float) -> str:
    """The process's output up to the line holding ``marker``; fails at ``deadline`` or when the process exits."""
    assert process.stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout or ()], daemon=True).start()
    seen: list[str] = []
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=min(left, 1.0))
        except queue.Empty:
            if process.poll() is not None and lines.empty():
                break  # the process exited
            continue
        seen.append(line)
        if marker in line:
            return "".join(seen)
    raise AssertionError(f"no {marker!r} (exit status {process.poll()}):\n{''.join(seen)}")


class LiveServer:
    def __init__(
        self,
        env: dict[str, str],
        *,
        workers: int = 1,
        ssl_context: ssl.SSLContext | None = None,
        app: str = "config.wsgi:application",
    ) -> None:
        """``ssl_context``: the server is started with TLS (by ``env``); the client side used to probe it. ``app``: the
        WSGI application gunicorn serves with the production configuration (it must answer ``GET /readyz``)."""
        self.port = free_port()
        self.ssl_context = ssl_context
        self.url = f"{'https' if ssl_context else 'http'}://127.0.0.1:{self.port}"
        full_env = {**os.environ, **env, "PORT": str(self.port), "WEB_WORKERS": str(workers)}
        gunicorn = Path(sys.executable).with_name("gunicorn")
        self.process = subprocess.Popen(
            [str(gunicorn), "--config", "python:config.gunicorn_conf", app],
            cwd=REPO,
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready()

    def _wait_ready(self, deadline_seconds: float = 30.0) -> None:
        deadline = time.monotonic() + deadline_seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                output = self.process.stdout.read().decode(errors="replace") if self.process.stdout else ""
                raise RuntimeError(f"schedlens exited with {self.process.returncode}:\n{output}")
            try:
                with urllib.request.urlopen(f"{self.url}/readyz", timeout=1, context=self.ssl_context) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.05)  # polling for start-up, bounded by the deadline
        self.stop()
        raise RuntimeError("schedlens did not become ready within 30 s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
