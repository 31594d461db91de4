"""Real processes for the tests: gunicorn, the spool ingester, Celery workers, a private redis-server; a free port
and polling with a deadline for whatever they start.

Each writes its output to a log file (never an unread pipe, which would block a chatty process once full) and is
stopped by its own pid. Nothing here imports pytest or Django settings: callers pass environments and URLs.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import sqlite3
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TypeVar

import redis

from tests.support.paths import REPO

if TYPE_CHECKING:
    from dashboard.spool import Spool

BIN = Path(sys.executable).parent
T = TypeVar("T")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(predicate: Callable[[], T | None], *, what: str, timeout: float = 20.0, interval: float = 0.02) -> T:
    """Poll ``predicate`` until it returns something truthy; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)  # poll interval, bounded by the deadline above


class SpoolIds(NamedTuple):
    oldest: int
    """The oldest record's id; above every id so far when the spool is empty."""
    newest: int
    """The id of the newest record ever appended (0 before the first)."""


def spool_ids(spool: Spool) -> SpoolIds:
    """Where the spool stands, read from its file: record ids only ever grow (AUTOINCREMENT)."""
    with contextlib.closing(sqlite3.connect(f"file:{spool.path}?mode=ro", uri=True, timeout=10)) as conn:
        oldest, newest = conn.execute(
            "SELECT (SELECT min(id) FROM events), (SELECT seq FROM sqlite_sequence WHERE name = 'events')"
        ).fetchone()
    newest = int(newest or 0)
    return SpoolIds(newest + 1 if oldest is None else int(oldest), newest)


def wait_caught_up(spool: Spool, *, timeout: float = 60.0) -> None:
    """Wait for every record spooled until now to have left the spool. Under a load that goes on, the spool is
    empty only between two pods; an ingester stuck (after an outage, a crash) never gets past this."""
    newest = spool_ids(spool).newest
    wait_for(lambda: spool_ids(spool).oldest > newest, what="the ingester to catch up", timeout=timeout)


def database_url(db: Mapping[str, object], *, port: int | None = None) -> str:
    """A ``DATABASE_URL`` for Django's ``DATABASES['default']`` dict (the test database), optionally via ``port``."""
    user = str(db.get("USER") or "")
    password = str(db.get("PASSWORD") or "")
    auth = user + (f":{password}" if password else "")
    host = str(db.get("HOST") or "127.0.0.1")
    return f"postgres://{auth}@{host}:{port or db.get('PORT') or 5432}/{db['NAME']}"


# --- processes ---------------------------------------------------------------------------------------------


