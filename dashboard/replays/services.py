"""History replays: start one (validate the selection and the candidate, keep the row), run one (in chunks, progress
on its row), claim the next queued one (the ``process`` runner).

Entry points (the dashboard page, the API, ``manage.py replay_history``, the Celery task, ``manage.py run_replays``)
call these and nothing else that writes a replay's row:

- :func:`history_replay_start` validates and creates the row (status ``queued``) and, once the transaction
  commits, hands it to the configured runner (``SCHEDLENS_REPLAY_RUNNER``). Bad input raises
  :class:`ReplayRequestInvalid`, whose ``errors`` name the field (``candidate_yaml``'s message names the profile,
  the plugin and the field, as ``scheduler_core.extender.scoring.profiles`` words it): a 400 or a form error, never a
  500.
- :func:`history_replay_run` replays the selected cycles in chunks of ``SCHEDLENS_REPLAY_CHUNK_CYCLES``, writing
  ``progress_done``/``progress_total`` after each, and the report
  (``scheduler_core.history_replay.report_builder``) at the end.
- :func:`history_replay_claim` takes the oldest queued row for a runner process.

A replay only reads the recorded cycles: it never touches the verbs' processes, the cluster or Prometheus.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from dashboard.models import ProfileVersion
from dashboard.replays.learning import learning_comparer
from dashboard.replays.models import CandidateSource, CompareLearning, HistoryReplay, ReplayStatus
from dashboard.replays.selectors import ReplaySelection, replay_cycle_ids, replay_cycles, selection_from_input
from dashboard.selectors.profile_versions import (
    profile_version_descriptions,
    profile_version_get,
    profile_version_newest,
)
from dashboard.selectors.profiles import profile_configuration
from dashboard.storage.replay_inputs import CycleReader
from scheduler_core.extender.scoring.profiles import Profile, ProfileError, load_profiles
from scheduler_core.history_replay.report import CONSTANT, LEARNED, CandidateDescription, HistoryReplayReport
from scheduler_core.history_replay.report_builder import ReportBuilder
from scheduler_core.history_replay.scenarios import candidate_description

logger = logging.getLogger(__name__)

MAX_YAML_BYTES = 256 * 1024
"""The largest candidate profile YAML accepted."""
REPLAY_TASK = "schedlens.run_history_replay"
"""The Celery task that runs a replay (``dashboard.tasks.run_history_replay``), queued by name: a service does not
import the entry points."""

Progress = Callable[[int, int], None]
"""``(done, total)`` after each chunk."""


class ReplayRequestInvalid(ValueError):
    """The replay asked for cannot be started; ``errors`` maps each bad field to its messages."""

    def __init__(self, errors: Mapping[str, list[str]]) -> None:
        self.errors: dict[str, list[str]] = {k: list(v) for k, v in errors.items()}
        first = next(iter(self.errors.items()), ("", [""]))
        super().__init__(f"{first[0]}: {first[1][0]}" if first[0] else first[1][0])


@dataclass(frozen=True, slots=True)
class Candidate:
    """A validated candidate profile."""

    source: str
    """``profile``, ``yaml`` or ``version`` (:class:`~dashboard.replays.models.CandidateSource`)."""
    name: str
    yaml: str
    description: dict[str, Any] = field(repr=False)
    """``Profile.describe()`` of the candidate."""
    profile_file: str = ""
    """A configured candidate's profiles file (empty: the built-in default, or YAML given with the replay)."""
    version: str = ""
    """A recorded version's digest (``version``)."""
    note: str = ""
    """What the caller should be told about how the candidate was found (a name resolved to a recorded version)."""


def _recorded_candidate(stored: ProfileVersion, note: str = "") -> Candidate:
    return Candidate(CandidateSource.VERSION, stored.profile, "", stored.normalized, version=stored.digest, note=note)


