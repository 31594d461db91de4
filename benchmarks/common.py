"""Shared helpers of the benchmark scripts: percentiles, machine facts, Markdown tables, scratch databases."""

from __future__ import annotations

import os
import platform
import statistics
from collections.abc import Sequence
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
    import subprocess

    env = {**os.environ, "DATABASE_URL": url, "SCHEDLENS_INGEST_IN_PROCESS": "false"}
    subprocess.run([PY, "manage.py", "migrate", "--verbosity", "0"], cwd=REPO, env=env, check=True)


def parse_variant(text: str) -> tuple[Path, dict[str, str]]:
    """A variant of an A/B run: ``NAME=value[,NAME=value…]`` environment for its server, where ``checkout=DIR``
    names the schedlens checkout to run instead of this one (``benchmarks/ab.py``, ``benchmarks/cost_per_pod.py``)."""
    env: dict[str, str] = {}
    for item in filter(None, text.split(",")):
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"--variant {text!r}: expected NAME=value[,NAME=value…], got {item!r}")
        env[name] = value
    checkout = Path(env.pop("checkout", str(REPO))).resolve()
    if not (checkout / "config" / "gunicorn_conf.py").exists():
        raise SystemExit(f"--variant {text!r}: {checkout} is not a schedlens checkout")
    return checkout, env
