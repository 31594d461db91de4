"""Pages newest first are read from the newest day, then the newest week, then the rest: the same rows as one query
over the whole history, in fewer partitions when the newest days hold a page (``dashboard.selectors.cycles``)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.models import SchedulingCycle
from dashboard.selectors.cycles import newest_first_page

pytestmark = pytest.mark.django_db

HOURS_AGO = (1, 2, 3, 30, 50, 100, 200, 300, 500)  # three in the last day, three more in 8 days, three older


@pytest.fixture
def cycles() -> list[SchedulingCycle]:
    now = timezone.now()
    return [
        SchedulingCycle.objects.create(
            pod_namespace="ns",
            pod_name=f"p-{hours}",
            profile="default",
            started_at=now - timedelta(hours=hours),
            finished_at=now - timedelta(hours=hours),
        )
        for hours in HOURS_AGO
    ]


def ordered():  # type: ignore[no-untyped-def]
    return SchedulingCycle.objects.order_by("-started_at", "-id")


@pytest.mark.parametrize("count", [1, 3, 4, 7, 8, 9, 20])
def test_every_page_is_the_whole_history_s_page(cycles, count):
    assert newest_first_page(ordered(), count=count, below=None) == list(ordered()[:count])
    below = cycles[2].started_at  # after a cursor, the same
    after = ordered().filter(started_at__lt=below)
    assert newest_first_page(after, count=count, below=below) == list(after[:count])


def test_a_page_the_newest_day_holds_takes_one_query(cycles, django_assert_num_queries):
    with django_assert_num_queries(1):
        assert len(newest_first_page(ordered(), count=3, below=None)) == 3
    with django_assert_num_queries(2):  # the day is short: the week holds it
        assert len(newest_first_page(ordered(), count=6, below=None)) == 6
    with django_assert_num_queries(3):  # the whole history
        assert len(newest_first_page(ordered(), count=9, below=None)) == 9
