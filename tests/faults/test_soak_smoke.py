"""A 15-second soak: the deployed process layout under a paced load, then every call checked in the database.

The ten-minute run is ``benchmarks/soak.py`` (figures in ``benchmarks/results-reliability.md``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.services import database_url
from tests.faults.soak import run_soak

pytestmark = pytest.mark.django_db(transaction=True)

SECONDS = 15.0
RATE = 100.0


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
