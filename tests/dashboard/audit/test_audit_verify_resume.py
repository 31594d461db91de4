"""An auditor verifies one day of calls, or what was added since the last verification, without re-reading the rest.

``recorded_at`` (the day a call was stored, by the database's clock) is moved back with an UPDATE to lay calls out over
days, as the clock cannot be set back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from dashboard.audit.chain import VerificationMovedError, audit_chain_verify, audit_chain_verify_day
from dashboard.ingest.cycles import cycles_ingest_events
from dashboard.models import AuditVerification, VerbCall
from scheduler_core.extender.record.structs import VerbEvent

pytestmark = pytest.mark.django_db

DAY = timezone.now().astimezone(UTC).date() - timedelta(days=3)


def _ingest(*uids: str) -> None:
    now = timezone.now().timestamp()
    common = {"profile": "default", "duration_ms": 1.0, "http_status": 200, "pod_namespace": "ns"}
    cycles_ingest_events(
        events=[
            VerbEvent(event_id=f"{uid}-{verb}", verb=verb, started_at=now + i, pod_name=uid, pod_uid=uid, **common)
            for uid in uids
            for i, verb in enumerate(("filter", "bind"))
        ]
    )


def _store_on(day, *uids: str) -> None:  # type: ignore[no-untyped-def]
    at = datetime(day.year, day.month, day.day, 12, tzinfo=UTC)
    VerbCall.objects.filter(cycle__pod_uid__in=uids).update(recorded_at=at)


def test_resume_checks_only_the_calls_added_since_the_last_verification():
    _ingest("a", "b")
    first = audit_chain_verify()
    assert (first.ok, first.checked) == (True, 4)
    _ingest("c")

    resumed = audit_chain_verify(resume=True)

    assert resumed.ok, resumed.reason
    assert (resumed.start_after_id, resumed.checked) == (first.head_id, 2)
    assert AuditVerification.objects.order_by("-last_call_id").first().last_call_id == resumed.head_id


def test_resume_refuses_when_the_link_it_would_start_from_was_rewritten():
    _ingest("a", "b")
    head = audit_chain_verify().head_id
    VerbCall.objects.filter(id=head).update(chain_hash="f" * 64)  # the chain rewritten up to the verified head

    with pytest.raises(VerificationMovedError, match=f"call {head}"):
        audit_chain_verify(resume=True)
    with pytest.raises(CommandError, match="BROKEN"):
        call_command("verify_audit_chain", "--resume")


def test_one_day_is_verified_from_the_link_before_it_and_names_an_altered_call():
    for uid in ("before", "on-day", "after"):  # one ingest each: a day's calls are a stretch of ids
        _ingest(uid)
    _store_on(DAY - timedelta(days=1), "before")
    _store_on(DAY, "on-day")
    day_calls = list(VerbCall.objects.filter(cycle__pod_uid="on-day").order_by("id"))
    before_last = VerbCall.objects.filter(cycle__pod_uid="before").order_by("-id").first()

    report = audit_chain_verify_day(DAY)

    assert report.ok, report.reason
    assert (report.checked, report.start_after_id, report.head_id) == (2, before_last.pk, day_calls[-1].pk)
    VerbCall.objects.filter(id=day_calls[0].pk).update(server="elsewhere")
    broken = audit_chain_verify_day(DAY)
    assert (broken.ok, broken.first_broken_id) == (False, day_calls[0].pk)
    assert audit_chain_verify_day(DAY - timedelta(days=1)).ok  # the day before is not touched by it
    with pytest.raises(CommandError, match=f"BROKEN at call {day_calls[0].pk}"):
        call_command("verify_audit_chain", "--day", DAY.isoformat())
