"""Reconciling a bind intent left without an outcome (``scheduler_core.extender.record.bind_intents``): what the pod
shows becomes the bind's record, with the intent's event id and time; an intent still in its grace, or whose pod the API
server cannot read, stays for a later pass."""

from __future__ import annotations

import msgspec
import pytest

from scheduler_core.extender.protocol.binding import PlacementUnknownError, PodPlacement
from scheduler_core.extender.record.bind_intents import (
    BOUND,
    BOUND_ELSEWHERE,
    NOT_BOUND,
    POD_GONE,
    RECONCILED,
    reconcile_pass,
    reconciled_event,
)
from scheduler_core.extender.record.spool_codec import decode_event, decode_intent, encode_event, encode_intent
from scheduler_core.extender.record.structs import BindIntent

T0 = 1_800_000_000.5
INTENT = BindIntent(
    event_id="e-bind-1",
    profile="default",
    started_at=T0,
    pod_namespace="shop",
    pod_name="web-1",
    pod_uid="uid-1",
    node="node-2",
    server="web-0:41",
)


class Store:
    """The spool's intents in memory: the settled records appended to ``events``."""

    def __init__(self, *intents: BindIntent) -> None:
        self.pending = {i + 1: encode_intent(intent) for i, intent in enumerate(intents)}
        self.events: list[bytes] = []

    def intents(self) -> list[tuple[int, bytes]]:
        return sorted(self.pending.items())

    def settle_intent(self, intent_id: int, record: bytes) -> bool:
        if self.pending.pop(intent_id, None) is None:
            return False
        self.events.append(record)
        return True


class Reader:
    def __init__(self, *answers: PodPlacement | Exception) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, str]] = []

    def placement(self, *, namespace: str, name: str) -> PodPlacement:
        self.asked.append((namespace, name))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


@pytest.mark.parametrize(
    ("placement", "outcome", "error"),
    [
        (PodPlacement(exists=True, uid="uid-1", node="node-2"), BOUND, ""),
        (PodPlacement(True, "uid-1", "node-5"), BOUND_ELSEWHERE, "pod is bound to another node: node-5"),
        (PodPlacement(exists=True, uid="uid-1", node=""), NOT_BOUND, "the pod was not bound"),
        (PodPlacement(exists=False), POD_GONE, "the pod no longer exists (deleted)"),
        (PodPlacement(exists=True, uid="uid-2", node="node-2"), POD_GONE, "the pod no longer exists (recreated"),
    ],
    ids=["bound-there", "bound-elsewhere", "not-bound", "deleted", "recreated"],
)
def test_the_pod_decides_the_reconciled_record(placement: PodPlacement, outcome: str, error: str) -> None:
    found, event = reconciled_event(INTENT, placement, by="web-0:99", at=T0 + 40)

    assert found == outcome
    if outcome == BOUND:
        assert event.error == "", "a bind found done is a successful bind: its cycle is bound to its node"
    else:
        assert event.error.startswith(error)
        assert RECONCILED in event.error
    assert (event.event_id, event.verb, event.profile, event.started_at) == ("e-bind-1", "bind", "default", T0)
    assert (event.pod_namespace, event.pod_name, event.pod_uid, event.server) == ("shop", "web-1", "uid-1", "web-0:41")
    assert event.http_status == 200
    assert event.bind is not None
    assert event.bind.node == "node-2", "the node asked for, whatever happened"
    assert event.bind.detail.startswith(f"{RECONCILED}: spec.nodeName read by web-0:99 at ")
    assert "kube-scheduler got no answer" in event.bind.detail
    assert (event.bind.api_status, event.bind.simulated) == (None, False)
    assert bytes(event.response) == b"null", "no answer was written"
    again = decode_event(encode_event(event))
    assert msgspec.structs.asdict(again) | {"response": None} == msgspec.structs.asdict(event) | {"response": None}


def test_a_pass_settles_old_intents_and_leaves_those_in_their_grace() -> None:
    young = msgspec.structs.replace(INTENT, event_id="e-young", started_at=T0 + 55)
    store = Store(INTENT, young)
    reader = Reader(PodPlacement(exists=True, uid="uid-1", node="node-2"))

    result = reconcile_pass(store, reader, grace_seconds=30, by="web-0:99", clock=lambda: T0 + 60)

    assert [(r.intent_id, r.outcome) for r in result.reconciled] == [(1, BOUND)]
    assert (result.waiting, result.failed) == (1, [])
    assert reader.asked == [("shop", "web-1")], "the intent in its grace may still be in flight: not asked"
    assert [decode_intent(data).event_id for _, data in store.intents()] == ["e-young"]
    (record,) = store.events
    assert decode_event(record).event_id == "e-bind-1"


def test_an_intent_the_api_server_cannot_settle_stays_and_is_settled_by_a_later_pass() -> None:
    store = Store(INTENT)
    reader = Reader(PlacementUnknownError("could not read pod shop/web-1: timeout"), PodPlacement(True, "uid-1", ""))

    first = reconcile_pass(store, reader, grace_seconds=30, by="web-0:99", clock=lambda: T0 + 60)
    assert (first.reconciled, first.failed) == ([], [(1, "could not read pod shop/web-1: timeout")])
    assert (len(store.intents()), store.events) == (1, []), "neither lost nor recorded as a finished bind"

    second = reconcile_pass(store, reader, grace_seconds=30, by="web-0:99", clock=lambda: T0 + 70)
    assert [r.outcome for r in second.reconciled] == [NOT_BOUND]
    assert (store.intents(), len(store.events)) == ([], 1)


def test_an_intent_settled_meanwhile_by_another_process_is_not_recorded_twice() -> None:
    store = Store(INTENT)

    class Racing(Reader):
        def placement(self, *, namespace: str, name: str) -> PodPlacement:
            store.settle_intent(1, b"the other process's record")  # another replica got there first
            return PodPlacement(exists=True, uid="uid-1", node="node-2")

    result = reconcile_pass(store, Racing(), grace_seconds=30, by="web-0:99", clock=lambda: T0 + 60)
    assert result.reconciled == []
    assert store.events == [b"the other process's record"]


def test_an_unreadable_intent_stays_and_the_others_are_settled() -> None:
    store = Store(INTENT)
    store.pending[0] = b"SLX\x09 not an intent"
    result = reconcile_pass(
        store, Reader(PodPlacement(True, "uid-1", "node-2")), grace_seconds=30, by="w", clock=lambda: T0 + 60
    )
    assert [r.intent_id for r in result.reconciled] == [1]
    assert [intent_id for intent_id, _ in result.failed] == [0]
    assert [intent_id for intent_id, _ in store.intents()] == [0]
