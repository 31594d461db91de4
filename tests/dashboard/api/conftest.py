"""The audit API's tests read cycles recorded under the profiles of ``tests.support.kube_scheduler``, with throttle
counters at zero in every test."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _api_settings(api_settings) -> None:
    """Every test here runs with :func:`api_settings`."""