def candidate_validate(
    *, candidate_profile: str = "", candidate_yaml: str = "", candidate_version: str = ""
) -> Candidate:
    """The candidate named by a configured profile's name, given as profile YAML (one profile, or several and
    ``candidate_profile`` naming one of them), or a recorded profile version (its digest). A name no profiles file
    here configures resolves to the newest recorded version of that profile, and says so (``Candidate.note``).
    Raises :class:`ReplayRequestInvalid`."""
    name = (candidate_profile or "").strip()
    text = candidate_yaml or ""
    digest = (candidate_version or "").strip()
    if digest:
        if text.strip():
            raise ReplayRequestInvalid({"candidate_version": ["give a recorded version or profile YAML, not both"]})
        stored = profile_version_get(digest=digest)
        if stored is None:
            raise ReplayRequestInvalid({"candidate_version": [f"no recorded profile version {digest!r}"]})
        return _recorded_candidate(stored)
    if text.strip():
        if len(text.encode()) > MAX_YAML_BYTES:
            raise ReplayRequestInvalid({"candidate_yaml": [f"at most {MAX_YAML_BYTES // 1024} KiB of YAML"]})
        try:
            profiles = load_profiles(text)
        except ProfileError as exc:
            raise ReplayRequestInvalid({"candidate_yaml": [str(exc)]}) from None
        if name:
            if name not in profiles:
                known = ", ".join(sorted(profiles))
                raise ReplayRequestInvalid(
                    {"candidate_profile": [f"profile {name!r} is not in candidate_yaml (it defines: {known})"]}
                )
            chosen = profiles[name]
        elif len(profiles) == 1:
            chosen = next(iter(profiles.values()))
        else:
            raise ReplayRequestInvalid(
                {"candidate_profile": [f"candidate_yaml defines {len(profiles)} profiles: name the one to replay"]}
            )
        return Candidate(CandidateSource.YAML, chosen.name, text, chosen.describe())
    if not name:
        raise ReplayRequestInvalid(
            {
                "candidate_profile": [
                    "name a configured profile, give profile YAML in candidate_yaml "
                    "or a recorded version in candidate_version"
                ]
            }
        )
    configuration = profile_configuration()
    configured: Mapping[str, Profile] = configuration.profiles
    if not configuration.path or configuration.error is not None or name not in configured:
        # No profiles file configures it here: the newest version recorded, rather than the built-in default's.
        newest = profile_version_newest(profile=name)
        if newest is not None:
            where = "no profiles file is configured" if not configuration.path else f"{configuration.path} does not"
            if configuration.path and configuration.error is not None:
                where = f"{configuration.path} cannot be read"
            note = f"{where} for profile {name!r} here: replaying its newest recorded version {newest.digest}"
            return _recorded_candidate(newest, note)
    if configuration.error is not None:
        raise ReplayRequestInvalid(
            {"candidate_profile": [f"the profiles configuration cannot be read: {configuration.problem}"]}
        )
    if name not in configured:
        known = ", ".join(sorted(configured))
        raise ReplayRequestInvalid({"candidate_profile": [f"no configured profile {name!r} (configured: {known})"]})
    return Candidate(CandidateSource.PROFILE, name, "", configured[name].describe(), settings.SCHEDLENS_CONFIG)


