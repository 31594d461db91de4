"""A placement outcome's stored forms (``dashboard.outcomes.codec``) read back as their writer was given them, and
the current writer writes the same bytes (``tests/golden/outcomes``)."""

from __future__ import annotations

import msgspec
import pytest

from dashboard.outcomes.codec import estimate_decode, estimate_encode, windows_decode, windows_encode
from tests.golden.registry import OUTCOME, data, meta, of_kind

TESTED = {OUTCOME}


@pytest.mark.parametrize("name", of_kind(OUTCOME))
def test_a_stored_outcome_column_reads_back_and_is_written_the_same(name: str) -> None:
    stored = msgspec.json.decode(data(name))  # what PostgreSQL's jsonb hands back
    if "estimate" in name:
        decoded = estimate_decode(stored)
        assert decoded is not None
        assert msgspec.to_builtins(decoded) == meta(name)["values"]
        assert msgspec.json.encode(estimate_encode(decoded)) == data(name)
    else:
        windows = windows_decode(stored)
        assert msgspec.to_builtins(windows) == meta(name)["values"]
        assert msgspec.json.encode(windows_encode(windows)) == data(name)
