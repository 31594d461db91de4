"""Traffic learned per workload from the placement outcomes, published where the verbs read it (issue 32, item 3).

The outcome job (:func:`dashboard.outcomes.services.outcomes_refresh`) learns after each run, from the measured
outcomes of the lookback (``scheduler_core.extender.scoring.workload_traffic``: a decayed p90 of each workload's pods'
rates after their warm-up), and publishes the table to Redis. Each serving process reads it back in a thread of its own
(``dashboard.outcomes.learned_table``) into the
:class:`~scheduler_core.extender.scoring.workload_traffic.LearnedTrafficStore` its verbs read: no verb ever waits on the
database, Prometheus or this Redis key.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import redis

from dashboard.outcomes.codec import windows_decode
from dashboard.outcomes.learned_table import PROCESS_LEARNED, learned_key
from dashboard.outcomes.models import OutcomeStatus, PlacementOutcome
from dashboard.traffic.clients import worker_client
from scheduler_core.extender.protocol.workloads import WorkloadKey, workload_of
from scheduler_core.extender.scoring.workload_traffic import (
    LOOKBACK_DAYS,
    LearnedTraffic,
    PodSample,
    encode_learned,
    learn,
    rate_after_warmup,
)

log = logging.getLogger(__name__)


def samples_since(since: datetime) -> dict[WorkloadKey, list[PodSample]]:
    """Each workload's measured pods bound since ``since``: their rates past the first window, when they bound."""
    found: dict[WorkloadKey, list[PodSample]] = {}
    rows = (
        PlacementOutcome.objects.filter(bound_at__gte=since, status=OutcomeStatus.MEASURED)
        .exclude(workload_kind="")
        .values_list("pod_namespace", "workload_kind", "workload_name", "bound_at", "windows")
    )
    for namespace, kind, name, bound_at, windows in rows.iterator(chunk_size=2000):
        key = workload_of(namespace, kind, name)
        rate = rate_after_warmup((w.seconds, w.pod_bytes) for w in windows_decode(windows))
        if key is not None and rate is not None:
            found.setdefault(key, []).append(PodSample(rate, bound_at.timestamp()))
    return found


def learn_and_publish(*, now: float) -> LearnedTraffic:
    """Learn from the outcomes of the lookback; set this process's table and publish it (a Redis failure is logged:
    the serving processes keep the table they have)."""
    since = datetime.fromtimestamp(now, tz=UTC) - timedelta(days=LOOKBACK_DAYS)
    table = learn(samples_since(since), now)
    PROCESS_LEARNED.current = table
    try:
        worker_client().set(learned_key(), encode_learned(table), ex=LOOKBACK_DAYS * 86400)
    except redis.RedisError as exc:
        log.warning("learned workload traffic: could not publish to redis: %s", exc)
    return table
