"""The stored form of an outcome's estimate and windows (``PlacementOutcome.estimate`` and ``.windows``): the
``scheduler_core.outcomes.arithmetic`` structs as JSON, keys as the structs name them, defaults left out.
Pinned by ``tests/golden/outcomes``."""

from __future__ import annotations

from typing import Any

import msgspec

from scheduler_core.outcomes.arithmetic import Estimate, WindowOutcome

OUTCOME_FORMS_READ = ("json v1",)
"""The stored forms the decoders read: ``docs/stored-formats.md``."""


def estimate_encode(estimate: Estimate) -> dict[str, Any]:
    encoded: dict[str, Any] = msgspec.to_builtins(estimate)
    return encoded


def estimate_decode(stored: Any) -> Estimate | None:
    return None if stored is None else msgspec.convert(stored, Estimate)


def windows_encode(windows: list[WindowOutcome]) -> list[dict[str, Any]]:
    encoded: list[dict[str, Any]] = msgspec.to_builtins(windows)
    return encoded


def windows_decode(stored: Any) -> list[WindowOutcome]:
    return msgspec.convert(stored or [], list[WindowOutcome])
