"""The formulas a record's derived columns are written again with, frozen: stored data is read with them forever.

The engine computes a prioritize's final scores and ``NetworkTraffic``'s scores from other columns of the same
record. Neither the spool (``spool_codec``, the ``SLR\\x04`` form) nor the stored body (``dashboard.storage``'s
predicted columns) keeps what these formulas give back: the spool leaves such a column out, the body keeps only what
the recorded values differ from the formula by. Both check, bit for bit, before leaving anything out.

They must not follow later changes to the engine: a new formula is a new function here, and a new form of the spool
and the body that names it (``tests/golden`` pins what each form reads back as).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np
from numpy.typing import NDArray

from scheduler_core.extender.record.structs import PluginScores

Floats = NDArray[np.float64]

_msgpack = msgspec.msgpack.Encoder()
_MSGPACK_FLOAT64 = np.dtype([("tag", "u1"), ("value", ">f8")])
"""An item of a MessagePack array of floats: the float 64 tag (0xcb), then the value big-endian."""


def float_array(values: Sequence[Any]) -> Floats | None:
    """``values`` as a float64 array when every one is a float (not an int, a bool or None), else None.

    Through MessagePack, which writes each float as its tag and 8 bytes: one pass in C, where checking each value's
    type in Python and converting in numpy would cost several. Sound: each item begins with its type's tag, so when
    the item at 0 is a float 64 the next begins 9 bytes on, and so on; with every tag 0xcb and the length 9 bytes an
    item, all are.
    """
    if type(values) is not list:
        return None
    count = len(values)
    header = 1 if count < 16 else 3 if count < 1 << 16 else 5
    data = _msgpack.encode(values)
    if len(data) != header + 9 * count:
        return None
    items = np.frombuffer(data, dtype=_MSGPACK_FLOAT64, offset=header)
    if not (items["tag"] == 0xCB).all():
        return None
    found: Floats = items["value"].astype(np.float64)
    return found


def floats_or_nan(values: Sequence[Any]) -> Floats:
    """``values`` as float64, None as NaN (numpy's own conversion when they are not all floats)."""
    found = float_array(values)
    return found if found is not None else np.array(values, dtype=np.float64)


def on_grid(values: Floats) -> Floats:
    """``values`` in ten-thousandths (the record's 4 decimals), each the nearest whole number (``engine.round4``
    rounds the same way)."""
    grid: Floats = np.rint(values * 1e4)
    return grid


def rounded(values: Floats) -> Floats:
    """``values`` to the record's 4 decimals, as the engine records them."""
    result: Floats = on_grid(values) / 1e4
    return result


def weighted_mean(plugins: Sequence[PluginScores], count: int) -> Floats:
    """The final scores the engine computes from these recorded scores (``engine.run_prioritize``), before rounding:
    ``Σ score · weight / Σ weight`` over the applicable plugins, summed plugin by plugin (the same IEEE operations in
    the same order as the engine)."""
    totals = np.zeros(count)
    total_weight = 0
    for plugin in plugins:
        if plugin.applicable:
            total_weight += plugin.weight
            totals += floats_or_nan(plugin.scores) * plugin.weight
    result: Floats = totals / total_weight if total_weight else totals
    return result


def inverse_share(raw: Sequence[float | None], herd: Sequence[float]) -> Floats:
    """``100 − x·100/max(x)`` for x = raw + herd bytes (``NetworkTraffic``'s scores), before rounding; 0 where raw is
    None."""
    figures = floats_or_nan(raw)  # None → NaN
    if herd:
        figures += floats_or_nan(herd)
    known = ~np.isnan(figures)
    highest = float(figures[known].max()) if known.any() else 0.0
    factor = 100.0 / highest if highest > 0 else 0.0
    # Figures no engine records (a highest so small that 100 / it overflows) give NaN where the formula has no
    # value: no record's scores are such, so a check against them fails, quietly (the warning would go to the log of
    # a verb).
    with np.errstate(invalid="ignore", over="ignore"):
        result: Floats = np.where(known, 100.0 - figures * factor, 0.0)
    return result


def gives_exactly(values: Sequence[Any], predicted: Floats) -> bool:
    """``values`` are ``predicted`` rounded to 4 decimals, bit for bit, every one a float."""
    actual = float_array(values)
    return actual is not None and len(actual) == len(predicted) and rounded(predicted).tobytes() == actual.tobytes()


def derived_scores(plugin: PluginScores) -> list[float]:
    """A plugin's scores written again as the inverse share of its raw figures and herd bytes."""
    values: list[float] = rounded(inverse_share(plugin.raw, plugin.herd_bytes)).tolist()
    return values


def derived_final(plugins: Sequence[PluginScores], count: int) -> list[float]:
    """A prioritize's final scores written again as the weighted mean of its plugins' scores."""
    values: list[float] = rounded(weighted_mean(plugins, count)).tolist()
    return values


def scores_derive(plugin: PluginScores) -> bool:
    """``plugin.scores`` are exactly :func:`derived_scores` (a ``NetworkTraffic`` record from the engine)."""
    scores, raw, herd = plugin.scores, plugin.raw, plugin.herd_bytes
    if not raw or raw is scores or len(raw) != len(scores) or (herd and len(herd) != len(raw)):
        return False
    try:
        predicted = inverse_share(raw, herd)
    except (TypeError, ValueError):  # not numbers
        return False
    return gives_exactly(scores, predicted)


def final_derives(plugins: Sequence[PluginScores], final: Sequence[float]) -> bool:
    """``final`` is exactly :func:`derived_final` of ``plugins`` (a prioritize record from the engine)."""
    try:
        predicted = weighted_mean(plugins, len(final))
    except (TypeError, ValueError):  # scores that are not numbers, or not one per node
        return False
    return gives_exactly(final, predicted)