def children(pid: int) -> list[int]:
    """Direct children of ``pid``, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may contain spaces and parentheses, so split after the last ")".
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return sorted(found)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Process:
    """A subprocess with its output in ``log``; ``stop`` sends SIGTERM to it alone, then SIGKILL if it lingers."""

    def __init__(self, command: Sequence[str], env: Mapping[str, str], log: Path, cwd: Path = REPO) -> None:
        self.command = list(command)
        self.log = log
        self._handle = log.open("ab")
        self.process = subprocess.Popen(
            self.command,
            cwd=cwd,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            stdout=self._handle,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def output(self) -> str:
        if not self._handle.closed:
            self._handle.flush()
        return self.log.read_text(errors="replace")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.alive():
            os.kill(self.process.pid, sig)
            if sig in (signal.SIGKILL, signal.SIGTERM):
                self.process.wait(timeout=15)

    def stop(self, timeout: float = 15.0) -> None:
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._handle.close()


class Gunicorn(Process):
    """schedlens under gunicorn as deployed (``config.gunicorn_conf``), ready once ``/readyz`` answers 200."""

    def __init__(
        self,
        env: Mapping[str, str],
        log: Path,
        *,
        workers: int = 1,
        threads: int = 8,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """``ssl_context``: the server serves TLS (``SCHEDLENS_TLS_CERT`` in ``env``); how clients verify it."""
        self.port = free_port()
        self.ssl_context = ssl_context
        self.url = f"{'https' if ssl_context else 'http'}://127.0.0.1:{self.port}"
        full = {**env, "PORT": str(self.port), "WEB_WORKERS": str(workers), "WEB_THREADS": str(threads)}
        gunicorn = [str(BIN / "gunicorn"), "--config", "python:config.gunicorn_conf"]
        super().__init__([*gunicorn, "config.wsgi:application"], full, log)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 45.0) -> None:
        def ready() -> bool:
            if not self.alive():
                raise RuntimeError(f"gunicorn exited with {self.process.returncode}:\n{self.output()[-4000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/readyz", timeout=1, context=self.ssl_context) as response:
                    return bool(response.status == 200)
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                return False

        try:
            wait_for(ready, what=f"gunicorn on port {self.port} to be ready", timeout=timeout, interval=0.05)
        except AssertionError:
            self.stop()
            raise

    def workers(self) -> list[int]:
        return children(self.pid)


def manage(args: Sequence[str], env: Mapping[str, str], log: Path) -> Process:
    return Process([sys.executable, "manage.py", *args], env, log)


def django_says(env: Mapping[str, str], code: str, *, timeout: float = 120) -> str:
    """What ``code`` prints in ``manage.py shell`` run with exactly ``env``, as a process started there reads its
    settings; the shell must succeed."""
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", code],
        cwd=REPO,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def celery_worker(args: Sequence[str], env: Mapping[str, str], log: Path) -> Process:
    command = [str(BIN / "celery"), "-A", "config", "worker", "--loglevel=INFO", "--without-heartbeat"]
    command += ["--without-mingle", "--without-gossip", *args]
    return Process(command, env, log)


class PrivateRedis:
    """A ``redis-server`` of the test's own on a free port, without persistence (a restart starts empty)."""

    def __init__(self, workdir: Path, *args: str) -> None:
        self.workdir = workdir
        self.args = list(args)
        self.port = free_port()
        self.server: Process | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self, **kwargs: object) -> redis.Redis:
        return redis.Redis.from_url(self.url, **kwargs)  # type: ignore[arg-type]

    def start(self) -> PrivateRedis:
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        command += ["--appendonly", "no", *self.args]
        self.server = Process(command, {}, self.workdir / f"redis-{self.port}.log")
        client = self.client(socket_connect_timeout=0.2)

        def answers() -> bool:
            try:
                return bool(client.ping())
            except redis.RedisError:
                return False

        wait_for(answers, what=f"redis-server on port {self.port}", timeout=10.0)
        client.close()
        return self

    def kill(self) -> None:
        if self.server is not None:
            self.server.kill(signal.SIGKILL)
            self.server.stop()
            self.server = None


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> object:
    """Mount a tmpfs of ``size`` at ``path`` (needs root); unmounted at exit."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True, capture_output=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


def production_environment(directory: Path, cluster_file: Path) -> dict[str, str]:
    """What a web replica runs with in the cluster, minus the cluster: DEBUG off, a real secret key, the ingest
    in its own process, simulated binds against the synthetic cluster, built-in profile, synthetic traffic."""
    return {
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "SCHEDLENS_SPOOL_DIR": str(directory / "spool"),
        "SCHEDLENS_INGEST_IN_PROCESS": "false",
        "SCHEDLENS_BIND_MODE": "simulated",
        "SCHEDLENS_CLUSTER_FILE": str(cluster_file),
        "SCHEDLENS_CLUSTER_SOURCE": "file",
        "SCHEDLENS_CONFIG": "",
        "SCHEDLENS_TRAFFIC_BACKEND": "inprocess",
        "PROMETHEUS_URL": "",
        # As deployed: gunicorn's workers meet in an empty directory (an empty value would mean the cwd).
        "PROMETHEUS_MULTIPROC_DIR": str(_empty(directory / "prometheus-multiproc")),
    }


def _empty(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
