"""Cursor pagination over (started_at, id): no cycle twice, none skipped, while new cycles keep arriving."""

from __future__ import annotations

from datetime import timedelta
from itertools import count

import pytest

from dashboard.models import SchedulingCycle
from tests.support.kube_scheduler import T0

SECOND = timedelta(seconds=1)


def walk(api, first_url: str, between_pages=lambda: None, direction: str = "next") -> list[list[int]]:
    pages, url = [], first_url
    while url:
        body = api.get(url).json()
        pages.append([row["id"] for row in body["results"]])
        url = body[direction]
        if url:
            between_pages()
    return pages


@pytest.mark.django_db
def test_walking_newest_first_while_cycles_arrive_sees_every_earlier_cycle_exactly_once(api, kube_scheduler):
    # Pairs of cycles share a start time, so page boundaries fall between equal timestamps too.
    existing = [kube_scheduler.schedule(at=T0 + (i // 2) * SECOND, name=f"web-{i}") for i in range(23)]
    later = count(100)

    def three_new_cycles() -> None:
        for _ in range(3):
            kube_scheduler.schedule(at=T0 + next(later) * SECOND, name="late")

    pages = walk(api, "/api/v1/cycles/?page_size=5", between_pages=three_new_cycles)
    seen = [cycle_id for page in pages for cycle_id in page]
    expected = [c.id for c in sorted(existing, key=lambda c: (c.started_at, c.id), reverse=True)]
    assert seen == expected
    assert [len(p) for p in pages] == [5, 5, 5, 5, 3]


@pytest.mark.django_db
def test_walking_oldest_first_reaches_the_cycles_that_arrived_meanwhile_without_repeats(api, kube_scheduler):
    for i in range(12):
        kube_scheduler.schedule(at=T0 + (i // 3) * SECOND, name=f"web-{i}")
    later = count(100)
    inserted = []

    def one_new_cycle() -> None:
        if len(inserted) < 4:
            inserted.append(kube_scheduler.schedule(at=T0 + next(later) * SECOND, name="late").id)

    pages = walk(api, "/api/v1/cycles/?page_size=4&ordering=started_at", between_pages=one_new_cycle)
    seen = [cycle_id for page in pages for cycle_id in page]
    everything = SchedulingCycle.objects.order_by("started_at", "id").values_list("id", flat=True)
    assert seen == list(everything)
    assert set(inserted) <= set(seen)


@pytest.mark.django_db
def test_previous_links_walk_back_over_the_same_pages(api, kube_scheduler):
    for i in range(11):
        kube_scheduler.schedule(at=T0 + (i // 2) * SECOND, name=f"web-{i}")
    forward = walk(api, "/api/v1/cycles/?page_size=4")
    last_page = api.get("/api/v1/cycles/?page_size=4").json()
    while last_page["next"]:
        last_page = api.get(last_page["next"]).json()
    backward = walk(api, last_page["previous"], direction="previous")
    assert backward == list(reversed(forward[:-1]))
    assert last_page["next"] is None


@pytest.mark.django_db
def test_the_first_page_has_no_previous_link_and_filters_stay_in_the_links(api, kube_scheduler):
    for i in range(3):
        kube_scheduler.schedule(at=T0 + i * SECOND, name=f"web-{i}")
    body = api.get("/api/v1/cycles/", {"page_size": 2, "namespace": "shop"}).json()
    assert body["previous"] is None
    assert "namespace=shop" in body["next"]
    assert "page_size=2" in body["next"]
