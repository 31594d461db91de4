"""``ingest_spool --follow`` asks the ingester to keep as many batches being built as it has builder processes:
``spool_ingest(ahead=…)`` must reach the read-ahead, or the extra processes sit idle."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from dashboard.ingest.spool_ingest import spool_ingest
from dashboard.models import VerbCall
from dashboard.spool import Spool
from scheduler_core.extender.record.spool_codec import encode_event
from tests.support.kube_scheduler import TRAFFIC, KubeScheduler

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


class GatedBuilders(ThreadPoolExecutor):
    """Builders that hold every batch until the test opens the gate, counting the batches handed to them."""

    def __init__(self) -> None:
        super().__init__(max_workers=4)
        self.gate = threading.Event()
        self.submitted = 0
        self.changed = threading.Condition()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        with self.changed:
            self.submitted += 1
            self.changed.notify_all()

        def gated() -> Any:
            self.gate.wait()
            return fn(*args, **kwargs)

        return super().submit(gated)

    def wait_for_submitted(self, count: int, timeout: float) -> int:
        with self.changed:
            self.changed.wait_for(lambda: self.submitted >= count, timeout=timeout)
            return self.submitted


def test_the_ingester_keeps_as_many_batches_building_as_it_is_asked(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool")
    kube_scheduler = KubeScheduler(dict(TRAFFIC))
    for i in range(12):
        for event in kube_scheduler.events(at=T0 + timedelta(seconds=i), name=f"web-{i}"):
            spool.append(encode_event(event))
    builders = GatedBuilders()
    moved: list[int] = []

    def ingest() -> None:
        try:
            moved.append(spool_ingest(spool=spool, batch_size=3, builders=builders, ahead=4))
        finally:
            connection.close()  # this thread's own

    ingesting = threading.Thread(target=ingest)
    ingesting.start()
    try:
        # Nothing is built until the gate opens, so the ingester hands over batches until it holds `ahead` of them.
        assert builders.wait_for_submitted(4, timeout=30) == 4
    finally:
        builders.gate.set()
        ingesting.join(60)
        builders.shutdown()
    assert moved == [36]
    assert VerbCall.objects.count() == 36
