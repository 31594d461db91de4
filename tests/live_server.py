"""Start schedlens under gunicorn in a subprocess, as production runs it, for tests that need real HTTP."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LiveServer:
    def __init__(
        self,
        env: dict[str, str],
        *,
        workers: int = 1,
        ssl_context: ssl.SSLContext | None = None,
        app: str = "dashboard.wsgi:application",
    ) -> None:
        """``ssl_context``: the server is started with TLS (by ``env``); the client side used to probe it. ``app``: the
        WSGI application gunicorn serves with the production configuration (it must answer ``GET /readyz``)."""
        self.port = free_port()
        self.ssl_context = ssl_context
        self.url = f"{'https' if ssl_context else 'http'}://127.0.0.1:{self.port}"
        full_env = {**os.environ, **env, "PORT": str(self.port), "WEB_WORKERS": str(workers)}
        gunicorn = Path(sys.executable).with_name("gunicorn")
        self.process = subprocess.Popen(
            [str(gunicorn), "--config", "python:dashboard.gunicorn_conf", app],
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
