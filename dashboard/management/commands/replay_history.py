"""``manage.py replay_history``: replay a stretch of recorded history under a candidate profile and print what would
have changed (the report the dashboard and the API show), with a progress bar on stderr.

The replay is kept like one started from the dashboard (its row, with the report); it runs here, in this process.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import msgspec
from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.replays.selectors import history_replay_report
from dashboard.replays.services import (
    ReplayRequestInvalid,
    candidate_validate,
    history_replay_run,
    history_replay_start,
)
from scheduler_core.history_replay.report_text import report_lines


class Command(BaseCommand):
    help = (
        "Replay recorded cycles under a candidate profile (a configured one, or a profiles file) and report what "
        "would have changed: decisions, feasibility, ties, placements per node, traffic balance, new rejections."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        candidate = parser.add_mutually_exclusive_group(required=True)
        candidate.add_argument(
            "--profile",
            help="a configured profile to replay under (without a profiles file configuring it: its newest recorded "
            "version, said on stderr)",
        )
        candidate.add_argument("--profile-version", help="a recorded profile version to replay under (its digest)")
        candidate.add_argument("--profile-file", type=Path, help="profile YAML (one profile, or name it with --name)")
        parser.add_argument("--name", default="", help="with --profile-file: the profile of the file to replay under")
        parser.add_argument("--since", help="cycles started at or after (ISO 8601)")
        parser.add_argument("--until", help="cycles started before (ISO 8601)")
        parser.add_argument("--last", type=int, help="the newest N cycles (of the range, when given)")
        parser.add_argument("--namespace", help="pods of this namespace only")
        parser.add_argument("--profile-recorded", help="cycles recorded under this profile only")
        parser.add_argument("--node", help="cycles with this node among the candidates only")
        parser.add_argument(
            "--compare-learning",
            choices=("on", "off"),
            default="",
            help="also compare, under the candidate, the herd estimate with traffic learned per workload against "
            "the constant assumedBytesPerPod (on: constant → learned; off: learned → constant)",
        )
        parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    def handle(self, *args: Any, **options: Any) -> None:
        yaml_text = ""
        if options["profile_file"] is not None:
            try:
                yaml_text = options["profile_file"].read_text(encoding="utf-8")
            except OSError as exc:
                raise CommandError(f"--profile-file: {exc}") from None
            if not yaml_text.strip():
                raise CommandError("--profile-file: the file is empty")
        selection = {
            "since": options["since"],
            "until": options["until"],
            "last": options["last"],
            "namespace": options["namespace"],
            "profile": options["profile_recorded"],
            "node": options["node"],
        }
        try:
            if options["profile"]:  # how the name was resolved, before the replay says what it found
                note = candidate_validate(candidate_profile=options["profile"]).note
                if note:
                    self.stderr.write(note)
            replay = history_replay_start(
                selection={k: v for k, v in selection.items() if v is not None},
                candidate_profile=options["profile"] or options["name"],
                candidate_yaml=yaml_text,
                candidate_version=options["profile_version"] or "",
                created_by="manage.py replay_history",
                runner="none",
                compare_learning=options["compare_learning"],
            )
        except ReplayRequestInvalid as exc:
            flags = {
                "candidate_profile": "--profile",
                "candidate_yaml": "--profile-file",
                "candidate_version": "--profile-version",
                "compare_learning": "--compare-learning",
            }
            problems = "; ".join(
                f"{flags.get(field, '--' + field.removeprefix('selection.').replace('profile', 'profile-recorded'))}: "
                f"{' '.join(messages)}"
                for field, messages in exc.errors.items()
            )
            raise CommandError(problems) from None
        show = not options["no_progress"]
        started = time.monotonic()

        def progress(done: int, total: int) -> None:
            if not show:
                return
            width = 30
            filled = int(width * done / total) if total else width
            elapsed = time.monotonic() - started
            rate = done / elapsed if elapsed > 0 else 0.0
            self.stderr.write(
                f"\r[{'#' * filled}{'.' * (width - filled)}] {done:,}/{total:,} cycles  {rate:,.0f} cycles/s", ending=""
            )
            self.stderr.flush()

        try:
            replay = history_replay_run(replay.pk, progress=progress)
        except Exception as exc:
            raise CommandError(f"replay {replay.pk} failed: {exc}") from None
        finally:
            if show:
                self.stderr.write("")
        report = history_replay_report(replay)
        if report is None:
            raise CommandError(f"replay {replay.pk} ended {replay.status} without a report: {replay.error}")
        if options["output"] == "json":
            body = {"id": replay.pk, "selection": replay.selection, "report": msgspec.to_builtins(report)}
            self.stdout.write(msgspec.json.encode(body).decode())
        else:
            self.stdout.write(f"History replay {replay.pk}")
            self.stdout.write("\n".join(report_lines(report)))
