"""Every golden fixture and the stored form it is of (``docs/stored-formats.md``).

A fixture is bytes some commit wrote (``make_fixtures.py`` says which), beside ``<name>.json``: its form, its writer
and the values it must read back as. ``tests/dashboard/storage/test_golden_registry.py`` checks that this list and the
folder agree, and that every form the readers declare they read has a fixture here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

GOLDEN = Path(__file__).resolve().parent

SPOOL_RECORD = "spool record"
"""Form: the record's first bytes (``b"{"``: JSON; else one of ``SPOOL_BINARY_FORMS``)."""
SPOOL_FILE = "spool file"
"""Form: the layout of the spool's SQLite file."""
BIND_INTENT = "bind intent"
"""Form: the intent's first bytes (``INTENT_FORMS``: ``b"{"``, JSON)."""
CALL_BODY = "call body"
"""Form: the body's format byte (``BODY_FORMATS_READ``)."""
SHARED_PART = "shared part"
"""Form: the body format that refers to it."""
COLUMN = "jsonb column"
"""Form: ``PACK_KEY`` (a packed value) or ``"plain"``."""
OUTCOME = "placement outcome"
"""Form: ``"json v1"`` (``dashboard.outcomes.codec``: an outcome's estimate and windows in their jsonb columns)."""
REPLAY_REPORT = "history replay report"
"""Form: ``"json v1"`` (``HistoryReplay.report``: ``HistoryReplayReport`` as JSON, every field written)."""
AUDIT_LINK = "audit chain link"
"""Form: ``"json call"`` or ``"body call"`` (a body's SHA-256 in the chained content)."""

WITHOUT_ANSWERED = "events without answered"
WITH_ANSWERED = "events with answered, rejected"
WITH_INTENTS = "events with answered, rejected, bind_intents"
PART = "part-89eb3dff986e1bc57180898c642405a831b8397fadcd42f12695af048385917c"

FIXTURES: dict[str, tuple[str, Any]] = {
    # Spool records (``scheduler_core.extender.record.structs.decode_event``).
    "spool/json_filter.bin": (SPOOL_RECORD, b"{"),
    "spool/json_prioritize.bin": (SPOOL_RECORD, b"{"),
    "spool/json_preempt.bin": (SPOOL_RECORD, b"{"),
    "spool/json_bind.bin": (SPOOL_RECORD, b"{"),
    "spool/json_refused.bin": (SPOOL_RECORD, b"{"),
    "spool/binary_first_filter.bin": (SPOOL_RECORD, b"SLR\x01"),
    "spool/binary_first_prioritize.bin": (SPOOL_RECORD, b"SLR\x01"),
    "spool/binary_filter.bin": (SPOOL_RECORD, b"SLR\x01"),
    "spool/binary_prioritize.bin": (SPOOL_RECORD, b"SLR\x01"),
    "spool/binary_preempt.bin": (SPOOL_RECORD, b"SLR\x01"),
    "spool/binary_derived_prioritize.bin": (SPOOL_RECORD, b"SLR\x02"),
    "spool/framed_filter.bin": (SPOOL_RECORD, b"SLR\x03"),
    "spool/framed_prioritize.bin": (SPOOL_RECORD, b"SLR\x03"),
    "spool/framed_derived_prioritize.bin": (SPOOL_RECORD, b"SLR\x03"),
    "spool/framed_preempt.bin": (SPOOL_RECORD, b"SLR\x03"),
    "spool/framed_prioritize_pod_assumed.bin": (SPOOL_RECORD, b"SLR\x03"),
    "spool/framed_prioritize_herd_reconciled.bin": (SPOOL_RECORD, b"SLR\x03"),
    "spool/deriving_filter.bin": (SPOOL_RECORD, b"SLR\x04"),
    "spool/deriving_prioritize.bin": (SPOOL_RECORD, b"SLR\x04"),
    # Bind intents (``scheduler_core.extender.record.spool_codec.decode_intent``).
    "spool/intent_json.bin": (BIND_INTENT, b"{"),
    # Spool files (``dashboard.spool.Spool``).
    "spool_files/spool_before_answered.sqlite3": (SPOOL_FILE, WITHOUT_ANSWERED),
    "spool_files/spool_current.sqlite3": (SPOOL_FILE, WITH_ANSWERED),
    "spool_files/spool_with_intents.sqlite3": (SPOOL_FILE, WITH_INTENTS),
    # Call bodies and shared parts (``dashboard.storage.call_body_read.body_read``).
    "bodies/body1_filter.bin": (CALL_BODY, 1),
    "bodies/body1_prioritize.bin": (CALL_BODY, 1),
    "bodies/body1_preempt.bin": (CALL_BODY, 1),
    "bodies/body2_filter.bin": (CALL_BODY, 2),
    "bodies/body2_prioritize.bin": (CALL_BODY, 2),
    "bodies/body2_preempt.bin": (CALL_BODY, 2),
    "bodies/body2_filter_shared.bin": (CALL_BODY, 2),
    "bodies/body2_prioritize_shared.bin": (CALL_BODY, 2),
    "bodies/body2_prioritize_alone.bin": (CALL_BODY, 2),
    f"bodies/{PART}.bin": (SHARED_PART, 2),
    "bodies/body3_filter.bin": (CALL_BODY, 3),
    "bodies/body3_prioritize.bin": (CALL_BODY, 3),
    # The jsonb columns of calls without a body (``dashboard.storage.packed_json.unpack``).
    "columns/packed_filter_record.bin": (COLUMN, "$zstd"),
    "columns/packed_filter_answer.bin": (COLUMN, "$zstd"),
    "columns/packed_prioritize_record.bin": (COLUMN, "$zstd"),
    "columns/plain_filter_record.bin": (COLUMN, "plain"),
    "columns/plain_bind_record.bin": (COLUMN, "plain"),
    "columns/plain_bind_answer.bin": (COLUMN, "plain"),
    # Stored chain hashes (``dashboard.audit.chain``).
    "audit/link_json_call.sha256": (AUDIT_LINK, "json call"),
    "audit/link_json_bind.sha256": (AUDIT_LINK, "json call"),
    "audit/link_versioned_bind.sha256": (AUDIT_LINK, "json call"),  # its profile_version sealed (issue 31)
    "audit/link_body1_call.sha256": (AUDIT_LINK, "body call"),
    # A placement outcome's jsonb columns (``dashboard.outcomes.codec``).
    "outcomes/estimate_v1.bin": (OUTCOME, "json v1"),
    "outcomes/windows_v1.bin": (OUTCOME, "json v1"),
    # A history replay's report (``dashboard.replays.selectors.history_replay_report``).
    "replays/report_v1.bin": (REPLAY_REPORT, "json v1"),  # before its learning comparison
    "replays/report_learning.bin": (REPLAY_REPORT, "json v1"),
}
"""Fixture (path under ``tests/golden``) → (kind, form)."""

