"""``manage.py replay_history`` prints the report (text or JSON) with a progress bar on stderr; ``manage.py
run_replays`` runs what is queued; the claim never hands one replay to two runners."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.utils import timezone

from dashboard.replays.models import HistoryReplay, ReplayStatus
from dashboard.replays.services import history_replay_claim, history_replay_run, history_replay_start
from dashboard.selectors.profiles import profile_configuration
from tests.support.paths import REPO

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("replay_history", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_the_command_prints_the_report_and_a_progress_bar(recorded):
    out, err = run("--profile", "gpu-aware", "--last", "30", "--profile-recorded", "default")
    version = profile_configuration().profiles["gpu-aware"].version()
    assert f"Candidate: gpu-aware, version {version} (configured in {settings.SCHEDLENS_CONFIG})" in out
    assert "Cycles: 30 selected, 30 replayed, 0 skipped" in out
    assert "Decisions changed (preferred node differs): " in out
    assert "Placements per node (preferred before → after):" in out
    assert "What a replay cannot know:" in out
    assert "The herd estimate is kept as recorded" in out
    assert "[##############################] 30/30 cycles" in err
    replay = HistoryReplay.objects.get()
    assert replay.status == ReplayStatus.DONE
    assert replay.created_by == "manage.py replay_history"


def test_the_command_prints_json(recorded, tmp_path):
    candidate = tmp_path / "candidate.yaml"
    candidate.write_text(
        "profiles:\n- name: quiet\n  plugins:\n    score: {enabled: [{name: NetworkTraffic, weight: 5}]}\n"
    )
    out, _ = run("--profile-file", str(candidate), "--since", "2000-01-01T00:00:00Z", "-o", "json", "--no-progress")
    body = json.loads(out)
    assert body["report"]["cycles_replayed"] == len(recorded)
    assert body["report"]["candidate"]["label"] == "quiet"
    assert body["report"]["candidate"]["source"] == "yaml"
    assert body["selection"]["since"].startswith("2000-01-01T00:00:00")


def test_the_command_names_what_it_refuses(db, tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        "profiles:\n- name: b\n  pluginConfig:\n  - {name: TrafficThreshold, args: {maxBytesPerSecond: x}}\n"
    )
    with pytest.raises(CommandError, match=r"--profile-file: profile 'b', plugin 'TrafficThreshold': field args\."):
        run("--profile-file", str(broken))
    with pytest.raises(CommandError, match=r"--since: .*date"):
        run("--profile", "default", "--since", "last tuesday")
    with pytest.raises(CommandError, match=r"--profile: no configured profile 'nope'"):
        run("--profile", "nope")
    assert not HistoryReplay.objects.exists()


def test_run_replays_runs_what_is_queued_and_exits_with_once(recorded):
    first = history_replay_start(selection={"last": "5"}, candidate_profile="default")
    second = history_replay_start(selection={"last": "7"}, candidate_profile="gpu-aware")
    out = io.StringIO()
    call_command("run_replays", "--once", stdout=out, stderr=io.StringIO())
    for replay, count in ((first, 5), (second, 7)):
        replay.refresh_from_db()
        assert replay.status == ReplayStatus.DONE
        assert replay.report["cycles_replayed"] == count
    assert f"replay {first.pk} done" in out.getvalue()


def test_a_replay_is_claimed_once_and_an_abandoned_one_is_taken_over(recorded):
    replay = history_replay_start(selection={"last": "5"}, candidate_profile="default")
    assert history_replay_claim(runner="a") == replay.pk
    assert history_replay_claim(runner="b") is None  # running, with a fresh heartbeat
    assert history_replay_run(replay.pk).status == ReplayStatus.RUNNING  # a second delivery does not run it again
    HistoryReplay.objects.filter(pk=replay.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=10))
    assert history_replay_claim(runner="b") == replay.pk  # its runner died
    done = history_replay_run(replay.pk, claimed=True)
    assert done.status == ReplayStatus.DONE
    assert done.runner == "b"
    assert history_replay_run(replay.pk).report == done.report  # finished: left as it is


def test_replays_of_one_name_under_two_profile_files_are_told_apart_by_version(
    recorded, settings, admin_client, tmp_path
):
    """The same name, configured two ways (the demo's file, then a file as bare as the built-in default), is two
    versions."""
    run("--profile", "default", "--last", "5", "--no-progress")
    demo_file = settings.SCHEDLENS_CONFIG
    bare = tmp_path / "bare.yaml"
    bare.write_text("profiles:\n- name: default\n", encoding="utf-8")
    settings.SCHEDLENS_CONFIG = str(bare)
    other, _ = run("--profile", "default", "--last", "5", "--no-progress")
    assert f"(configured in {bare})" in other
    versions = [replay.candidate_scenario["version"] for replay in HistoryReplay.objects.order_by("id")]
    assert len(set(versions)) == 2
    listed = admin_client.get("/replays/").content.decode()
    for version in versions:
        assert f"configured, version {version}" in listed
    first = admin_client.get(f"/replays/{HistoryReplay.objects.order_by('id').first().pk}/").content.decode()
    assert f"default, version {versions[0]} (configured in {demo_file})" in first


def test_a_name_without_a_profiles_file_is_its_newest_recorded_version_and_says_so(recorded, settings):
    version = profile_configuration().profiles["gpu-aware"].version()
    settings.SCHEDLENS_CONFIG = ""  # a shell beside the server: the built-in default knows no gpu-aware
    out, err = run("--profile", "gpu-aware", "--last", "5", "--no-progress")
    assert err.startswith(
        f"no profiles file is configured for profile 'gpu-aware' here: replaying its newest recorded version {version}"
    )
    assert f"Candidate: gpu-aware, version {version} (a recorded profile version)" in out


@pytest.mark.parametrize("first", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize(
    "command",
    [["run_replays", "--interval", "60"], ["ingest_spool", "--follow", "--interval", "60", "--preparers", "0"]],
)
def test_long_running_commands_stop_on_a_burst_of_signals(tmp_path, first, command):
    """Ctrl-C on ``make run`` or ``make serve`` reaches the whole process group, then its trap sends SIGTERM: the
    command gets two signals (or more) and must stop on them, not hang (``dashboard.management.stop_signals``)."""
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "SCHEDLENS_SPOOL_DIR": str(tmp_path / "spool"),
        "SCHEDLENS_VAR_ROOT": str(tmp_path),
    }
    migrated = subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"], cwd=REPO, env=env, capture_output=True, timeout=120
    )
    assert migrated.returncode == 0, migrated.stderr
    runner = subprocess.Popen(
        [sys.executable, "manage.py", *command],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not catches(runner.pid, signal.SIGTERM):  # its handlers are in place: the loop has started
            assert runner.poll() is None
            assert time.monotonic() < deadline
            time.sleep(0.05)
        runner.send_signal(first)
        with contextlib.suppress(ProcessLookupError):  # the runner may be gone before the burst ends
            for _ in range(3000):
                os.kill(runner.pid, signal.SIGTERM)
        # It stops: 0, or the burst's last SIGTERMs meeting the default handler Python restores as it exits.
        assert runner.wait(timeout=30) in (0, -signal.SIGTERM)
    finally:
        runner.kill()
        runner.wait()


def catches(pid: int, sig: signal.Signals) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (the SigCgt mask of /proc/<pid>/status)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        caught = next(line for line in status if line.startswith("SigCgt:")).split()[1]
    return bool(int(caught, 16) & (1 << (sig - 1)))
