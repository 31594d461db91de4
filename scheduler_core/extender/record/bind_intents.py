"""A bind that happened is never missing from the record: its intent first, its outcome after, reconciled between.

The bind verb (``Extender.bind``) spools a :class:`~scheduler_core.extender.record.structs.BindIntent` (pod, node, event
id, profile, time) *before* it asks the API server for the Binding, and the bind's record *after*, in the SQLite
transaction that removes the intent (``dashboard.spool.Spool.append``'s ``settles``). A process killed between the two
(SIGKILL, OOM, node loss) leaves an intent alone: the pod may be bound, and nothing else in the record says so.

:func:`reconcile_pass` settles each intent left alone, once it is older than any bind still in flight can be
(``grace_seconds``, well above the binder's 4 s budget), from the pod's real ``spec.nodeName`` read back through the
binder (:class:`~scheduler_core.extender.protocol.binding.PodReader`). Its outcome is a bind record like the verb's,
with the intent's event id and time, so it joins the cycle the bind belonged to and a late record of the same call is
dropped by the ingester as a repeat: bound to the intended node (recorded as a successful bind whose detail says it was
reconciled), bound to another node, not bound, or the pod gone. When the API server cannot say, the intent stays and the
next pass asks again. Recording the outcome and removing the intent are one SQLite transaction
(:meth:`IntentStore.settle`), so two reconcilers never record one intent twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, Protocol

import msgspec

from scheduler_core.extender.protocol.binding import PlacementUnknownError, PodPlacement, PodReader
from scheduler_core.extender.record.spool_codec import decode_intent, encode_event
from scheduler_core.extender.record.structs import BIND, BindIntent, BindRecord, VerbEvent

log = logging.getLogger(__name__)

BOUND: Final = "bound"
BOUND_ELSEWHERE: Final = "bound_elsewhere"
NOT_BOUND: Final = "not_bound"
POD_GONE: Final = "pod_gone"
OUTCOMES: Final = (BOUND, BOUND_ELSEWHERE, NOT_BOUND, POD_GONE)
"""What a reconciled intent's pod showed (the label of ``schedlens_bind_intents_reconciled_total``)."""

RECONCILED: Final = "reconciled after schedlens stopped mid-bind"
"""How a reconciled record's detail starts: the process died between asking for the Binding and recording it."""
_NO_ANSWER: Final = "kube-scheduler got no answer to this call"


class IntentStore(Protocol):
    """Where intents wait (the spool's ``bind_intents`` table)."""

    def intents(self) -> list[tuple[int, bytes]]:
        """Every intent without an outcome, oldest first: (id, its bytes)."""
        ...

    def settle_intent(self, intent_id: int, record: bytes) -> bool:
        """Append ``record`` (the outcome, spooled as answered) and remove intent ``intent_id`` in one transaction;
        False (nothing appended) when the intent is gone already (settled by someone else)."""
        ...


@dataclass(frozen=True, slots=True)
class Reconciled:
    intent_id: int
    outcome: str
    """One of :data:`OUTCOMES`."""
    event: VerbEvent


@dataclass(slots=True)
class PassResult:
    reconciled: list[Reconciled] = field(default_factory=list)
    waiting: int = 0
    """Intents younger than the grace: their bind may still be in flight in a live process."""
    failed: list[tuple[int, str]] = field(default_factory=list)
    """(intent id, why) of intents the API server could not settle this time (or unreadable): they stay."""


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="seconds")


def reconciled_event(intent: BindIntent, placement: PodPlacement, *, by: str, at: float) -> tuple[str, VerbEvent]:
    """The bind's record as the pod shows it: (outcome, event). ``by``: the reconciling process; ``at``: when the pod
    was read (Unix seconds).

    The event is the bind call's own: its event id, profile, time, pod and server are the intent's. Its duration is
    unknown (0), its answer ``null`` (none was written); ``http_status`` 200, as for any bind the binder answered,
    so a bind found done makes its cycle bound to its node and any other outcome an error of the cycle.
    """
    read = f"{RECONCILED}: spec.nodeName read by {by} at {_when(at)}"
    node = intent.node
    if not placement.exists or (intent.pod_uid and placement.uid and placement.uid != intent.pod_uid):
        outcome = POD_GONE
        why = "deleted" if not placement.exists else f"recreated with UID {placement.uid}"
        error = f"the pod no longer exists ({why}); whether it was bound to {node} is unknown ({RECONCILED})"
        detail = f"{read}: the pod was {why}; {_NO_ANSWER}"
    elif placement.node == node:
        outcome, error = BOUND, ""
        detail = f"{read}: bound to {node}; {_NO_ANSWER}"
    elif placement.node:
        outcome = BOUND_ELSEWHERE
        error = f"pod is bound to another node: {placement.node} ({RECONCILED})"
        detail = f"{read}: bound to {placement.node}, not {node}; {_NO_ANSWER}"
    else:
        outcome = NOT_BOUND
        error = f"the pod was not bound ({RECONCILED})"
        detail = f"{read}: not bound to any node; {_NO_ANSWER}"
    event = VerbEvent(
        event_id=intent.event_id,
        verb=BIND,
        profile=intent.profile,
        started_at=intent.started_at,
        duration_ms=0.0,
        http_status=200,
        pod_namespace=intent.pod_namespace,
        pod_name=intent.pod_name,
        pod_uid=intent.pod_uid,
        error=error.replace("%", " percent"),  # as the verb's: kube-scheduler-style text, never a format string
        bind=BindRecord(node=node, detail=detail),
        response=msgspec.Raw(b"null"),
        server=intent.server,
    )
    return outcome, event


def reconcile_pass(
    store: IntentStore,
    reader: PodReader,
    *,
    grace_seconds: float,
    by: str,
    clock: Callable[[], float] = time.time,
) -> PassResult:
    """Settle every intent older than ``grace_seconds`` from its pod's placement; leave the others for a later pass.

    Each intent costs one GET of its pod, off the verbs' path; an intent is rare (a process died mid-bind), so a pass
    over an empty table is one SQLite read.
    """
    result = PassResult()
    for intent_id, data in store.intents():
        try:
            intent = decode_intent(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.error("bind intent %s cannot be read (%s); it stays in the spool", intent_id, exc)
            result.failed.append((intent_id, f"unreadable: {exc}"))
            continue
        if clock() - intent.started_at < grace_seconds:
            result.waiting += 1
            continue
        try:
            placement = reader.placement(namespace=intent.pod_namespace, name=intent.pod_name)
        except PlacementUnknownError as exc:
            log.warning("bind intent %s (%s/%s to %s) waits: %s", intent_id, *_names(intent), exc)
            result.failed.append((intent_id, str(exc)))
            continue
        outcome, event = reconciled_event(intent, placement, by=by, at=clock())
        if store.settle_intent(intent_id, encode_event(event)):
            log.warning(
                "bind intent %s (%s/%s to %s) reconciled: %s (%s)", intent_id, *_names(intent), outcome, event.error
            )
            result.reconciled.append(Reconciled(intent_id, outcome, event))
    return result


def _names(intent: BindIntent) -> tuple[str, str, str]:
    return intent.pod_namespace, intent.pod_name, intent.node
