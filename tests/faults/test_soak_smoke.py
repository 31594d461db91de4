"""15-second soaks: the deployed process layout (one replica, then two behind one address) under a paced load,
then every call checked in the database.

The ten-minute run is ``python -m benchmarks.reliability.soak`` (figures in ``benchmarks/results-reliability.md``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.processes import database_url
from tests.support.soak import run_soak

pytestmark = pytest.mark.django_db(transaction=True)

SECONDS = 15.0
RATE = 100.0
TWO_REPLICA_RATE = 50.0


def test_a_short_soak_answers_every_call_and_records_each_exactly_once_in_order(settings, tmp_path: Path) -> None:
    report = run_soak(
        database_url=database_url(settings.DATABASES["default"]),
        workdir=tmp_path,
        seconds=SECONDS,
        rate=RATE,
        threads=4,
        nodes=50,
        sample_every=1.0,
        drain_timeout=120,
    )
    summary = report.summary()
    assert report.load.pods >= RATE * SECONDS * 0.95, summary
    assert report.non_2xx == 0, summary
    assert report.load.errors == [], summary
    assert report.calls_stored == report.calls_asked > 0, summary
    assert (report.missing, report.extra, report.duplicated, report.out_of_order) == (0, 0, 0, 0), summary
    assert report.chain_ok, summary
    assert len(report.samples) >= 10
    assert all(len(s.worker_rss_kib) == 2 for s in report.samples)


def test_two_replicas_behind_one_address_store_every_call_once_with_each_pods_calls_in_one_cycle(
    settings, tmp_path: Path
) -> None:
    """Two gunicorns, each with its own ingester and spool, one database, a round-robin balancer in front; each
    client thread alternates two keep-alive connections, so a pod's filter and prioritize reach different
    replicas and are stored by different ingesters."""
    report = run_soak(
        database_url=database_url(settings.DATABASES["default"]),
        workdir=tmp_path,
        seconds=SECONDS,
        rate=TWO_REPLICA_RATE,
        threads=4,
        nodes=50,
        workers=1,
        replicas=2,
        sample_every=1.0,
        drain_timeout=120,
    )
    summary = report.summary()
    assert report.load.pods >= TWO_REPLICA_RATE * SECONDS * 0.95, summary
    assert report.non_2xx == 0, summary
    assert report.load.errors == [], summary
    assert report.calls_stored == report.calls_asked > 0, summary
    assert (report.missing, report.extra, report.duplicated, report.out_of_order) == (0, 0, 0, 0), summary
    assert report.chain_ok, summary
    # The pods' calls did cross replicas (else nothing below would be proven): each thread's two connections went
    # to the two replicas, so every pod's filter and prioritize were answered by different ones.
    assert report.cross_replica_pods >= report.pods_asked * 0.9, summary
    assert report.connections_by_replica == [4, 4], summary
    assert report.calls_unattributed == 0, summary
    # Correlated across replicas: each pod has one cycle, holding all its calls, whichever replica answered them.
    assert report.pods_not_in_one_cycle == 0, summary
    assert report.cycles == report.pods_asked == report.load.pods, summary
    assert report.cross_replica_cycles == report.cross_replica_pods, summary
    assert report.failures == [], summary
    assert all(len(s.worker_rss_kib) == 2 for s in report.samples)
