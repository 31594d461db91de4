"""The soak: schedlens as deployed (gunicorn workers and threads, ``ingest_spool --follow``, PostgreSQL) under a
paced kube-scheduler-like load, with memory sampled, and afterwards every call checked against the database.

Used by ``benchmarks/soak.py`` (minutes, figures into ``benchmarks/results-reliability.md``) and by the 15-second
smoke in ``tests/faults/test_soak_smoke.py``. The caller has Django configured on the database the processes
write (``database_url``), migrated.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from dashboard.models import VerbCall
from dashboard.services.audit_chain import audit_chain_verify
from dashboard.spool import Spool
from scheduler_core.simulator import make_cluster
from tests.faults.load import LoadResult, PacedLoad
from tests.faults.services import Gunicorn, manage, rss_kib, wait_for


@dataclass
class Sample:
    at: float
    """Seconds since the load started."""
    worker_rss_kib: list[int]
    ingester_rss_kib: int
    spool_depth: int
    calls: int


@dataclass
class SoakReport:
    rate: float
    seconds: float
    threads: int
    nodes: int
    workers: int
    load: LoadResult
    samples: list[Sample]
    drain_seconds: float
    calls_asked: int
    calls_stored: int
    missing: int
    extra: int
    duplicated: int
    out_of_order: int
    chain_ok: bool
    chain_checked: int
    notes: list[str] = field(default_factory=list)

    @property
    def non_2xx(self) -> int:
        return len(self.load.non_2xx)

    @property
    def server_errors(self) -> int:
        return sum(1 for call in self.load.calls if call.status >= 500)

    def rss_mib(self, part: slice) -> float:
        """Mean total RSS of the gunicorn workers over a slice of the samples taken under load."""
        loaded = [s for s in self.samples if s.at <= self.seconds][part]
        if not loaded:
            return 0.0
        return sum(sum(s.worker_rss_kib) for s in loaded) / len(loaded) / 1024

    def summary(self) -> dict[str, object]:
        calls = self.load.calls
        first = self.rss_mib(slice(1, max(2, len(self.samples) // 5)))
        last = self.rss_mib(slice(-max(1, len(self.samples) // 5), None))
        return {
            "rate_pods_per_second": self.rate,
            "seconds": round(self.seconds, 1),
            "pods": self.load.pods,
            "load_seconds_taken": round(self.load.seconds, 1),
            "achieved_pods_per_second": round(self.load.pods / self.load.seconds, 1) if self.load.seconds else 0.0,
            "calls": len(calls),
            "non_2xx": self.non_2xx,
            "server_errors_5xx": self.server_errors,
            "scheduling_errors": len(self.load.errors),
            "p50_ms": round(self.load.latency(0.50) * 1000, 2),
            "p99_ms": round(self.load.latency(0.99) * 1000, 2),
            "max_ms": round(self.load.latency(1.0) * 1000, 1),
            "max_schedule_lag_s": round(self.load.max_lag_seconds, 3),
            "max_spool_depth": max((s.spool_depth for s in self.samples), default=0),
            "drain_seconds_after_load": round(self.drain_seconds, 1),
            "calls_stored": self.calls_stored,
            "records_missing": self.missing,
            "records_extra": self.extra,
            "records_duplicated": self.duplicated,
            "records_out_of_order": self.out_of_order,
            "chain_ok": self.chain_ok,
            "chain_checked": self.chain_checked,
            "worker_rss_mib_early": round(first, 1),
            "worker_rss_mib_late": round(last, 1),
            "worker_rss_growth_mib": round(last - first, 1),
            "ingester_rss_mib_max": round(max((s.ingester_rss_kib for s in self.samples), default=0) / 1024, 1),
        }


def run_soak(
    *,
    database_url: str,
    workdir: Path,
    seconds: float,
    rate: float,
    threads: int = 4,
    nodes: int = 50,
    workers: int = 2,
    sample_every: float = 5.0,
    drain_timeout: float = 3600.0,
    progress: bool = False,
) -> SoakReport:
    cluster = make_cluster(nodes)
    cluster_file = workdir / "cluster.json"
    cluster_file.write_text(json.dumps(cluster.document()))
    env = {
        "DATABASE_URL": database_url,
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "SCHEDLENS_SPOOL_DIR": str(workdir / "spool"),
        "SCHEDLENS_INGEST_IN_PROCESS": "false",
        "SCHEDLENS_BIND_MODE": "simulated",
        "SCHEDLENS_CLUSTER_SOURCE": "file",
        "SCHEDLENS_CLUSTER_FILE": str(cluster_file),
        "SCHEDLENS_CONFIG": "",
        "SCHEDLENS_TRAFFIC_BACKEND": "inprocess",
        "PROMETHEUS_URL": "",
        "PROMETHEUS_MULTIPROC_DIR": str(workdir / "metrics"),
    }
    (workdir / "metrics").mkdir(exist_ok=True)
    server = Gunicorn(env, workdir / "gunicorn.log", workers=workers)
    ingester = manage(["ingest_spool", "--follow"], env, workdir / "ingest.log")
    spool = Spool(env["SCHEDLENS_SPOOL_DIR"])
    samples: list[Sample] = []
    stop_sampling = threading.Event()
    load = PacedLoad(f"{server.url}/extender/default", cluster, rate=rate, duration=seconds, threads=threads)

    def sample() -> None:
        began = time.monotonic()
        while True:
            try:
                samples.append(
                    Sample(
                        at=time.monotonic() - began,
                        worker_rss_kib=[rss_kib(pid) for pid in server.workers()],
                        ingester_rss_kib=rss_kib(ingester.pid),
                        spool_depth=spool.depth(),
                        calls=load.calls_so_far(),
                    )
                )
                if progress:
                    last = samples[-1]
                    print(
                        f"  t={last.at:6.0f}s calls={last.calls:7d} spool={last.spool_depth:7d} "
                        f"rss={[k // 1024 for k in last.worker_rss_kib]} MiB",
                        flush=True,
                    )
            except (OSError, ValueError):
                pass  # a process between restarts; the next sample sees it
            if stop_sampling.wait(sample_every):
                return

    sampler = threading.Thread(target=sample, name="soak-sampler", daemon=True)
    try:
        sampler.start()
        result = load.start().join(timeout=seconds + 300)
        drained_at = time.monotonic()
        wait_for(lambda: spool.depth() == 0, what="the ingester to drain the spool", timeout=drain_timeout, interval=1)
        drain = time.monotonic() - drained_at
    finally:
        stop_sampling.set()
        sampler.join(timeout=sample_every + 5)
        load.stop.set()
        ingester.stop()
        server.stop()
    return _verify(result, samples, drain, rate=rate, seconds=seconds, threads=threads, nodes=nodes, workers=workers)


def _verify(result: LoadResult, samples: list[Sample], drain: float, **run: float) -> SoakReport:
    asked = Counter((call.uid, call.verb) for call in result.calls if call.status == 200)
    stored_rows = list(VerbCall.objects.values_list("id", "cycle__pod_uid", "verb").iterator(chunk_size=10_000))
    stored = Counter((uid, verb) for _, uid, verb in stored_rows)
    ids = {(uid, verb): call_id for call_id, uid, verb in stored_rows}
    out_of_order = 0
    for thread in sorted({call.thread for call in result.calls}):
        previous = 0
        for call in (c for c in result.calls if c.thread == thread and c.status == 200):
            call_id = ids.get((call.uid, call.verb), 0)
            if call_id and call_id < previous:
                out_of_order += 1
            previous = max(previous, call_id)
    chain = audit_chain_verify()
    return SoakReport(
        rate=run["rate"],
        seconds=run["seconds"],
        threads=int(run["threads"]),
        nodes=int(run["nodes"]),
        workers=int(run["workers"]),
        load=result,
        samples=samples,
        drain_seconds=drain,
        calls_asked=sum(asked.values()),
        calls_stored=len(stored_rows),
        missing=sum((asked - stored).values()),
        extra=sum((stored - asked).values()),
        duplicated=sum(count - 1 for count in stored.values() if count > 1),
        out_of_order=out_of_order,
        chain_ok=chain.ok,
        chain_checked=chain.checked,
    )
