"""``/balance/``: is traffic balanced? The spread of the nodes each profile places on over time, how often the chosen
node stayed the quietest, and the herd estimate's error per workload kind (the same reads as ``/api/v1/balance/``)."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from dashboard.outcomes.selectors import balance_series, pod_error_histograms, quietest_shares

HOURS = (1, 6, 24, 24 * 7)
TABLE_ROWS = 30


@require_GET
@login_required
def balance(request: HttpRequest) -> HttpResponse:
    text = request.GET.get("hours", "6")
    hours = int(text) if text.isdigit() and int(text) in HOURS else None
    if hours is None:
        return HttpResponse(f"hours: one of {', '.join(map(str, HOURS))}", status=400, content_type="text/plain")
    now = timezone.now()
    since = now - timedelta(hours=hours)
    series = balance_series(since=since)
    chart: dict[str, list[dict[str, object]]] = {}
    for sample in series:
        chart.setdefault(sample.profile, []).append({"x": sample.at.isoformat(), "y": sample.cv})
    context = {
        "hours": hours,
        "hour_choices": HOURS,
        "latest": list(reversed(series))[:TABLE_ROWS],
        # The time axis spans the period chosen, not the samples' own range: one sample is not a whole axis.
        "chart": {"profiles": chart, "since": since.isoformat(), "until": now.isoformat()},
        "quietest": quietest_shares(since=since),
        "histograms": pod_error_histograms(since=since),
    }
    return render(request, "dashboard/balance.html", context)
