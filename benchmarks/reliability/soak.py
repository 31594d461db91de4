"""Soak: schedlens as deployed under kube-scheduler-like load for minutes, then every call checked in the database.

gunicorn (``--workers`` × 8 threads, DEBUG off) and ``manage.py ingest_spool --follow`` against a fresh PostgreSQL
database; the simulator's client (``tests/support/load.py``: one keep-alive connection per thread, filter →
prioritize → bind per pod) paced at ``--rate`` pods per second on a bounded schedule that stops by itself after
``--minutes``. Memory (RSS of each gunicorn worker and of the ingester) and the spool depth are sampled every
``--sample-every`` seconds. Afterwards, once the spool is drained: every answered call must be in the database
exactly once, each client thread's calls in the order it made them, and the hash chain must verify.

    .venv/bin/python -m benchmarks.reliability.soak --minutes 10 --rate 200 --write benchmarks/results-reliability.md

``--replicas N`` (N > 1) runs the StatefulSet's layout: N × (gunicorn with ``--workers`` workers +
``ingest_spool --follow``, each pair on its own spool), one database, behind one round-robin per-connection
balancer; each client thread alternates two keep-alive connections, so one pod's calls reach different replicas.
Checked in addition: each pod has exactly one cycle holding all its calls, some of those cycles were answered by
two replicas, every stored call names a process of some replica; the order is checked per thread and replica (two
ingesters do not order one thread's calls across replicas). ``--write`` then fills the ``soak-replicas`` section.

    .venv/bin/python -m benchmarks.reliability.soak --replicas 2 --workers 1 --minutes 10 --rate 200 \
        --write benchmarks/results-reliability.md

The database (``--database``, default ``postgres://postgres@127.0.0.1:5432/schedlens_soak``) is dropped and
created again. Exit status 1 when any check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit


def recreate(database_url: str) -> None:
    import psycopg

    parts = urlsplit(database_url)
    name = parts.path.lstrip("/")
    admin = parts._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


def marker(args: argparse.Namespace) -> str:
    """The section's name in the results file: one replica and several each keep their own."""
    return "soak" if args.replicas == 1 else "soak-replicas"


def section(summary: dict[str, object], failures: list[str], args: argparse.Namespace) -> str:
    rows = "\n".join(f"| {key} | {value} |" for key, value in summary.items())
    replicas = f" --replicas {args.replicas}" if args.replicas > 1 else ""
    verdict = "all checks passed" if not failures else "CHECKS FAILED: " + "; ".join(failures)
    return (
        f"<!-- {marker(args)}:begin -->\n"
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.node()} ({os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}): `.venv/bin/python -m benchmarks.reliability.soak{replicas} "
        f"--minutes {args.minutes:g} "
        f"--rate {args.rate:g} --threads {args.threads} --workers {args.workers} --nodes {args.nodes}` — "
        f"**{verdict}**.\n\n"
        f"| figure | value |\n| --- | --- |\n{rows}\n"
        f"<!-- {marker(args)}:end -->"
    )


def write_section(path: Path, text: str, name: str = "soak") -> None:
    """Replace the section between ``<!-- name:begin -->`` and ``<!-- name:end -->``; append it when absent."""
    begin, finish = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    current = path.read_text(encoding="utf-8") if path.exists() else ""
    if begin not in current:
        current = current.rstrip("\n") + ("\n\n" if current else "") + f"{begin}\n{finish}\n"
    start, end = current.index(begin), current.index(finish) + len(finish)
    path.write_text(current[:start] + text + current[end:], encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.reliability.soak",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=200.0, help="pods per second")
    parser.add_argument("--threads", type=int, default=4, help="client connections")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (of each replica)")
    parser.add_argument(
        "--replicas", type=int, default=1, help="web processes, each with its own ingester, behind one balancer"
    )
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--sample-every", type=float, default=5.0)
    parser.add_argument("--database", default="postgres://postgres@127.0.0.1:5432/schedlens_soak")
    parser.add_argument("--write", type=Path, help="replace the soak (or soak-replicas) section of this file")
    parser.add_argument("--json", type=Path, help="also write the figures and the samples here")
    args = parser.parse_args()

    recreate(args.database)
    os.environ["DATABASE_URL"] = args.database
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from tests.support.soak import run_soak

    call_command("migrate", verbosity=0)
    workdir = Path(tempfile.mkdtemp(prefix="schedlens-soak-"))
    replicas = f", {args.replicas} replicas" if args.replicas > 1 else ""
    print(f"soak: {args.minutes:g} min at {args.rate:g} pods/s{replicas}; logs in {workdir}", flush=True)
    report = run_soak(
        database_url=args.database,
        workdir=workdir,
        seconds=args.minutes * 60,
        rate=args.rate,
        threads=args.threads,
        nodes=args.nodes,
        workers=args.workers,
        replicas=args.replicas,
        sample_every=args.sample_every,
        progress=True,
    )
    summary = report.summary()
    print(json.dumps(summary, indent=2))
    if args.json:
        samples = [vars(s) for s in report.samples]
        args.json.write_text(json.dumps({"summary": summary, "samples": samples}, indent=1))
    failures = report.failures
    for failure in failures:
        print(f"FAILED: {failure}", flush=True)
    if args.write:
        write_section(args.write, section(summary, failures, args), marker(args))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
