"""The golden fixtures and the readers agree: every fixture is claimed and read by a test, every form a reader
declares it reads has a fixture, and no fixture is of a form nothing reads any more (``docs/stored-formats.md``:
a reader and its fixtures go in the same change)."""

from __future__ import annotations

from typing import Any

from dashboard.outcomes.codec import OUTCOME_FORMS_READ
from dashboard.replays.selectors import REPORT_FORMS_READ
from dashboard.storage.call_body import BODY_FORMATS_READ, TRANSCODED_FORMATS
from dashboard.storage.packed_json import PACK_KEY
from scheduler_core.extender.record.spool_codec import INTENT_FORMS, SPOOL_BINARY_FORMS
from tests.dashboard import test_golden_spool_forms
from tests.dashboard.outcomes import test_golden_outcome_forms
from tests.dashboard.replays import test_golden_replay_report
from tests.dashboard.storage import test_golden_call_bodies
from tests.golden.registry import (
    AUDIT_LINK,
    BIND_INTENT,
    CALL_BODY,
    COLUMN,
    FIXTURES,
    GOLDEN,
    NOT_FIXTURES,
    OUTCOME,
    REPLAY_REPORT,
    SHARED_PART,
    SPOOL_FILE,
    SPOOL_RECORD,
    WITH_ANSWERED,
    WITH_INTENTS,
    WITHOUT_ANSWERED,
    data,
    meta,
)

JSON_SPOOL_FORM = b"{"
"""A spooled record that starts with none of ``SPOOL_BINARY_FORMS`` is JSON (every version wrote it)."""


def readable_forms() -> dict[str, set[Any]]:
    """Per kind, the forms the current readers read, from what they declare where they declare it."""
    return {
        SPOOL_RECORD: {JSON_SPOOL_FORM, *SPOOL_BINARY_FORMS},
        # ``Spool`` adds ``answered`` (and ``bind_intents``) to a file without it
        SPOOL_FILE: {WITHOUT_ANSWERED, WITH_ANSWERED, WITH_INTENTS},
        BIND_INTENT: set(INTENT_FORMS),
        CALL_BODY: set(BODY_FORMATS_READ),
        SHARED_PART: {f for f in TRANSCODED_FORMATS if f >= 2},  # format 2 added the shared part; 3 has none
        COLUMN: {PACK_KEY, "plain"},
        AUDIT_LINK: {"json call", "body call"},
        OUTCOME: set(OUTCOME_FORMS_READ),
        REPLAY_REPORT: set(REPORT_FORMS_READ),
    }


def test_every_file_of_the_golden_folder_is_a_registered_fixture_or_its_expectation() -> None:
    files = {
        str(path.relative_to(GOLDEN))
        for path in GOLDEN.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.name not in NOT_FIXTURES
    }
    claimed = set(FIXTURES) | {str((GOLDEN / name).with_suffix(".json").relative_to(GOLDEN)) for name in FIXTURES}
    assert sorted(files - claimed) == [], "fixtures no test reads: register them (tests/golden/registry.py)"
    assert sorted(claimed - files) == [], "registered fixtures missing"
    for name in FIXTURES:
        assert meta(name)["fixture"] == name
        assert meta(name)["written_by"], f"{name}: which commit wrote it?"


def test_every_readable_form_has_a_fixture_and_every_fixture_a_reader() -> None:
    readable = readable_forms()
    assert set(readable) == {kind for kind, _ in FIXTURES.values()}
    for kind, forms in readable.items():
        fixed = {form for k, form in FIXTURES.values() if k == kind}
        assert sorted(map(repr, forms - fixed)) == [], f"{kind}: forms read without a golden fixture"
        assert sorted(map(repr, fixed - forms)) == [], f"{kind}: fixtures of forms no reader declares (remove both)"


def test_every_fixture_is_of_the_form_it_is_registered_as() -> None:
    for name, (kind, form) in FIXTURES.items():
        if kind == BIND_INTENT:
            assert data(name).startswith(form), name
        elif kind == SPOOL_RECORD:
            magic = data(name)[: len(form)]
            assert magic == form, name
            if form == JSON_SPOOL_FORM:
                assert not data(name).startswith(SPOOL_BINARY_FORMS), name
        elif kind == CALL_BODY:
            assert data(name)[0] == form, name
        elif kind == SPOOL_FILE:
            assert data(name).startswith(b"SQLite format 3\0"), name


def test_every_kind_of_fixture_is_read_by_a_test() -> None:
    tested = (
        test_golden_spool_forms.TESTED
        | test_golden_call_bodies.TESTED
        | test_golden_outcome_forms.TESTED
        | test_golden_replay_report.TESTED
    )
    assert {kind for kind, _ in FIXTURES.values()} <= tested


def test_the_format_2_bodies_hold_every_column_kind() -> None:
    """As their writer reported it (``column_kinds``): a reader of each kind of column is exercised."""
    kinds = {
        k
        for name, (kind, form) in FIXTURES.items()
        if kind == CALL_BODY and form == 2
        for k in meta(name)["column_kinds"]
    }
    assert kinds == {
        "TEXT",
        "F64_SHUFFLED",
        "GENERIC",
        "SAME_AS_SCORES",
        "FILTER_TRAFFIC",
        "WEIGHTED_MEAN",
        "INVERSE_SHARE",
    }
