"""The Celery app: settings under the ``CELERY_`` namespace, tasks autodiscovered, beat schedule from the profiles.

Run ``celery -A config worker`` and ``celery -A config beat`` (see the Makefile and docker-compose.yml).

Every task runs through :class:`PoisonGuardTask`: tasks are acknowledged late and given back when their worker
dies (``CELERY_TASK_REJECT_ON_WORKER_LOST``), so a message that kills its worker every time would be redelivered
forever. The guard counts deliveries per task id in Redis *before* running the task (the count survives the
worker's death) and parks a message delivered more than ``SCHEDLENS_CELERY_MAX_DELIVERIES`` times in the
dead-letter list ``<SCHEDLENS_REDIS_PREFIX>celery:dead-letter`` instead of running it again.
"""

import contextlib
import json
import logging
import os
import time
from typing import Any

import redis
from celery import Celery, Task

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

log = logging.getLogger(__name__)

DELIVERY_COUNT_TTL_SECONDS = 24 * 3600
DEAD_LETTER_KEEP = 1000


class PoisonGuardTask(Task[Any, Any]):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        request = self.request
        key = _deliveries_key(request.id) if request.id and not request.called_directly else None
        if key is not None and _delivered_too_often(self, key, args, kwargs):
            return None  # acknowledged without running: parked
        try:
            return super().__call__(*args, **kwargs)
        finally:
            if key is not None:  # the worker survived the task (it returned or raised): forget the count
                _forget(key)


app = Celery("schedlens", task_cls=PoisonGuardTask)
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


# The app's modules are imported in the functions that use them: this module is loaded with the settings
# (config/__init__.py), before Django's apps are.
def _client() -> redis.Redis:
    from dashboard.traffic.clients import worker_client

    return worker_client()


def _deliveries_key(task_id: str) -> str:
    from django.conf import settings

    return f"{settings.SCHEDLENS_REDIS_PREFIX}celery:deliveries:{task_id}"


def dead_letter_key() -> str:
    from django.conf import settings

    return f"{settings.SCHEDLENS_REDIS_PREFIX}celery:dead-letter"


def _delivered_too_often(task: Task[Any, Any], key: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    from django.conf import settings

    limit = settings.SCHEDLENS_CELERY_MAX_DELIVERIES
    try:
        pipe = _client().pipeline(transaction=False)
        pipe.incr(key)
        pipe.expire(key, DELIVERY_COUNT_TTL_SECONDS)
        deliveries = int(pipe.execute()[0])
        if deliveries <= limit:
            return False
        entry = {
            "task": task.name,
            "id": task.request.id,
            "args": args,
            "kwargs": kwargs,
            "deliveries": deliveries,
            "parked_at": time.time(),
        }
        pipe = _client().pipeline(transaction=False)
        pipe.lpush(dead_letter_key(), json.dumps(entry, default=str))
        pipe.ltrim(dead_letter_key(), 0, DEAD_LETTER_KEEP - 1)
        pipe.delete(key)
        pipe.execute()
    except redis.RedisError:
        # Without the count, run the task: a poison message then loops as it would without the guard, a good one
        # is not dropped because Redis hiccuped.
        log.warning("could not count the deliveries of task %s; running it", task.request.id, exc_info=True)
        return False
    log.error(
        "task %s[%s] was delivered %d times and its worker died each time; parked in %s, not run again",
        task.name,
        task.request.id,
        deliveries,
        dead_letter_key(),
    )
    return True


def _forget(key: str) -> None:
    with contextlib.suppress(redis.RedisError):  # the count expires by itself
        _client().delete(key)


@app.on_after_configure.connect
def _schedule_traffic_prefetch(sender: Celery, source: object, **kwargs: object) -> None:
    """One prefetch per distinct traffic query among the profiles, every SCHEDLENS_TRAFFIC_REFRESH_SECONDS."""
    from django.conf import settings

    from dashboard.selectors.profiles import profile_configuration
    from dashboard.traffic.schedule import traffic_beat_schedule

    schedule = traffic_beat_schedule(
        profile_configuration().required(), refresh_seconds=settings.SCHEDLENS_TRAFFIC_REFRESH_SECONDS
    )
    if settings.SCHEDLENS_OUTCOME_RUNNER == "celery":  # what each placement did to traffic (dashboard.outcomes)
        from dashboard.traffic.schedule import OUTCOMES_TASK  # no model import: Django's apps are not ready here

        interval = settings.SCHEDLENS_OUTCOME_INTERVAL_SECONDS
        schedule["placement-outcomes"] = {"task": OUTCOMES_TASK, "schedule": interval, "options": {"expires": interval}}
    sender.conf.beat_schedule = {**schedule, **(sender.conf.beat_schedule or {})}
