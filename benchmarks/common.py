"""Shared helpers of the benchmark studies: percentiles, machine facts, Markdown tables, scratch databases, and the
suite's phases with the child processes they run.

A phase that fails stops ``make bench`` with one message naming the phase and, for a child process, its command,
exit status and the end of its stderr: a bare ``CalledProcessError`` said none of that, and the child's traceback
was lost with its captured output.
"""

from __future__ import annotations

import collections
import contextlib
import os
import platform
import shlex
import statistics
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PY = ".venv/bin/python"
ADMIN_URL = os.environ.get("BENCH_ADMIN_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def p50(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def machine() -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f", {kib / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return (
        f"{platform.node()}: {os.cpu_count()} cores ({cpu}){memory}, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    return [row(*header), row(*(["---"] * len(header))), *(row(*r) for r in rows)]


def ms(value: float) -> str:
    return f"{value:.2f}" if value < 100 else f"{value:.0f}"


def database_url(name: str) -> str:
    return f"{ADMIN_URL.rsplit('/', 1)[0]}/{name}"


def recreate_database(name: str, *, drop_only: bool = False) -> str:
    import psycopg

    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if not drop_only:
            conn.execute(f'CREATE DATABASE "{name}"')
    return database_url(name)


def migrate(url: str) -> None:
    env = {**os.environ, "DATABASE_URL": url, "SCHEDLENS_INGEST_IN_PROCESS": "false"}
    subprocess.run([PY, "manage.py", "migrate", "--verbosity", "0"], cwd=REPO, env=env, check=True)


def parse_variant(text: str) -> tuple[Path, dict[str, str]]:
    """A variant of an A/B run: ``NAME=value[,NAME=value…]`` environment for its server, where ``checkout=DIR``
    names the schedlens checkout to run instead of this one (``benchmarks/ab.py``, ``benchmarks/cost``)."""
    env: dict[str, str] = {}
    for item in filter(None, text.split(",")):
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"--variant {text!r}: expected NAME=value[,NAME=value…], got {item!r}")
        env[name] = value
    checkout = Path(env.pop("checkout", str(REPO))).resolve()
    if server_modules(checkout) is None:
        raise SystemExit(f"--variant {text!r}: {checkout} is not a schedlens checkout")
    return checkout, env


def server_modules(checkout: Path) -> dict[str, str] | None:
    """The settings, gunicorn configuration and WSGI modules ``checkout`` serves with, None if it is no schedlens
    checkout. The project's configuration moved from ``dashboard/`` to ``config/``; an A/B of a change across that
    move runs a checkout from each side of it."""
    for package in ("config", "dashboard"):
        if (checkout / package / "gunicorn_conf.py").exists():
            return {
                "settings": f"{package}.settings",
                "gunicorn_conf": f"python:{package}.gunicorn_conf",
                "wsgi": f"{package}.wsgi:application",
            }
    return None


STDERR_TAIL_LINES = 40
"""How much of a failed child's stderr the failure repeats (all of it was shown as it came)."""


class PhaseFailed(Exception):
    """A phase's child process failed; the message holds its command, exit status and last stderr lines."""


def run_child(command: Sequence[str], *, cwd: Path) -> None:
    """Run ``command``: its stdout and stderr pass through as they come (long phases show progress), and the end of
    its stderr is kept so a failure can say why."""
    tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
    process = subprocess.Popen(command, cwd=cwd, stderr=subprocess.PIPE, text=True, errors="replace")
    stream = process.stderr
    assert stream is not None

    def relay() -> None:
        for line in stream:
            sys.stderr.write(line)
            tail.append(line)

    relay_thread = threading.Thread(target=relay, name="phase-stderr", daemon=True)
    relay_thread.start()
    code = process.wait()
    relay_thread.join()
    if code != 0:
        shown = "".join(tail).rstrip() or "(nothing on stderr)"
        raise PhaseFailed(f"`{shlex.join(command)}` exited with status {code}; the end of its stderr:\n{shown}")


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Stop the suite with a message naming ``name`` when the phase raises (exit status 1)."""
    try:
        yield
    except PhaseFailed as exc:
        print(f"\nmake bench: the {name} phase failed: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    except Exception as exc:
        traceback.print_exc()
        print(f"\nmake bench: the {name} phase failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