def history_replay_start(
    *,
    selection: Mapping[str, Any] | ReplaySelection,
    candidate_profile: str = "",
    candidate_yaml: str = "",
    candidate_version: str = "",
    created_by: str = "",
    runner: str | None = None,
    compare_learning: str = "",
) -> HistoryReplay:
    """Validate, create the ``queued`` row, and hand it to ``runner`` (default ``SCHEDLENS_REPLAY_RUNNER``) once
    the transaction commits: ``celery`` queues the task, ``process`` leaves it to ``manage.py run_replays``,
    ``none`` to the caller (``history_replay_run``).

    ``selection``: a :class:`~dashboard.replays.selectors.ReplaySelection`, or its fields as strings from a form or
    JSON (``since``, ``until``: ISO 8601; ``last``: a count; ``namespace``, ``profile``, ``node``); neither a time
    range nor ``last``: the last :data:`~dashboard.replays.selectors.DEFAULT_LAST` cycles.
    ``compare_learning``: ``on`` also compares, over the same cycles under the candidate, the herd estimate with
    traffic learned per workload against the constant; ``off`` the constant against learned traffic; empty: no
    comparison.
    Raises :class:`ReplayRequestInvalid` naming the bad fields (``selection.<field>``, ``candidate_profile``,
    ``candidate_yaml``, ``compare_learning``).
    """
    errors: dict[str, list[str]] = {}
    compare = (compare_learning or "").strip()
    if compare not in CompareLearning.values:
        errors["compare_learning"] = [f"{compare!r} is not one of: on, off (or empty: no comparison)"]
    chosen: ReplaySelection | None = None
    if isinstance(selection, ReplaySelection):
        chosen = selection
    else:
        chosen, selection_errors = selection_from_input(selection)
        errors.update({f"selection.{k}": v for k, v in selection_errors.items()})
    candidate: Candidate | None = None
    try:
        candidate = candidate_validate(
            candidate_profile=candidate_profile, candidate_yaml=candidate_yaml, candidate_version=candidate_version
        )
    except ReplayRequestInvalid as exc:
        errors.update(exc.errors)
    if errors or chosen is None or candidate is None:
        raise ReplayRequestInvalid(errors)
    description = candidate_description(
        candidate.description, source=candidate.source, profile_file=candidate.profile_file
    )
    replay = HistoryReplay.objects.create(
        created_at=timezone.now(),
        created_by=created_by[:150],
        status=ReplayStatus.QUEUED,
        selection=chosen.to_json(),
        candidate_source=candidate.source,
        candidate_profile=candidate.name,
        candidate_yaml=candidate.yaml,
        candidate_version=candidate.version,
        candidate_scenario=msgspec.to_builtins(description),
        compare_learning=compare,
    )
    how = runner or settings.SCHEDLENS_REPLAY_RUNNER
    if how == "celery":
        replay_id = replay.pk
        transaction.on_commit(lambda: _queue(replay_id))
    return replay


def _queue(replay_id: int) -> None:
    from celery import current_app

    try:
        current_app.send_task(REPLAY_TASK, args=[replay_id], queue=settings.SCHEDLENS_REPLAY_QUEUE)
    except Exception as exc:  # broker down: the row says so instead of waiting forever
        logger.exception("history replay %s could not be queued", replay_id)
        HistoryReplay.objects.filter(pk=replay_id, status=ReplayStatus.QUEUED).update(
            status=ReplayStatus.FAILED, error=f"could not be queued: {exc}", finished_at=timezone.now()
        )


STALE_AFTER = timedelta(minutes=2)
"""A ``running`` replay whose runner wrote no progress for this long is taken over (its runner died): progress is
written after every chunk, a second or so apart."""


def _runner_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def history_replay_claim(*, runner: str = "") -> int | None:
    """Mark the oldest queued replay (or one abandoned by its runner: :data:`STALE_AFTER`) ``running`` for this
    process and return its id; None when there is none.

    PostgreSQL: ``SELECT … FOR UPDATE SKIP LOCKED``, so several runners never claim the same row."""
    with transaction.atomic():
        abandoned = Q(status=ReplayStatus.RUNNING) & ~Q(heartbeat_at__gte=timezone.now() - STALE_AFTER)
        queued = HistoryReplay.objects.filter(Q(status=ReplayStatus.QUEUED) | abandoned).order_by("created_at", "id")
        if connection.features.has_select_for_update_skip_locked:
            queued = queued.select_for_update(skip_locked=True)
        replay_id = queued.values_list("id", flat=True).first()
        if replay_id is None:
            return None
        now = timezone.now()
        HistoryReplay.objects.filter(pk=replay_id).update(
            status=ReplayStatus.RUNNING, started_at=now, heartbeat_at=now, runner=(runner or _runner_name())[:128]
        )
    return int(replay_id)


