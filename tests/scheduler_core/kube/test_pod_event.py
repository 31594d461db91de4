"""Which pods of a burst get an Explained Event (``scheduler_core.kube.pod_event``): grouped by the name their
controller gave them, one per window of placement time."""

from __future__ import annotations

import pytest

from scheduler_core.kube.pod_event import EventBursts, burst_group


@pytest.mark.parametrize(
    ("name", "group"),
    [
        ("web-7d9f8c5b4-x2b4q", "web-7d9f8c5b4-"),  # a Deployment's ReplicaSet's pod
        ("backup-28912345-k8s2z", "backup-28912345-"),  # a CronJob's Job's pod
        ("fluent-bit-4xz9c", "fluent-bit-"),  # a DaemonSet's
        ("db-0", "db-"),  # a StatefulSet's, by ordinal
        ("db-12", "db-"),
        ("api", ""),  # a bare pod
        ("web-aeiou", ""),  # vowels: not the generator's alphabet
        ("web-x2b4", ""),  # four characters: not generated
        ("-x2b4q", ""),
    ],
)
def test_pods_are_grouped_by_the_name_their_controller_gave_them(name: str, group: str) -> None:
    assert burst_group(name) == group


def test_the_first_pod_of_each_window_of_a_group_gets_its_event() -> None:
    bursts = EventBursts(60)
    assert bursts.first("shop", "web-7d9f8c-x2b4q", 1000.0)
    assert not bursts.first("shop", "web-7d9f8c-m5n6p", 1030.0)
    assert bursts.first("other", "web-7d9f8c-m5n6p", 1030.0), "another namespace, another group"
    assert bursts.first("shop", "api", 1031.0), "a bare pod always"
    assert bursts.first("shop", "api", 1032.0), "a bare pod always"
    assert not bursts.first("shop", "web-7d9f8c-k2m4n", 999.0), "placed just before, ingested after: same burst"
    assert bursts.first("shop", "web-7d9f8c-q2w4r", 1060.0), "the window closed"
    assert not bursts.first("shop", "web-7d9f8c-z2x4c", 1100.0), "the new window is open"


def test_zero_seconds_gives_every_pod_its_event_and_no_note() -> None:
    bursts = EventBursts(0)
    assert all(bursts.first("shop", "web-7d9f8c-x2b4q", 1000.0 + i) for i in range(3))
    assert bursts.note("shop", "web-7d9f8c-x2b4q") == ""


def test_the_note_names_the_group_the_window_and_where_the_others_are_explained() -> None:
    bursts = EventBursts(60)
    assert bursts.note("shop", "web-7d9f8c-x2b4q") == (
        "Pods named web-7d9f8c-* placed within 60 s of this one have no Explained Event of their own: "
        "kubectl schedlens why POD -n shop."
    )
    assert bursts.note("shop", "api") == ""


def test_closed_windows_are_let_go_once_many_are_kept() -> None:
    bursts = EventBursts(60)
    bursts.PRUNE_AT = 3
    for i in range(3):
        assert bursts.first("shop", f"app{i}-x2b4q", 1000.0)
    assert bursts.first("shop", "late-x2b4q", 2000.0)
    assert len(bursts._opened) == 1
