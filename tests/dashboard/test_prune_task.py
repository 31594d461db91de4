"""The retention beat task prunes through the audit service and keeps the chain verifiable."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.audit.chain import audit_chain_verify
from dashboard.ingest.cycles import cycles_ingest_events
from dashboard.models import SchedulingCycle
from dashboard.tasks import prune_cycles
from scheduler_core.extender.record.structs import VerbEvent


def event(uid: str, at: float) -> VerbEvent:
    return VerbEvent(
        event_id=uid + "-f",
        verb="filter",
        profile="default",
        started_at=at,
        duration_ms=1.0,
        http_status=200,
        pod_namespace="ns",
        pod_name=uid,
        pod_uid=uid,
    )


@pytest.mark.django_db
def test_the_prune_task_removes_cycles_older_than_the_retention_and_the_chain_still_verifies(settings):
    settings.SCHEDLENS_RETENTION_DAYS = 30
    now = timezone.now().timestamp()
    cycles_ingest_events(events=[event("old", now - 40 * 86400), event("new", now - 86400)])

    prune_cycles()

    assert list(SchedulingCycle.objects.values_list("pod_uid", flat=True)) == ["new"]
    assert SchedulingCycle.objects.get().started_at > timezone.now() - timedelta(days=2)
    assert audit_chain_verify().ok