def _take(replay_id: int, runner: str) -> bool:
    """Mark the replay ``running`` for ``runner`` when it is queued, or running but abandoned (:data:`STALE_AFTER`);
    False when another runner has it, or it is finished."""
    now = timezone.now()
    fields = {"status": ReplayStatus.RUNNING, "heartbeat_at": now, "runner": runner[:128]}
    queued = HistoryReplay.objects.filter(pk=replay_id, status=ReplayStatus.QUEUED)
    if queued.update(started_at=now, **fields):
        return True
    abandoned = HistoryReplay.objects.filter(pk=replay_id, status=ReplayStatus.RUNNING).exclude(
        heartbeat_at__gte=now - STALE_AFTER
    )
    return bool(abandoned.update(**fields))


def history_replay_run(
    replay_id: int, *, progress: Progress | None = None, chunk_size: int | None = None, claimed: bool = False
) -> HistoryReplay:
    """Run replay ``replay_id``: replay its cycles chunk by chunk, writing progress after each, then the report
    (``done``), or the error (``failed``, and the exception is raised again).

    Takes the row first (queued, or running with no progress for :data:`STALE_AFTER`), so a task delivered twice
    runs once; ``claimed``: :func:`history_replay_claim` took it for this process already. A replay that is finished,
    or that another runner is running, is returned as it is. ``progress``: called with ``(done, total)`` after each
    chunk (the command's bar)."""
    runner = _runner_name()
    if not claimed and not _take(replay_id, runner):
        return HistoryReplay.objects.get(pk=replay_id)
    replay = HistoryReplay.objects.get(pk=replay_id)
    try:
        report = _run(replay, progress=progress, chunk_size=chunk_size or settings.SCHEDLENS_REPLAY_CHUNK_CYCLES)
    except Exception as exc:
        logger.exception("history replay %s failed", replay_id)
        HistoryReplay.objects.filter(pk=replay_id).update(
            status=ReplayStatus.FAILED, error=f"{type(exc).__name__}: {exc}"[:10_000], finished_at=timezone.now()
        )
        raise
    HistoryReplay.objects.filter(pk=replay_id).update(
        status=ReplayStatus.DONE, report=msgspec.to_builtins(report), finished_at=timezone.now(), error=""
    )
    return HistoryReplay.objects.get(pk=replay_id)


class SelectionTooLarge(ValueError):
    pass


def _run(replay: HistoryReplay, *, progress: Progress | None, chunk_size: int) -> HistoryReplayReport:
    selection = ReplaySelection.from_json(replay.selection)
    limit = settings.SCHEDLENS_REPLAY_MAX_CYCLES
    ids = replay_cycle_ids(selection, limit=limit + 1)
    if len(ids) > limit:
        raise SelectionTooLarge(
            f"the selection holds more than {limit:,} cycles (SCHEDLENS_REPLAY_MAX_CYCLES): narrow the time range "
            "or use last N"
        )
    total = len(ids)
    HistoryReplay.objects.filter(pk=replay.pk).update(progress_total=total, progress_done=0)
    description = msgspec.convert(replay.candidate_scenario, CandidateDescription)
    candidate = candidate_validate(
        candidate_profile=replay.candidate_profile,
        candidate_yaml=replay.candidate_yaml,
        candidate_version=replay.candidate_version,
    )
    reader = CycleReader()
    builder = ReportBuilder(profile_version_descriptions(), candidate.description, description=description)
    comparer = None
    if replay.compare_learning:
        before = CONSTANT if replay.compare_learning == CompareLearning.ON else LEARNED
        comparer = learning_comparer(ids=ids, before=before, candidate=candidate.description)
    started = datetime.now(UTC)
    done = 0
    if progress is not None:
        progress(0, total)
    for start in range(0, total, chunk_size):
        chunk = ids[start : start + chunk_size]
        for cycle in replay_cycles(chunk, reader=reader):
            builder.add(cycle)
            if comparer is not None and not cycle.skipped:
                comparer.add(cycle, builder.scenarios(cycle)[1])
        done += len(chunk)
        HistoryReplay.objects.filter(pk=replay.pk).update(progress_done=done, heartbeat_at=timezone.now())
        if progress is not None:
            progress(done, total)
    report = builder.report(cycles_selected=total)
    if comparer is not None:
        report.learning = comparer.report()
    report.seconds = round((datetime.now(UTC) - started).total_seconds(), 3)
    return report
