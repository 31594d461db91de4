"""The history-replay pages: start a replay of recorded history under a candidate profile, follow its
progress, read its report. Thin views over ``dashboard.replays`` (services and selectors) and
``dashboard.ui.replay_presenters``.

A form that cannot start a replay is drawn again with each message beside its field (the service's
``ReplayRequestInvalid.errors``), never a 500. The runner is the deployment's (``SCHEDLENS_REPLAY_RUNNER``): the page
only polls the replay's row for its progress (htmx, as the history polls) and stops once it is finished.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from dashboard.replays.models import HistoryReplay, ReplayStatus
from dashboard.replays.selectors import DEFAULT_LAST, history_replay_get, history_replay_list, history_replay_report
from dashboard.replays.services import MAX_YAML_BYTES, ReplayRequestInvalid, history_replay_start
from dashboard.selectors.profile_versions import profile_version_history
from dashboard.selectors.profiles import profile_configuration
from dashboard.ui import replay_presenters

POLL_SECONDS = 2
"""How often a page with an unfinished replay asks for its progress."""
LIST_LIMIT = 50
"""Replays listed on the form's page, newest first."""

SELECTION_FIELDS = ("last", "since", "until", "namespace", "profile", "node")
FORM_FIELDS = (
    *SELECTION_FIELDS,
    "candidate_source",
    "candidate_profile",
    "candidate_yaml_profile",
    "candidate_yaml",
    "candidate_file",
    "candidate_version",
    "compare_learning",
)
SOURCES = ("profile", "yaml", "version")
MAX_FORM_BYTES = 2 * MAX_YAML_BYTES + 64 * 1024
"""The largest start form read (the YAML pasted or uploaded, and the rest): the project lets request bodies be any
size for the verbs (``DATA_UPLOAD_MAX_MEMORY_SIZE = None``), so this page sets its own bound before Django reads it."""


@dataclass
class StartForm:
    """The start form's values as sent, and the messages by form field (``general``: those naming no field)."""

    values: dict[str, str] = field(default_factory=dict)
    errors: dict[str, list[str]] = field(default_factory=dict)
    general: list[str] = field(default_factory=list)
    note: str = ""

    def add(self, name: str, message: str) -> None:
        self.errors.setdefault(name, []).append(message)

    @property
    def invalid(self) -> bool:
        return bool(self.errors or self.general)


def _uploaded_yaml(request: HttpRequest, form: StartForm) -> str:
    upload = request.FILES.get("candidate_file")
    if upload is None:
        return ""
    data: bytes = upload.read(MAX_YAML_BYTES + 1)
    if len(data) > MAX_YAML_BYTES:
        form.add("candidate_file", f"at most {MAX_YAML_BYTES // 1024} KiB of YAML")
        return ""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        form.add("candidate_file", "must be UTF-8 text (profile YAML)")
        return ""
    if not text.strip():
        form.add("candidate_file", "the file is empty")
    return text


def _field_of(key: str, source: str) -> str:
    """The form field a service error key names: ``selection.<field>`` → ``<field>``; ``candidate_profile`` is the
    profile chosen among the configured ones, or named in the YAML."""
    if key.startswith("selection."):
        key = key.removeprefix("selection.")
    if key == "candidate_profile" and source == "yaml":
        return "candidate_yaml_profile"
    return key


def _start(request: HttpRequest) -> tuple[HistoryReplay | None, StartForm]:
    form = StartForm(values={name: request.POST.get(name, "") for name in FORM_FIELDS if name != "candidate_file"})
    source = form.values.get("candidate_source") or "profile"
    form.values["candidate_source"] = source
    if source not in SOURCES:
        form.add("candidate_source", f"must be one of {', '.join(SOURCES)}")
        return None, form
    uploaded = _uploaded_yaml(request, form)
    pasted = form.values.get("candidate_yaml", "")
    if uploaded.strip() and pasted.strip():
        form.add("candidate_file", "give the profile YAML once: pasted or uploaded, not both")
    yaml_text = uploaded if uploaded.strip() else pasted
    if uploaded.strip():
        form.values["candidate_yaml"] = uploaded  # drawn again in the text box, should the form come back
        form.note = "The uploaded file's YAML is in the text box below."
    if source == "profile" and yaml_text.strip():
        form.add(
            "candidate_source", "profile YAML was given: choose “Profile YAML” to replay it, or remove it from the form"
        )
    if source == "yaml" and not yaml_text.strip() and "candidate_file" not in form.errors:
        form.add("candidate_yaml", "paste profile YAML or upload a file")
    if source == "version" and not form.values.get("candidate_version", "").strip():
        form.add("candidate_version", "choose a recorded profile version")
    if form.invalid:
        return None, form
    selection = {name: form.values[name].strip() for name in SELECTION_FIELDS if form.values.get(name, "").strip()}
    try:
        replay = history_replay_start(
            selection=selection,
            candidate_profile=(
                form.values.get("candidate_profile", "") if source == "profile"
                else form.values.get("candidate_yaml_profile", "") if source == "yaml"
                else ""
            ),
            candidate_yaml=yaml_text if source == "yaml" else "",
            candidate_version=form.values.get("candidate_version", "").strip() if source == "version" else "",
            created_by=request.user.get_username(),
            compare_learning=form.values.get("compare_learning", ""),
        )  # fmt: skip
    except ReplayRequestInvalid as exc:
        for key, messages in exc.errors.items():
            name = _field_of(key, source)
            if name in FORM_FIELDS:
                form.errors.setdefault(name, []).extend(messages)
            else:
                form.general.extend(f"{key}: {m}" for m in messages)
        if not exc.errors:
            form.general.append(str(exc) or "the replay cannot be started")
        return None, form
    return replay, form


