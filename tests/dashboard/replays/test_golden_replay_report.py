"""A history replay's stored report (``HistoryReplay.report``) reads back as its writer was given it, a report kept
before the learning comparison included (``learning`` reads as None), and the current writer writes the same bytes
(``tests/golden/replays``)."""

from __future__ import annotations

import msgspec
import pytest

from dashboard.replays.models import HistoryReplay
from dashboard.replays.selectors import history_replay_report
from tests.golden.registry import REPLAY_REPORT, data, meta, of_kind

TESTED = {REPLAY_REPORT}


@pytest.mark.parametrize("name", of_kind(REPLAY_REPORT))
def test_a_stored_replay_report_reads_back_and_is_written_the_same(name: str) -> None:
    stored = msgspec.json.decode(data(name))  # what PostgreSQL's jsonb hands back
    report = history_replay_report(HistoryReplay(report=stored))
    assert report is not None
    assert msgspec.to_builtins(report) == meta(name)["values"]
    if "learning" in stored:  # written by the current writer (the services' ``msgspec.to_builtins``)
        assert msgspec.json.encode(msgspec.to_builtins(report)) == data(name)
    else:
        assert report.learning is None
