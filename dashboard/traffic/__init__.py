"""Traffic prefetch: Celery workers refresh one snapshot per query into Redis; the verbs read them from there."""