def _list_context() -> dict[str, Any]:
    rows = [replay_presenters.replay_row(r) for r in history_replay_list()[:LIST_LIMIT]]
    return {"rows": rows, "list_polls": any(not r.finished for r in rows), "poll_seconds": POLL_SECONDS}


@require_http_methods(["GET", "POST"])
@login_required
def replays(request: HttpRequest) -> HttpResponse:
    """The form that starts a replay, and the replays kept (newest first)."""
    form = StartForm(values={"candidate_source": "profile"})
    status = 200
    if request.method == "POST":
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > MAX_FORM_BYTES:
            form.general.append(
                f"the form sent {length // 1024:,} KiB; at most {MAX_FORM_BYTES // 1024:,} KiB are read "
                f"(profile YAML: at most {MAX_YAML_BYTES // 1024} KiB)"
            )
            status = 413
        else:
            replay, form = _start(request)
            if replay is not None:
                return HttpResponseRedirect(reverse("ui:replay", args=[replay.pk]), status=303)
    configured = profile_configuration().descriptions
    context = {
        "form": form,
        "profiles": sorted(configured),
        "versions": [entry for entries in profile_version_history().values() for entry in reversed(entries)],
        "default_last": DEFAULT_LAST,
        "max_yaml_kib": MAX_YAML_BYTES // 1024,
        "runner": settings.SCHEDLENS_REPLAY_RUNNER,
        **_list_context(),
    }
    return render(request, "dashboard/replays.html", context, status=status)


@require_GET
@login_required
def replays_list(request: HttpRequest) -> HttpResponse:
    """The list of replays alone (htmx polls it while one of them is unfinished)."""
    return render(request, "dashboard/_replay_list.html", _list_context())


def _replay(pk: int) -> HistoryReplay:
    replay = history_replay_get(replay_id=pk)
    if replay is None:
        raise Http404("no such history replay")
    return replay


def _body_context(replay: HistoryReplay) -> dict[str, Any]:
    report_view = None
    report_error = ""
    if replay.status == ReplayStatus.DONE:
        try:
            report = history_replay_report(replay)
        except (msgspec.ValidationError, TypeError, ValueError) as exc:
            report, report_error = None, f"the stored report cannot be read: {exc}"
        if report is not None:
            report_view = replay_presenters.build_report(report, configured=profile_configuration().descriptions)
        elif not report_error:
            report_error = "the replay finished without a report"
    now = timezone.now()
    return {
        "replay": replay,
        "row": replay_presenters.replay_row(replay),
        "r": report_view,
        "report_error": report_error,
        "poll_seconds": POLL_SECONDS,
        "runner": settings.SCHEDLENS_REPLAY_RUNNER,
        "elapsed": replay_presenters.seconds_between(replay.started_at, replay.finished_at or now),
        "heartbeat_age": replay_presenters.seconds_between(replay.heartbeat_at, now) if not replay.finished else None,
    }


@require_GET
@login_required
def replay(request: HttpRequest, pk: int) -> HttpResponse:
    """One replay: its progress while it runs, then its report."""
    found = _replay(pk)
    context: Mapping[str, Any] = {
        **_body_context(found),
        "selection": replay_presenters.selection_text(found.selection),
    }
    return render(request, "dashboard/replay.html", context)


@require_GET
@login_required
def replay_progress(request: HttpRequest, pk: int) -> HttpResponse:
    """The replay's progress, or its report once finished (htmx polls this; the answer without a poller ends it)."""
    return render(request, "dashboard/_replay_body.html", _body_context(_replay(pk)))
