"""What kube-scheduler is answered: a final score (0..100) on the extender's 0..10 scale, and what that hides.

Two scales, chosen per profile (``answer.scale``):

- ``fixed``: ``final / 10``, rounded half up. A node's answer depends on its own score only, so answers mean the
  same from cycle to cycle; but candidates whose finals are within a few points answer the same, and
  kube-scheduler then picks among them as it likes (the traffic signal among quiet nodes is lost).
- ``spread``: ``10 × (final − min) / (max − min)`` over the scored candidates, rounded half up, at most 9 for every
  node below the highest final score: our best node answers 10, our worst 0, and no node that scored less answers
  what our best answers, so kube-scheduler always sees our preference. The price: an answer says how a node ranks
  among this pod's candidates, not how good it is, and any lead, however small, is worth a whole answer step
  (10 × the extender's weight in kube-scheduler's total), which can outweigh kube-scheduler's own score plugins.

  Min–max alone is not enough: the candidates' finals usually span most of 0..100 already (a busy node scores near
  0), so min–max changes little, and with dozens of candidates several sit within a few points of the best
  (``benchmarks/answer_scale``).

Both round the final score as recorded (4 decimals), so whoever recomputes an answer from the record gets the
answered value.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import Literal, get_args

import numpy as np
from numpy.typing import NDArray

from scheduler_core.extender.protocol.wire import MAX_EXTENDER_PRIORITY
from scheduler_core.extender.scoring.units import score_text

Floats = NDArray[np.float64]
AnswerScale = Literal["fixed", "spread"]
ANSWER_SCALES: tuple[str, ...] = get_args(AnswerScale)
DEFAULT_ANSWER_SCALE: AnswerScale = "spread"
"""Chosen from ``benchmarks/answer_scale`` (how often our preferred node ties with another): see docs."""
_EPSILON = 1e-9
"""Absorbs float noise at .5: 28.57 → 2.857 → 3, and 25.0 → 2.5 → 3 even if the division lands a hair below."""


def round_half_up(value: float) -> int:
    """``value`` (0..10) to the nearest whole answer, .5 going up, clamped to 0..10."""
    return min(MAX_EXTENDER_PRIORITY, max(0, math.floor(value + 0.5 + _EPSILON)))


def fixed_answer(final: float) -> int:
    """0..100 → 0..10, rounded half up (28.57 → 3, 14.29 → 1)."""
    return round_half_up(final / 10)


def spread_bounds(finals: Sequence[float] | Floats, forced: Collection[int] = ()) -> tuple[float, float] | None:
    """(min, max) of the finals the spread maps, leaving out ``forced`` positions; None when they are all equal
    (nothing to spread: every one of them is the best, and answers 10)."""
    values = [float(f) for i, f in enumerate(finals) if i not in forced] if forced else list(map(float, finals))
    if not values:
        return None
    low, high = min(values), max(values)
    return (low, high) if high > low else None


SPREAD_BELOW_BEST = MAX_EXTENDER_PRIORITY - 1
"""The highest answer of a node below the best final score under ``spread``."""


def spread_answer(final: float, low: float, high: float) -> int:
    answer = round_half_up(10 * (final - low) / (high - low))
    return answer if final >= high else min(answer, SPREAD_BELOW_BEST)


def answers(finals: Sequence[float] | Floats, scale: str, forced: Collection[int] = ()) -> list[int]:
    """Every candidate's answer; ``forced`` positions (nodes kube-scheduler named but the node cache does not know)
    answer 0 and are left out of the spread's bounds. The same IEEE operations per node as :func:`fixed_answer` and
    :func:`spread_answer`, in one vectorized pass."""
    values = np.asarray(finals, dtype=np.float64)
    bounds = None
    if scale == "spread" and len(values):
        if forced:
            bounds = spread_bounds(values.tolist(), forced)
        elif (high := float(values.max())) > (low := float(values.min())):
            bounds = (low, high)
    if scale == "spread" and bounds is None:  # all equal (or one): each is the best
        result: list[int] = [MAX_EXTENDER_PRIORITY] * len(values)
    elif bounds is None:
        rounded = np.floor(values / 10 + 0.5 + _EPSILON)
        result = np.clip(rounded, 0, MAX_EXTENDER_PRIORITY).astype(np.int64).tolist()
    else:
        low, high = bounds
        rounded = np.floor(10 * (values - low) / (high - low) + 0.5 + _EPSILON)
        top = np.where(values < high, SPREAD_BELOW_BEST, MAX_EXTENDER_PRIORITY)
        result = np.clip(rounded, 0, top).astype(np.int64).tolist()
    for position in forced:
        result[position] = 0
    return result


def answer_rule(scale: str, bounds: tuple[float, float] | None) -> str:
    """The rule in words, with the figures it uses."""
    if scale == "spread" and bounds is not None:
        low, high = bounds
        return (
            f"answer = 10 × (final − {score_text(low)}) / ({score_text(high)} − {score_text(low)}), rounded half up, "
            "at most "
            f"{SPREAD_BELOW_BEST} below the highest final score (spread: the lowest final score among the candidates "
            "answers 0, only the highest answers 10)"
        )
    if scale == "spread":
        return "every candidate scored the same, so each is the highest and answers 10 (spread)"
    return "answer = final / 10, rounded half up"


def answer_arithmetic(final: float, answer: int, scale: str, bounds: tuple[float, float] | None) -> str:
    """``65.0466 / 10 = 6.5047 → 7`` or ``10 × (65.0466 − 20.1) / (80.3 − 20.1) = 7.4662 → 7``."""
    if scale == "spread" and bounds is not None:
        low, high = bounds
        value = 10 * (final - low) / (high - low)
        spread = f"({score_text(high)} − {score_text(low)})"
        text = f"10 × ({score_text(final)} − {score_text(low)}) / {spread} = {score_text(value)}"
        rounded = round_half_up(value)
        if rounded != answer:
            return f"{text} → {rounded}, at most {SPREAD_BELOW_BEST} below the highest final score → {answer}"
        return f"{text} → {answer}"
    if scale == "spread":
        return f"{score_text(final)}, the highest final score (every candidate scored it) → {answer}"
    return f"{score_text(final)} / 10 = {score_text(final / 10)} → {answer}"


def preference_tied(finals: Sequence[float], extender: Sequence[int]) -> bool:
    """Rounding to 0..10 erased our preference: the node with the highest final score answered the same as a node
    that scored strictly less, so kube-scheduler saw them as equal."""
    if len(finals) < 2 or len(extender) != len(finals):  # not aligned (never from the engine): not judged
        return False
    best = max(finals)
    top = extender[list(finals).index(best)]
    # Counted in C first: on the spread scale our best usually answers 10 alone, and then nothing is compared.
    if list(extender).count(top) < 2:
        return False
    return any(a == top and f < best for f, a in zip(finals, extender, strict=True))
