"""The vectorised helpers of the body encoder give exactly what the per-node forms they replaced gave.

Bodies must decode to the records they were made from, and stay byte for byte what earlier versions wrote (the
audit chain seals their hash): each helper is compared with the plain Python it stands for, on the values the
engine gives and on those it never gives.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_right

import pytest

from dashboard.storage.columns import _EXTENDER_THRESHOLDS, _shuffle, _unshuffle, extender_of


def _bisected(final: list[float]) -> list[int]:
    return [bisect_right(_EXTENDER_THRESHOLDS, value) for value in final]


def test_extender_scores_match_the_bisection_for_every_kind_of_float() -> None:
    rng = random.Random(5)
    # Each threshold, its neighbours, and values the engine never gives (negative, over 100, NaN, infinities).
    edges = [t for threshold in _EXTENDER_THRESHOLDS for t in (threshold, math.nextafter(threshold, -1), threshold)]
    odd = [-0.0, 0.0, -1.0, 100.0, 100.5, 1e300, -1e300, math.nan, math.inf, -math.inf, 5e-324]
    finals = [
        [round(rng.uniform(0, 100), 4) for _ in range(1000)],
        edges,
        odd,
        [rng.uniform(-50, 150) for _ in range(200)],
        [],
    ]
    for final in finals:
        assert extender_of(final) == _bisected(final)


@pytest.mark.parametrize("final", [[1, 2, 99], [True, 50.5], [10**30, 1.0], [2**53 + 1, -(2**60)]])
def test_extender_scores_of_ints_and_bools_match_the_bisection(final: list[float]) -> None:
    assert extender_of(final) == _bisected(final)


def test_extender_scores_of_values_that_are_not_numbers_fail_as_before() -> None:
    with pytest.raises(TypeError):
        extender_of([1.0, None])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        extender_of(["5.0"])  # type: ignore[list-item]


def test_shuffled_bytes_are_byte_i_of_every_value_together() -> None:
    data = bytes(range(256)) * 8
    expected = b"".join(data[i::8] for i in range(8))
    assert _shuffle(data, 8) == expected
    assert _unshuffle(expected, 8) == data
    assert _shuffle(b"", 8) == b""
