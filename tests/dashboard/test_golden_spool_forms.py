"""Spooled records and spool files as earlier versions wrote them read back field for field (``tests/golden``).

Each fixture was written once by the commit that wrote its form (``tests/golden/make_fixtures.py``); what it must
read back as is what that writer was given. A record from before a field existed reads with the value written by
hand for it (``LATER`` there): ``answer_scale`` "fixed", no herd binds, and so on.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dashboard.spool import Spool
from scheduler_core.extender.record.spool_codec import answer_of, decode_event, decode_intent
from tests.golden.registry import (
    BIND_INTENT,
    GOLDEN,
    SPOOL_FILE,
    SPOOL_RECORD,
    data,
    differences,
    every_field,
    meta,
    of_kind,
)

TESTED = {SPOOL_RECORD, SPOOL_FILE, BIND_INTENT}
"""The fixture kinds this module reads (``test_golden_registry`` checks each registered kind is read somewhere)."""


@pytest.mark.parametrize("name", of_kind(SPOOL_RECORD))
def test_a_spooled_record_reads_back_as_its_writer_was_given_it(name: str) -> None:
    expected = meta(name)["expected"]
    event = decode_event(data(name))
    assert list(differences(every_field(event), expected)) == []


@pytest.mark.parametrize("name", of_kind(SPOOL_RECORD))
def test_the_ingester_reads_a_spooled_record_and_its_answer(name: str) -> None:
    """``derive_answer=False``, as the ingester reads: a derived answer stays out, and ``answer_of`` writes it."""
    expected = meta(name)["expected"]
    event = decode_event(data(name), derive_answer=False)
    assert answer_of(event) == expected["response"].encode()
    fields = every_field(event)
    if expected["answer_derived"] and expected["prioritize"] is not None:
        assert fields.pop("response") == ""  # left out until someone needs it
    else:
        assert fields.pop("response") == expected["response"]
    assert list(differences(fields, {k: v for k, v in expected.items() if k != "response"})) == []


@pytest.mark.parametrize("name", of_kind(BIND_INTENT))
def test_a_spooled_bind_intent_reads_back_as_its_writer_was_given_it(name: str) -> None:
    assert list(differences(every_field(decode_intent(data(name))), meta(name)["expected"])) == []


@pytest.mark.parametrize("name", of_kind(SPOOL_FILE))
def test_a_spool_file_reads_back_with_its_rows_flags_and_rejected_records(name: str, tmp_path: Path) -> None:
    """The spool's own reader on a copy of the file (opening it may add the ``answered`` column)."""
    expected = meta(name)
    shutil.copyfile(GOLDEN / name, tmp_path / "spool.sqlite3")
    spool = Spool(tmp_path)
    try:
        rows = [(row.id, row.data, row.answered, "") for row in spool.read_rows(100)]
        rows += [(row_id, row_data, True, error) for row_id, row_data, error in spool.rejected()]
        intents = spool.intents()
    finally:
        spool.close()
    # Bind intents waiting for an outcome: none in a file from before they were written.
    assert [intent_id for intent_id, _ in intents] == [row["id"] for row in expected.get("intents", [])]
    for (intent_id, intent_data), row in zip(intents, expected.get("intents", []), strict=True):
        got = every_field(decode_intent(intent_data))
        assert list(differences(got, row["expected"])) == [], f"intent {intent_id}"
    assert [(row_id, answered, error) for row_id, _, answered, error in rows] == [
        (row["id"], row["answered"], row["rejected"]) for row in expected["rows"]
    ]
    for row_id, row_data, _, _ in rows:
        got = every_field(decode_event(row_data))
        assert list(differences(got, expected["expected_events"][str(row_id)])) == [], f"row {row_id}"
