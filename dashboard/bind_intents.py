"""Bind intents in the spool: the verbs' journal, and the thread that reconciles intents left without an outcome.

The bind verb records its intent here before it asks the API server (:class:`SpoolBindJournal`); the record of the
call settles it (``dashboard.extender.calls``). What an intent is and how one is reconciled:
``scheduler_core.extender.record.bind_intents``.

Where reconciliation runs, and why: in each web process, in a thread started with its runtime once the spool is open
(:class:`IntentReconciler`), off the request path. A first pass at start finds what a killed predecessor left (a
StatefulSet replica restarts on its own spool), and a pass every ``SCHEDLENS_BIND_RECONCILE_SECONDS`` retries the
intents the API server could not settle and takes those a live process could not record (its spool refused the
record). The web process is the one that owns the spool and holds the binder's API client, with the RBAC to read
pods, that reads the pod back; the ingester may run elsewhere without a Kubernetes configuration, and its passes must
never wait on the Kubernetes API: a slow API server would hold up the database writes of every call. The ingester
never sees an intent (they are not spool records), so it can neither lose one nor store one as a finished bind; it
stores the reconciled outcome like any bind record.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.conf import settings
from prometheus_client import Counter

from dashboard.spool import SPOOL_APPEND_FAILURES, Spool
from scheduler_core.extender.protocol.binding import PodReader
from scheduler_core.extender.record.bind_intents import OUTCOMES, PassResult, reconcile_pass
from scheduler_core.extender.record.spool_codec import encode_intent
from scheduler_core.extender.record.structs import BindIntent
from scheduler_core.extender.verbs import SERVER_ID

log = logging.getLogger(__name__)

BIND_INTENTS_RECONCILED = Counter(
    "schedlens_bind_intents_reconciled",
    "Bind intents left without an outcome (the process died mid-bind), settled from the pod's spec.nodeName, by "
    "what the pod showed: bound (to the intended node), bound_elsewhere, not_bound, pod_gone.",
    ["outcome"],
)
BIND_INTENT_RECONCILE_FAILURES = Counter(
    "schedlens_bind_intent_reconcile_failures",
    "Attempts to reconcile a bind intent that failed (the API server could not say where the pod is): it stays "
    "and is tried again.",
)
for _outcome in OUTCOMES:  # every series exists from the start, at 0
    BIND_INTENTS_RECONCILED.labels(_outcome)


class SpoolBindJournal:
    """The verbs' :class:`~scheduler_core.extender.verbs.BindJournal`: intents in the spool's ``bind_intents`` table.

    An intent that cannot be spooled (disk full) is handled as any record that cannot be: logged at ERROR, counted
    in ``schedlens_spool_append_failures_total{verb="bind_intent"}``, then ``SCHEDLENS_SPOOL_FAILURE`` decides:
    ``fail`` refuses the bind (503, nothing bound), ``answer`` binds without an intent.
    """

    def __init__(self, spool: Spool) -> None:
        self.spool = spool

    def intend(self, intent: BindIntent) -> int | None:
        data = encode_intent(intent)
        try:
            return self.spool.intend(data)
        except Exception:
            policy = settings.SCHEDLENS_SPOOL_FAILURE
            SPOOL_APPEND_FAILURES.labels("bind_intent", policy).inc()
            log.exception("could not spool a bind intent (SCHEDLENS_SPOOL_FAILURE=%s): %s", policy, data.decode())
            if policy == "answer":
                return None
            raise


class IntentReconciler:
    """Reconciles the spool's bind intents left without an outcome, in a daemon thread of this process.

    ``reader``: returns the binder to read pods back through, or None when this process has none (demo mode: its
    binds record no intent, and any intent found waits for a process that can).
    """

    def __init__(
        self,
        spool: Spool,
        reader: Callable[[], object],
        *,
        grace_seconds: float,
        interval_seconds: float,
    ) -> None:
        self.spool = spool
        self.reader = reader
        self.grace_seconds = grace_seconds
        self.interval_seconds = interval_seconds
        self._stop = threading.Event()
        self.thread: threading.Thread | None = None
        self._warned_no_reader = False

    def start(self) -> IntentReconciler:
        self.thread = threading.Thread(target=self._forever, name="schedlens-bind-reconcile", daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=10.0)

    def _forever(self) -> None:
        while True:
            if not self.spool.path.exists():  # the spool was removed (a test's temporary directory): nothing to do
                log.info("spool %s is gone; its bind intent reconciler stops", self.spool.path)
                return
            try:
                self.reconcile_once()
            except Exception:  # the spool or the reader failed: the intents stay, the next pass tries again
                log.warning("bind intent reconciliation failed; will retry", exc_info=True)
            if self._stop.wait(self.interval_seconds):
                return

    def reconcile_once(self) -> PassResult:
        """One pass: settle the intents older than the grace; count what was found."""
        reader = self.reader()
        if not isinstance(reader, PodReader):
            pending = self.spool.intents()
            if pending and not self._warned_no_reader:
                self._warned_no_reader = True
                log.warning("%d bind intents wait for a process whose binder can read pods back", len(pending))
            return PassResult(waiting=len(pending))
        result = reconcile_pass(self.spool, reader, grace_seconds=self.grace_seconds, by=SERVER_ID)
        for reconciled in result.reconciled:
            BIND_INTENTS_RECONCILED.labels(reconciled.outcome).inc()
        if result.failed:
            BIND_INTENT_RECONCILE_FAILURES.inc(len(result.failed))
        return result
