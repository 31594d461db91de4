"""The verbs' own metrics: latency and answers per verb and profile, and answers that tied on the 0..10 scale.

Observed in the web process that answered; ``GET /metrics`` (``dashboard/metrics.py``) exposes them, summed
over gunicorn's workers through prometheus-client's multiprocess directory when ``PROMETHEUS_MULTIPROC_DIR`` is
set. Profile labels are limited to the configured profiles (anything else is ``unknown``): the path is chosen by
the caller, and a label per typo would grow the series without bound.
"""

from __future__ import annotations

import os

from prometheus_client import Counter, Histogram

from scheduler_core.extender.record.structs import PrioritizeRecord
from scheduler_core.extender.scoring.answer import preference_tied

if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    # Any process importing the URLconf (checks, management commands) creates these metrics' files.
    os.makedirs(os.environ["PROMETHEUS_MULTIPROC_DIR"], exist_ok=True)

VERB_SECONDS = Histogram(
    "schedlens_verb_duration_seconds",
    "Time to answer an extender verb, from the request body read to the answer (spool append included).",
    ["verb", "profile"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
VERB_RESPONSES = Counter(
    "schedlens_verb_responses", "Extender verb answers by HTTP status.", ["verb", "profile", "status"]
)
ANSWER_TIES = Counter(
    "schedlens_answer_ties",
    "Prioritize answers where our preferred node tied with a lower-scored node on the 0..10 scale "
    "(kube-scheduler saw them as equal).",
    ["profile"],
)


def observe_verb(*, verb: str, profile: str, known: bool, status: int, seconds: float) -> None:
    label = profile if known else "unknown"
    VERB_SECONDS.labels(verb, label).observe(seconds)
    VERB_RESPONSES.labels(verb, label, str(status)).inc()


def observe_prioritize(*, profile: str, known: bool, status: int, record: PrioritizeRecord | None) -> None:
    """A prioritize answered: count it in ``schedlens_answer_ties_total`` when rounding erased our preference.

    Only an answer kube-scheduler received (200) counts."""
    if status == 200 and record is not None and preference_tied(record.final, record.extender):
        ANSWER_TIES.labels(profile if known else "unknown").inc()
