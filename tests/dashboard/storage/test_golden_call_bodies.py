"""Stored call bodies, shared parts, packed and plain ``jsonb`` columns and chain hashes as earlier versions wrote
them read back as their writer was given them (``tests/golden``).

Each fixture was written once by the commit that wrote its form (``tests/golden/make_fixtures.py``). A body is read
as ``VerbCall`` reads it: through ``body_read`` with the lookups a caller passes, a prioritize's referenced filter
call being that call's record as the same reader gives it, and a shared part its stored bytes. No database.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import pytest

from dashboard.storage.call_body_read import body_read
from dashboard.storage.call_record import record_builtins
from dashboard.storage.columns import column_decode
from dashboard.storage.packed_json import PACK_KEY, stored_form, unpack
from dashboard.storage.shared_parts import shared_part_decode
from scheduler_core.extender.record.structs import FilterRecord
from tests.golden.registry import (
    AUDIT_LINK,
    CALL_BODY,
    COLUMN,
    FIXTURES,
    SHARED_PART,
    data,
    differences,
    meta,
    of_kind,
)

TESTED = {CALL_BODY, SHARED_PART, COLUMN, AUDIT_LINK}
"""The fixture kinds this module reads (``test_golden_registry`` checks each registered kind is read somewhere)."""


def shared_parts() -> dict[str, bytes]:
    """Digest → stored bytes of every shared part fixture, as the ``SharedPart`` table holds them."""
    return {meta(name)["digest"]: data(name) for name in of_kind(SHARED_PART)}


def filter_records(body: Mapping[str, Any]) -> Any:
    """The lookup a caller passes: the filter call the body refers to (by event id), its record as read back."""

    def lookup(event_id: str) -> FilterRecord | None:
        assert event_id == body["refers_to_filter"], f"{body['fixture']} refers to {event_id}"
        (name,) = [n for n in of_kind(CALL_BODY) if meta(n)["event_id"] == event_id]
        record, _ = body_read(data(name), filter_records=nothing, shared_parts=shared_parts().get)
        return record.filter

    return lookup


def nothing(event_id: str) -> None:
    pytest.fail(f"a body without a reference looked up the filter call {event_id}")


@pytest.mark.parametrize("name", of_kind(CALL_BODY))
def test_a_stored_body_reads_back_as_its_writer_was_given_it(name: str) -> None:
    expected = meta(name)
    record, answer = body_read(data(name), filter_records=filter_records(expected), shared_parts=shared_parts().get)
    assert list(differences(record_builtins(record), expected["expected_record"])) == []
    assert list(differences(answer, expected["expected_answer"])) == []


@pytest.mark.parametrize("name", [n for n in of_kind(CALL_BODY) if meta(n)["shared_part"]])
def test_a_body_naming_a_shared_part_needs_that_part(name: str) -> None:
    """The part holds the lists: without it (or altered) the body says it cannot be read, never reads short."""
    expected = meta(name)
    record, answer = body_read(data(name), filter_records=filter_records(expected), shared_parts={}.get)
    assert "is not stored" in record.unreadable
    assert answer is None
    altered = {expected["shared_part"]: data(f"bodies/part-{expected['shared_part']}.bin") + b"\0"}
    record, _ = body_read(data(name), filter_records=filter_records(expected), shared_parts=altered.get)
    assert "does not match its digest" in record.unreadable


@pytest.mark.parametrize("name", of_kind(SHARED_PART))
def test_a_shared_part_reads_back_as_the_filter_lists_it_was_made_from(name: str) -> None:
    digest = meta(name)["digest"]
    assert hashlib.sha256(data(name)).hexdigest() == digest == name.removeprefix("bodies/part-").removesuffix(".bin")
    part = shared_part_decode(digest, {digest: data(name)}.get)
    user = meta(f"bodies/{meta(name)['used_by']}.bin")
    given = user["expected_record"]
    assert json.loads(part.nodes) == given["nodes"]
    assert json.loads(part.failures) == given["failures"]
    assert part.traffic is not None
    assert list(differences(column_decode(part.traffic), given["traffic_bytes"])) == []
    # The answer after its NodeNames, which every filter with these lists repeats.
    answer = json.dumps(user["expected_answer"], separators=(",", ":")).encode()
    prefix = b'{"Nodes":null,"NodeNames":' + json.dumps(given["passed"], separators=(",", ":")).encode()
    assert prefix + part.answer == answer


@pytest.mark.parametrize("name", of_kind(COLUMN))
def test_a_jsonb_column_reads_back_as_the_value_stored(name: str) -> None:
    """What ``PackedJSONField`` gives for the column's JSON; a packed value keeps its packed text (the chain)."""
    column = json.loads(data(name))
    value = unpack(column)
    assert list(differences(value, meta(name)["expected"])) == []
    assert stored_form(value) == column
    assert (isinstance(column, dict) and list(column) == [PACK_KEY]) == (FIXTURES[name][1] == PACK_KEY)


@pytest.mark.parametrize("name", of_kind(AUDIT_LINK))
def test_a_stored_chain_hash_still_links(name: str) -> None:
    """A call's chain hash, computed by the version that stored it, from the columns as the database gives them:
    a changed canonical form would break every chain already stored."""
    from dashboard.audit.chain import call_content, chain_link

    link = meta(name)
    values: dict[str, Any] = dict(link["values"])
    values["started_at"] = datetime.fromisoformat(values["started_at"])
    values["record"], values["response"] = unpack(values["record"]), unpack(values["response"])
    values["body"] = data(f"bodies/{link['body']}.bin") if link["body"] else None
    assert data(name).decode() == link["chain_hash"]
    assert chain_link(link["previous"], call_content(values)) == link["chain_hash"]