NOT_FIXTURES = frozenset(
    {
        "__init__.py",
        "registry.py",
        "make_fixtures.py",
        "make_fixtures_inputs.py",
        "make_fixtures_writer.py",
        "make_fixtures_spool.py",
        "make_fixtures_bodies.py",
    }
)
"""Files of the folder that are no fixture."""


def of_kind(kind: str) -> list[str]:
    return [name for name, (k, _) in FIXTURES.items() if k == kind]


def data(name: str) -> bytes:
    return (GOLDEN / name).read_bytes()


def meta(name: str) -> dict[str, Any]:
    """``<fixture>.json``: the form, the writer and the expected values (JSON: Infinity reads as ``inf``)."""
    loaded: dict[str, Any] = json.loads((GOLDEN / name).with_suffix(".json").read_text())
    return loaded


def every_field(value: Any) -> Any:
    """``value`` as plain data with every field of every struct, defaults included (``to_builtins`` leaves them
    out): an answer (``Raw``) as its text."""
    if isinstance(value, msgspec.Struct):
        return {info.name: every_field(getattr(value, info.name)) for info in msgspec.structs.fields(value)}
    if isinstance(value, msgspec.Raw):
        return bytes(value).decode()
    if isinstance(value, list | tuple):
        return [every_field(item) for item in value]
    if isinstance(value, dict):
        return {key: every_field(item) for key, item in value.items()}
    return value


def differences(got: Any, expected: Any, path: str = "") -> Iterator[str]:
    """Where ``got`` and ``expected`` differ, field by field (a readable assertion on large records)."""
    if isinstance(got, dict) and isinstance(expected, dict):
        for key in sorted(set(got) | set(expected)):
            if key not in got:
                yield f"{path}.{key}: missing (expected {expected[key]!r})"
            elif key not in expected:
                yield f"{path}.{key}: {got[key]!r} not expected"
            else:
                yield from differences(got[key], expected[key], f"{path}.{key}")
    elif isinstance(got, list) and isinstance(expected, list) and len(got) == len(expected):
        for index, (a, b) in enumerate(zip(got, expected, strict=True)):
            yield from differences(a, b, f"{path}[{index}]")
    elif type(got) is not type(expected) or got != expected:
        yield f"{path or 'value'}: {got!r} != expected {expected!r}"
