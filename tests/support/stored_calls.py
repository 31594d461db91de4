"""A stored call's record and answer as the API serves them (JSON builtins), read alone: for tests that check what
was stored. Readers in the code take ``dashboard.selectors.cycles.call_reads`` (typed records) instead."""

from __future__ import annotations

from typing import Any

from dashboard.models import VerbCall
from dashboard.selectors.cycles import call_get_read
from dashboard.storage.call_record import record_builtins


def stored_record(call: VerbCall) -> dict[str, Any]:
    return record_builtins(call_get_read(call=call).recorded)


def stored_answer(call: VerbCall) -> Any:
    return call_get_read(call=call).answer
