"""The Celery app: settings under the ``CELERY_`` namespace, tasks autodiscovered, beat schedule from the profiles.

Run ``celery -A dashboard worker`` and ``celery -A dashboard beat`` (see the Makefile and docker-compose.yml).
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

app = Celery("schedlens")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _schedule_traffic_prefetch(sender: Celery, source: object, **kwargs: object) -> None:
    """One prefetch per distinct traffic query among the profiles, every SCHEDLENS_TRAFFIC_REFRESH_SECONDS."""
    from django.conf import settings

    from dashboard.extender.runtime import load_runtime_profiles
    from dashboard.traffic.schedule import traffic_beat_schedule

    schedule = traffic_beat_schedule(
        load_runtime_profiles(), refresh_seconds=settings.SCHEDLENS_TRAFFIC_REFRESH_SECONDS
    )
    sender.conf.beat_schedule = {**schedule, **(sender.conf.beat_schedule or {})}
