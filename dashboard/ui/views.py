"""The operator dashboard: history, decision, what-if, nodes, health. Thin views over selectors and presenters."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, QueryDict
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from dashboard.filters import CycleFilterSet
from dashboard.models import NodeMode, Outcome, SchedulingCycle
from dashboard.outcomes.selectors import outcome_figures, outcome_get
from dashboard.placements.selectors import pending_glimpse
from dashboard.replays.learning import learning_what_if
from dashboard.selectors.cycles import (
    BadCursorError,
    Cursor,
    cycle_get_read,
    cycle_history_newer,
    cycle_history_page,
    cycle_newest_started_at,
    cycle_traffic_terms,
)
from dashboard.selectors.nodes import node_report
from dashboard.selectors.profile_versions import (
    RecordedVersion,
    cycle_profile_version,
    profile_version_first_served,
)
from dashboard.selectors.profiles import ConfiguredProfiles, profile_configuration
from dashboard.ui import candidate_table, presenters, selectors
from dashboard.ui.whatif import parse_what_if
from scheduler_core.history_replay.report import CONSTANT, LEARNED
from scheduler_core.history_replay.scenarios import recorded_scenario
from scheduler_core.history_replay.what_if import RecordedInputs, compare, replay

POLL_SECONDS = 5
PROFILES_UNREADABLE = 503
"""The status of a page whose profiles file cannot be read, as the audit API answers: the page still shows what the
record holds and names the problem (``base.html``), and the status tells a probe the deployment needs fixing."""


def _profiles_context(configured: ConfiguredProfiles) -> dict[str, Any]:
    return {"profiles_problem": configured.problem, "profiles_path": configured.path}


def _status(configured: ConfiguredProfiles) -> int:
    return PROFILES_UNREADABLE if configured.problem else 200


def _filterset(request: HttpRequest) -> CycleFilterSet:
    # The audit API's FilterSet: a dashboard URL and an API query mean the same rows.
    # The form submits every field; an empty one means "any", not "equal to the empty string".
    params = QueryDict(mutable=True)
    for name, values in request.GET.lists():
        kept = [v for v in values if v.strip()]
        if kept and name not in {"before", "after", "why_not"}:
            params.setlist(name, kept)
    return CycleFilterSet(params, queryset=SchedulingCycle.objects.all())


def _filter_query(request: HttpRequest) -> str:
    params = QueryDict(mutable=True)
    for name, values in request.GET.lists():
        kept = [v for v in values if v.strip()]
        if kept and name not in {"before", "after"}:
            params.setlist(name, kept)
    return params.urlencode()


@require_GET
@login_required
def history(request: HttpRequest) -> HttpResponse:
    filterset = _filterset(request)
    before = None
    if request.GET.get("before"):
        try:
            before = Cursor.decode(request.GET["before"])
        except BadCursorError as exc:
            return HttpResponseBadRequest(str(exc))
    valid = filterset.is_valid()
    configured = profile_configuration()
    page = cycle_history_page(queryset=filterset.qs if valid else SchedulingCycle.objects.none(), before=before)
    context = {
        "filterset": filterset,
        "errors": filterset.errors if not valid else {},
        "values": request.GET,
        "page": page,
        "filter_query": _filter_query(request),
        "first_page": before is None,
        "poll_seconds": POLL_SECONDS,
        "outcomes": Outcome.choices,
        "profiles": sorted(configured.descriptions),
        "now": timezone.now(),
        "waiting": pending_glimpse(),
        **_profiles_context(configured),
    }
    return render(request, "dashboard/history.html", context, status=_status(configured))


@require_GET
@login_required
def history_new_rows(request: HttpRequest) -> HttpResponse:
    """The rows recorded since the page was drawn (htmx polls this), plus a poller that remembers the newest."""
    filterset = _filterset(request)
    try:
        after = int(request.GET.get("after", "0"))
    except ValueError:
        return HttpResponseBadRequest("after: must be a cycle id")
    rows = cycle_history_newer(queryset=filterset.qs, after_id=after) if filterset.is_valid() else []
    if not rows:
        return HttpResponse(status=204)  # htmx swaps nothing on 204
    return render(request, "dashboard/_history_new_rows.html", {"rows": rows})


def _decision(pk: int) -> tuple[presenters.Decision, RecordedVersion]:
    """The cycle explained under the profile version it recorded (never the profiles file this process has now)."""
    found = cycle_get_read(cycle_id=pk)
    if found is None:
        raise Http404("no such scheduling cycle")
    cycle = found.cycle
    recorded = cycle_profile_version(profile=cycle.profile, digest=cycle.profile_version)
    # the window and staleness limit the audit API explains with
    terms = cycle_traffic_terms(profile=cycle.profile, profile_version=cycle.profile_version)
    return presenters.build_decision(cycle, found.calls, recorded.description, traffic_terms=terms), recorded


def _why_not(decision: presenters.Decision, node: str) -> tuple[presenters.WhyNot | None, str]:
    if not node:
        return None, ""
    result = presenters.why_not(decision, node)
    return result, "" if result is not None else f"{node} was not a candidate in this cycle."


@require_GET
@login_required
def decision(request: HttpRequest, pk: int) -> HttpResponse:
    configured = profile_configuration()
    view, recorded = _decision(pk)
    why_not_node = request.GET.get("why_not", "")
    why, why_error = _why_not(view, why_not_node)
    context = {
        "d": view,
        "cycle": view.cycle,
        "explanation": presenters.explanation_lines(view),
        "why_not": why,
        "why_not_node": why_not_node,
        "why_not_error": why_error,
        "chart": presenters.chart_data(view),
        "candidate_rows": candidate_table.candidate_rows(view),
        "why_not_options": candidate_table.why_not_options(view, why_not_node),
        "node_modes": dict(NodeMode.choices),
        "outcome": (found := outcome_get(cycle_id=pk)) and outcome_figures(found),
        "profile_version": recorded,
        "profile_version_first_served": profile_version_first_served(digest=recorded.digest),
        **_profiles_context(configured),
    }
    return render(request, "dashboard/decision.html", context, status=_status(configured))


@require_GET
@login_required
def why_not(request: HttpRequest, pk: int) -> HttpResponse:
    # Answered 200 even when the profiles file cannot be read: the comparison comes from the record, htmx swaps only a
    # 2xx, and the decision page around this fragment names the problem.
    view, _ = _decision(pk)
    node = request.GET.get("why_not", "")
    why, why_error = _why_not(view, node)
    response = render(
        request,
        "dashboard/_why_not.html",
        {"d": view, "cycle": view.cycle, "why_not": why, "why_not_node": node, "why_not_error": why_error},
    )
    # The address bar shows the page that renders the same comparison without JavaScript.
    response["HX-Push-Url"] = f"{reverse('ui:decision', args=[pk])}?{urlencode({'why_not': node})}"
    return response


@require_GET
@login_required
def what_if(request: HttpRequest, pk: int) -> HttpResponse:
    configured = profile_configuration()
    view, recorded = _decision(pk)
    profiles: Mapping[str, dict[str, Any]] = configured.descriptions
    inputs = RecordedInputs.from_records(view.filter_record, view.prioritize_record, view.filter_plugins)
    # "Before" answers on the scale the cycle answered on, so it shows what kube-scheduler received, with the weights
    # the cycle actually used (they win over today's configuration).
    recorded_scale = inputs.answer_scale if inputs.prioritize is not None else None
    weights = [(p.name, p.weight) for p in inputs.prioritize.plugins] if inputs.prioritize is not None else None
    # "Before" is the version the cycle recorded (filters, threshold, missing policy), never today's file.
    base = recorded_scenario(recorded.description, weights, view.filter_plugins, answer_scale=recorded_scale)
    if view.window_seconds is not None:
        base = dataclasses.replace(base, window_seconds=view.window_seconds)
        window_text = view.traffic_terms.window_text
    else:
        # A threshold compares raw bytes / window: without the profile's window the replay needs one, so it takes
        # timeRangeInMinutes' default and says it is an assumption, not the cycle's window.
        assumed = f"replayed as if {base.window_seconds // 60} min, timeRangeInMinutes' default"
        window_text = f"{view.traffic_terms.window_text}; {assumed}"
    form = parse_what_if(request.GET, base=base, profiles=profiles)
    before = replay(inputs, base)
    learning = None
    if form.submitted and form.learning:
        learning = learning_what_if(
            cycle_id=pk,
            inputs=inputs,
            description=recorded.description or {},
            mode=LEARNED if form.learning == "on" else CONSTANT,
        )
    after = replay(learning.inputs if learning is not None else inputs, form.scenario) if form.submitted else None
    context = {
        "d": view,
        "cycle": view.cycle,
        "form": form,
        "profiles": sorted(profiles),
        "before": before,
        "after": after,
        "changes": compare(before, after) if after is not None else [],
        "replayable": bool(inputs.candidates),
        "window_text": window_text,
        "profile_version": recorded,
        "learning": learning,
        **_profiles_context(configured),
    }
    return render(request, "dashboard/what_if.html", context, status=_status(configured))


NODES_PER_PAGE = 200
"""Rows of the nodes table per page: a large cluster's every node in one page is more HTML than a person reads."""


