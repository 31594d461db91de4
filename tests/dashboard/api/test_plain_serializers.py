"""The explanation's serializers read plain attributes (``_PlainSerializer``) and answer exactly what DRF's own
``Serializer.to_representation`` answers: the same keys in the same order, the same values of the same JSON types,
byte for byte once rendered. The cycles are the property tests' (``tests.support.explained_cycles``).
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from hypothesis import example, given, settings
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer

from dashboard.api.serializers import ExplanationSerializer, _PlainSerializer
from dashboard.models import SchedulingCycle
from dashboard.selectors.cycles import cycle_explanation, cycle_list_with_calls
from tests.support.explained_cycles import (
    HERD_TIE,
    PROPERTY,
    STALE_FAIL,
    TINY_MAXIMUM,
    Scenario,
    in_savepoint,
    ingest_and_fetch,
    record_cycle,
    scenarios,
)


def rendered(cycle: SchedulingCycle) -> bytes:
    return JSONRenderer().render(ExplanationSerializer(cycle_explanation(cycle=cycle)).data)


@pytest.mark.django_db
@settings(PROPERTY, max_examples=15)
@given(scenario=scenarios())
@example(scenario=STALE_FAIL)
@example(scenario=HERD_TIE)
@example(scenario=TINY_MAXIMUM)
def test_the_plain_explanation_serializers_render_what_drf_renders(fast_api: Any, scenario: Scenario) -> None:
    def body() -> None:
        fetched = ingest_and_fetch(fast_api, scenario, record_cycle(scenario))
        cycle = cycle_list_with_calls().get(pk=fetched.cycle_id)
        plain = rendered(cycle)
        with mock.patch.object(_PlainSerializer, "to_representation", serializers.Serializer.to_representation):
            assert rendered(cycle) == plain

    in_savepoint(body)
