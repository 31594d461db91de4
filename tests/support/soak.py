"""The soak: schedlens as deployed (gunicorn workers and threads, ``ingest_spool --follow``, PostgreSQL) under a
paced kube-scheduler-like load, with memory sampled, and afterwards every call checked against the database.

Used by ``python -m benchmarks.reliability.soak`` (minutes, figures into ``benchmarks/results-reliability.md``) and
by the 15-second smokes in ``tests/faults/test_soak_smoke.py``. The caller has Django configured on the database the
processes write (``database_url``), migrated.

``replicas`` > 1 is the layout of the StatefulSet (docs/deploy.md): each replica a gunicorn and its own
``ingest_spool --follow`` on its own spool, all writing the one database, behind one address that balances per
connection (``tests/support/balancer.py``, as a Service does); each load thread holds two keep-alive connections
and takes them in turn, so a pod's calls are answered by different replicas and two ingesters store them. Which
replica answered a stored call is read from its ``server`` column (``host:pid`` of the gunicorn process that
answered), matched against the process ids of each replica's gunicorn.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from dashboard.audit.chain import audit_chain_verify
from dashboard.models import SchedulingCycle, VerbCall
from dashboard.spool import Spool
from scheduler_core.cli.simulator import make_cluster
from tests.support.balancer import RoundRobinBalancer
from tests.support.load import LoadResult, PacedLoad
from tests.support.processes import Gunicorn, Process, manage, rss_kib, wait_for


@dataclass
class Sample:
    at: float
    """Seconds since the load started."""
    worker_rss_kib: list[int]
    """Every gunicorn worker of every replica."""
    ingester_rss_kib: int
    """The largest ingester's."""
    spool_depth: int
    """All spools together."""
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
    replicas: int = 1
    pods_asked: int = 0
    """Pods with at least one call answered 200."""
    cycles: int = 0
    """Cycles stored for those pods."""
    pods_not_in_one_cycle: int = 0
    """Pods whose stored calls are not all in the pod's one and only cycle."""
    cross_replica_pods: int = 0
    """Pods whose stored calls were answered by at least two replicas: what the load made cross."""
    cross_replica_cycles: int = 0
    """Cycles whose calls were answered by at least two replicas: as many as such pods when correlation holds."""
    calls_by_replica: list[int] = field(default_factory=list)
    calls_unattributed: int = 0
    """Stored calls whose ``server`` is no process of any replica."""
    connections_by_replica: list[int] = field(default_factory=list)
    thread_order_crossings: int = 0
    """Calls stored before an earlier call of the same client thread (answered by another replica): expected with
    two ingesters, reported, not a failure."""

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
        figures: dict[str, object] = {
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
        if self.replicas > 1:
            figures |= {
                "replicas": self.replicas,
                "connections_by_replica": self.connections_by_replica,
                "calls_by_replica": self.calls_by_replica,
                "calls_unattributed": self.calls_unattributed,
                "pods_with_calls": self.pods_asked,
                "cycles": self.cycles,
                "pods_not_in_one_cycle": self.pods_not_in_one_cycle,
                "cross_replica_pods": self.cross_replica_pods,
                "cross_replica_cycles": self.cross_replica_cycles,
                "thread_order_crossings_across_replicas": self.thread_order_crossings,
            }
        return figures

    @property
    def failures(self) -> list[str]:
        """What failed, in words; empty when every check passed."""
        failed = []
        if self.non_2xx:
            failed.append(f"{self.non_2xx} calls not answered 2xx")
        if self.missing or self.extra or self.duplicated:
            failed.append(f"records missing {self.missing}, extra {self.extra}, duplicated {self.duplicated}")
        if self.out_of_order:
            failed.append(f"{self.out_of_order} records out of order")
        if not self.chain_ok:
            failed.append("the hash chain does not verify")
        if self.replicas > 1:
            if self.pods_not_in_one_cycle or self.cycles != self.pods_asked:
                failed.append(
                    f"{self.pods_not_in_one_cycle} pods not in exactly one cycle "
                    f"({self.cycles} cycles for {self.pods_asked} pods)"
                )
            if self.calls_unattributed:
                failed.append(f"{self.calls_unattributed} stored calls answered by no known replica process")
            if not self.cross_replica_pods:
                failed.append("no pod was answered by two replicas: the run proves no correlation")
            elif self.cross_replica_cycles != self.cross_replica_pods:
                failed.append(
                    f"{self.cross_replica_pods} pods answered by two replicas, but {self.cross_replica_cycles} cycles"
                )
        return failed


@dataclass
class _Replica:
    server: Gunicorn
    ingester: Process
    spool: Spool
    pids: set[int] = field(default_factory=set)
    """The gunicorn master's and every worker's seen so far: a call's ``server`` names one of them."""

    def note_pids(self) -> list[int]:
        workers = self.server.workers()
        self.pids.update([self.server.pid, *workers])
        return workers


def run_soak(
    *,
    database_url: str,
    workdir: Path,
    seconds: float,
    rate: float,
    threads: int = 4,
    nodes: int = 50,
    workers: int = 2,
    replicas: int = 1,
    sample_every: float = 5.0,
    drain_timeout: float = 3600.0,
    progress: bool = False,
) -> SoakReport:
    """``workers``: gunicorn workers of each replica."""
    cluster = make_cluster(nodes)
    cluster_file = workdir / "cluster.json"
    cluster_file.write_text(json.dumps(cluster.document()))
    common = {
        "DATABASE_URL": database_url,
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "SCHEDLENS_INGEST_IN_PROCESS": "false",
        "SCHEDLENS_BIND_MODE": "simulated",
        "SCHEDLENS_CLUSTER_SOURCE": "file",
        "SCHEDLENS_CLUSTER_FILE": str(cluster_file),
        "SCHEDLENS_CONFIG": "",
        "SCHEDLENS_TRAFFIC_BACKEND": "inprocess",
        "PROMETHEUS_URL": "",
    }
    started: list[_Replica] = []
    balancer: RoundRobinBalancer | None = None
    try:
        for index in range(replicas):
            # One replica keeps the single-process layout's paths; several get a directory each, as each pod of
            # the StatefulSet has its own spool volume and its own metrics directory (which gunicorn empties at
            # start, so two servers must never share one).
            home = workdir if replicas == 1 else workdir / f"replica-{index}"
            home.mkdir(exist_ok=True)
            (home / "metrics").mkdir(exist_ok=True)
            env = {
                **common,
                "SCHEDLENS_SPOOL_DIR": str(home / "spool"),
                "PROMETHEUS_MULTIPROC_DIR": str(home / "metrics"),
            }
            server = Gunicorn(env, home / "gunicorn.log", workers=workers)
            try:
                ingester = manage(["ingest_spool", "--follow"], env, home / "ingest.log")
            except BaseException:
                server.stop()
                raise
            started.append(_Replica(server, ingester, Spool(env["SCHEDLENS_SPOOL_DIR"])))
        if replicas > 1:
            balancer = RoundRobinBalancer([replica.server.port for replica in started]).start()
            url = balancer.url
        else:
            url = started[0].server.url
        for replica in started:
            replica.note_pids()
        load = PacedLoad(
            f"{url}/extender/default",
            cluster,
            rate=rate,
            duration=seconds,
            threads=threads,
            connections=1 if replicas == 1 else 2,
        )
        result, samples, drain = _drive(load, started, seconds, sample_every, drain_timeout, progress)
        for replica in started:
            replica.note_pids()
    finally:
        if balancer is not None:
            balancer.stop()
        for replica in started:
            replica.ingester.stop()
            replica.server.stop()
    replica_of_pid = {pid: index for index, replica in enumerate(started) for pid in replica.pids}
    report = _verify(
        result,
        samples,
        drain,
        replica_of_pid,
        rate=rate,
        seconds=seconds,
        threads=threads,
        nodes=nodes,
        workers=workers,
        replicas=replicas,
    )
    if balancer is not None:
        report.connections_by_replica = list(balancer.assigned)
    return report


def _drive(
    load: PacedLoad,
    replicas: list[_Replica],
    seconds: float,
    sample_every: float,
    drain_timeout: float,
    progress: bool,
) -> tuple[LoadResult, list[Sample], float]:
    """Run the load with memory and spools sampled, then wait for every spool to drain."""
    samples: list[Sample] = []
    stop_sampling = threading.Event()

    def sample() -> None:
        began = time.monotonic()
        while True:
            try:
                samples.append(
                    Sample(
                        at=time.monotonic() - began,
                        worker_rss_kib=[rss_kib(pid) for replica in replicas for pid in replica.note_pids()],
                        ingester_rss_kib=max(rss_kib(replica.ingester.pid) for replica in replicas),
                        spool_depth=sum(replica.spool.depth() for replica in replicas),
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
        wait_for(
            lambda: all(replica.spool.depth() == 0 for replica in replicas),
            what="the ingesters to drain the spools",
            timeout=drain_timeout,
            interval=1,
        )
        drain = time.monotonic() - drained_at
    finally:
        stop_sampling.set()
        sampler.join(timeout=sample_every + 5)
        load.stop.set()
    return result, samples, drain


def _pid_of(server: str) -> int:
    """The process id in a ``server`` column (``host:pid``); 0 when there is none."""
    _, _, pid = server.rpartition(":")
    return int(pid) if pid.isdigit() else 0


def _verify(
    result: LoadResult, samples: list[Sample], drain: float, replica_of_pid: dict[int, int], **run: float
) -> SoakReport:
    replicas = int(run.get("replicas", 1))
    answered = [call for call in result.calls if call.status == 200]
    asked = Counter((call.uid, call.verb) for call in answered)
    stored_rows = list(
        VerbCall.objects.values_list("id", "cycle__pod_uid", "verb", "cycle_id", "server").iterator(chunk_size=10_000)
    )
    stored = Counter((uid, verb) for _, uid, verb, _, _ in stored_rows)
    ids = {(uid, verb): call_id for call_id, uid, verb, _, _ in stored_rows}
    replica_of_call = {(uid, verb): replica_of_pid.get(_pid_of(server), -1) for _, uid, verb, _, server in stored_rows}

    # Order: one ingester stores its spool in the order the records were appended, and a thread's next call is
    # made only once the previous one was answered (and spooled), so each thread's calls answered by one replica
    # are stored in the order they were made. Across replicas two ingesters race and nothing orders them: a
    # thread's prioritize answered by one replica may be stored before its filter answered by the other. With one
    # replica this is the plain per-thread order.
    out_of_order = crossings = 0
    for thread in sorted({call.thread for call in result.calls}):
        previous: dict[int, int] = {}
        latest = 0
        for call in (c for c in answered if c.thread == thread):
            key = (call.uid, call.verb)
            call_id = ids.get(key, 0)
            if not call_id:
                continue
            replica = replica_of_call.get(key, -1) if replicas > 1 else 0
            if call_id < previous.get(replica, 0):
                out_of_order += 1
            elif call_id < latest:
                crossings += 1
            previous[replica] = max(previous.get(replica, 0), call_id)
            latest = max(latest, call_id)

    # Correlation: every pod asked about has one cycle, and all its stored calls are in it.
    uids = {uid for uid, _ in asked}
    cycles_of_pod = Counter(
        uid for uid in SchedulingCycle.objects.values_list("pod_uid", flat=True).iterator(chunk_size=10_000)
    )
    cycle_ids_of_pod: dict[str, set[int]] = {}
    replicas_of_cycle: dict[int, set[int]] = {}
    replicas_of_pod: dict[str, set[int]] = {}
    for _, uid, verb, cycle_id, _ in stored_rows:
        cycle_ids_of_pod.setdefault(uid, set()).add(cycle_id)
        replicas_of_cycle.setdefault(cycle_id, set()).add(replica_of_call[(uid, verb)])
        replicas_of_pod.setdefault(uid, set()).add(replica_of_call[(uid, verb)])
    not_one = sum(1 for uid in uids if cycles_of_pod[uid] != 1 or len(cycle_ids_of_pod.get(uid, ())) != 1)
    calls_by_replica = Counter(replica_of_call.values())

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
        replicas=replicas,
        pods_asked=len(uids),
        cycles=sum(cycles_of_pod[uid] for uid in uids),
        pods_not_in_one_cycle=not_one,
        cross_replica_pods=sum(1 for found in replicas_of_pod.values() if len(found - {-1}) >= 2),
        cross_replica_cycles=sum(1 for found in replicas_of_cycle.values() if len(found - {-1}) >= 2),
        calls_by_replica=[calls_by_replica[index] for index in range(replicas)],
        calls_unattributed=calls_by_replica[-1],
        thread_order_crossings=crossings,
    )