@require_GET
@login_required
def nodes(request: HttpRequest) -> HttpResponse:
    report = node_report()
    selected_name = request.GET.get("node", "")
    selected = next((n for n in report.nodes if n.name == selected_name), None)
    if selected is None and report.nodes and not selected_name:
        selected = report.nodes[0]
    chart = None
    if selected is not None:
        chart = {
            "node": selected.name,
            "points": [
                {"t": at.isoformat(), "mb": None if value is None else round(value / 1e6, 3)}
                for at, value in selected.traffic
            ],
        }
    context = {
        "report": report,
        "page": Paginator(report.nodes, NODES_PER_PAGE).get_page(request.GET.get("page")),
        "selected": selected,
        "selected_name": selected_name,
        "chart": chart,
        "unmatched": [n for n in report.nodes if n.unmatched],
    }
    return render(request, "dashboard/nodes.html", context)


@require_GET
@login_required
def health(request: HttpRequest) -> HttpResponse:
    depth, spool_error = selectors.spool_depth()
    refreshes = selectors.traffic_refreshes()
    newest = cycle_newest_started_at()
    context = {
        "verbs": selectors.verb_health(),
        "recorded_traffic": selectors.recorded_traffic(),
        "process_traffic": selectors.process_traffic(),
        "spool_depth": depth,
        "spool_error": spool_error,
        "spool_dir": str(settings.SCHEDLENS_SPOOL_DIR),
        "newest": newest,
        "newest_age": (timezone.now() - newest).total_seconds() if newest else None,
        "refreshes": refreshes,
        "workers": selectors.worker_liveness(refreshes),
        "traffic_backend": settings.SCHEDLENS_TRAFFIC_BACKEND,
    }
    return render(request, "dashboard/health.html", context)
