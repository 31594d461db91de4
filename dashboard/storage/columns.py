"""Numeric columns of a call body: a record's per-node figures and scores in an exact, compact form.

A record is columnar (one list per quantity, aligned with its nodes), so a body stores each list as a
:class:`Column` whose ``kind`` says how to read it back:

- ``F64_SHUFFLED``: byte counts (whole numbers in the millions and more) as the floats' 8 bytes, byte ``i`` of every
  value together, so that the zero low bytes of whole numbers become runs zstd compresses well;
- ``TEXT``: any other finite numbers as their shortest decimal text (scores rounded to 4 decimals are short, and
  repeat);
- ``GENERIC``: anything else (NaN, infinities, values that are not numbers), as it is;
- ``SAME_AS_SCORES`` and ``FILTER_TRAFFIC``: references, with no data (a plugin's raw figures equal to its scores,
  or to the traffic figures of the cycle's filter call for the same nodes: ``call_body`` resolves them);
- ``WEIGHTED_MEAN`` and ``INVERSE_SHARE`` (body format 2): predicted columns. The engine computes a prioritize's
  final scores and ``NetworkTraffic``'s scores from other columns of the same record, so the body stores only what
  the recorded values differ from that formula by (nothing, for the engine's own records; one residual per node
  the formula does not give). The formulas are frozen here: a body is decoded with them forever.

Nothing is assumed: every column is checked to decode to exactly the recorded values, bit for bit, before it is
used; a column that would not is stored as it is.

A prioritize's extender scores (``final`` on the 0..10 scale) are derived from its final scores the same way
(:func:`extender_of`), with the scale's formula frozen too.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from collections.abc import Sequence
from functools import partial
from itertools import repeat
from math import isfinite
from operator import countOf, is_not
from typing import Any, cast

import msgspec
import numpy as np

from dashboard.storage.identity_cache import IdentityCache
from scheduler_core.extender.record.formulas import float_array, inverse_share, on_grid, weighted_mean
from scheduler_core.extender.record.structs import PluginScores, PrioritizeRecord
from scheduler_core.extender.scoring.engine import score_thresholds


class Column(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """A list of floats (and ``None``) in compact form; :func:`column_encode` picks ``kind``."""

    kind: int
    data: bytes = b""
    nones: list[int] = msgspec.field(default_factory=list)
    """``F64_SHUFFLED``: positions holding ``None`` (left out of ``data``)."""
    values: list[Any] = msgspec.field(default_factory=list)
    """``GENERIC``: the values as they are."""


TEXT, F64_SHUFFLED, GENERIC, SAME_AS_SCORES, FILTER_TRAFFIC, WEIGHTED_MEAN, INVERSE_SHARE = range(7)
"""Column kinds. ``SAME_AS_SCORES`` and ``FILTER_TRAFFIC`` are references: a plugin's raw figures equal to its own
scores, or to the traffic figures of the cycle's filter call for the same nodes. The last two (format 2) are
predictions (:func:`_predicted_column`), ``data`` holding what the recorded values differ from them by:
``WEIGHTED_MEAN``, a prioritize's final scores as the weighted mean of its applicable plugins' recorded scores;
``INVERSE_SHARE``, a plugin's scores as ``100 − x·100/max(x)`` of its raw figures plus its herd bytes (the
formula of ``NetworkTraffic``)."""
_no_none = partial(is_not, None)
_json = msgspec.json.Encoder()
_msgpack = msgspec.msgpack.Encoder()


def _shuffle(data: bytes, width: int) -> bytes:
    """Byte ``i`` of every value together (``width``-byte values): zstd then sees long runs of similar bytes."""
    return np.frombuffer(data, dtype=np.uint8).reshape(-1, width).T.tobytes()


def _unshuffle(data: bytes, width: int) -> bytes:
    count = len(data) // width
    out = bytearray(len(data))
    for i in range(width):
        out[i::width] = data[i * count : (i + 1) * count]
    return bytes(out)


_NEGATIVE_ZERO = array("d", [-0.0]).tobytes()


def column_encode(values: Sequence[float | None]) -> Column:
    """``values`` in an exact form that compresses well, chosen and made in a few passes in C, never a Python loop
    per value (a column holds one value per candidate node).

    Byte counts (whole numbers in the millions and more) as the floats' 8 bytes, shuffled; anything else finite as
    its shortest decimal text (msgspec writes each float so that it reads back identical, and keeps ``None`` and
    ints as they are): scores rounded to 4 decimals are a few bytes each once compressed, few distinct values less.
    """
    maybe_none = False
    try:
        total = sum(values)  # type: ignore[arg-type]  # a None raises TypeError: caught below
    except TypeError:  # None among them (a node without a metric), or not numbers
        maybe_none = True
        total = sum(filter(_no_none, values))  # type: ignore[arg-type]  # the filter drops the None (mypy cannot see it)
    if not isfinite(total):
        return Column(GENERIC, values=list(values))  # NaN or infinities (never from the engine): kept as they are
    sample = [v for v in values[:64] if v is not None]
    if sample and all(type(v) is float and v.is_integer() and abs(v) >= 1e6 for v in sample):
        # The sum went through: no None (comparing every value with None costs as much as the rest together).
        nones = [i for i, v in enumerate(values) if v is None] if maybe_none else []
        floats = list(filter(_no_none, values)) if nones else values
        try:
            raw = array("d", cast("Sequence[float]", floats)).tobytes()  # no None left (nones are filtered out)
        except TypeError:
            return Column(GENERIC, values=list(values))
        # Every value a float, not an int or bool the array would have taken as one (it would read back a float).
        if not (_NEGATIVE_ZERO in raw or countOf(map(type, floats), float) != len(floats)):
            return Column(F64_SHUFFLED, _shuffle(raw, 8), nones=nones)
    return Column(TEXT, _json.encode(values))


_columns: IdentityCache[Column] = IdentityCache(64)


def cached_column(values: Sequence[float | None]) -> Column:
    """:func:`column_encode`, once per list object (``identity_cache``): one snapshot's traffic figures, a plugin's
    scores for one candidate list."""
    return _columns.get((values,), partial(column_encode, values))


def column_decode(column: Column) -> list[Any]:
    kind = column.kind
    if kind == TEXT:
        return list(msgspec.json.decode(column.data))
    if kind == GENERIC:
        return list(column.values)
    if kind != F64_SHUFFLED:
        raise ValueError(f"column kind {kind} cannot be decoded alone")
    values: list[Any] = array("d", _unshuffle(column.data, 8)).tolist()
    for position in column.nones:
        values.insert(position, None)
    return values


# --- predicted columns (body format 2) -----------------------------------------------------------------------

_RESIDUAL = np.dtype("<i8")
"""A predicted column's residuals: ten-thousandths (the record's 4 decimals), little-endian 64-bit integers."""


def from_prediction(predicted: np.ndarray, residuals: bytes) -> np.ndarray:
    """The values of a predicted column: ``predicted`` on the 4-decimal grid, plus the stored ``residuals``."""
    grid = on_grid(predicted)
    if residuals:
        grid += np.frombuffer(residuals, dtype=_RESIDUAL)
    return grid / 1e4


def _predicted_column(kind: int, predicted: np.ndarray, values: Sequence[float]) -> Column | None:
    """``values`` as their residuals from ``predicted`` (``kind`` says how it was made); None when that does not give
    them back bit for bit, or leaves more than a quarter of them to the residuals (the column is then smaller).

    Frozen, as :func:`_frozen_extender_score`: a body is decoded with these formulas forever. A value the formula
    does not give (a node without a raw figure, a record from another version) is one residual; nothing is ever
    assumed, each column is checked by decoding it.
    """
    actual = float_array(values)
    if actual is None or len(actual) != len(predicted):
        return None  # ints, bools or None would come back as floats
    if from_prediction(predicted, b"").tobytes() == actual.tobytes():
        return Column(kind, b"")  # every value is the prediction (an engine's record): what the rest would find
    with np.errstate(invalid="ignore"):
        difference = on_grid(actual) - on_grid(predicted)
    if not np.isfinite(difference).all() or np.abs(difference).max(initial=0.0) >= 2.0**53:
        return None
    residuals = difference.astype(_RESIDUAL)
    if np.count_nonzero(residuals) * 4 > len(values):
        return None
    data = residuals.tobytes() if residuals.any() else b""
    if from_prediction(predicted, data).tobytes() != actual.tobytes():
        return None  # -0.0, or a value off the 4-decimal grid
    return Column(kind, data)


def scores_column(plugin: PluginScores) -> Column:
    """A plugin's scores: as :data:`INVERSE_SHARE` of its raw figures when that gives them, else as they are; once
    per pair of lists when there are no herd bytes (``identity_cache``: the same snapshot and candidates)."""
    scores, raw, herd = plugin.scores, plugin.raw, plugin.herd_bytes
    if not raw or raw is scores:
        return cached_column(scores)
    if herd:
        return _scores_made(scores, raw, herd)
    return _columns.get((scores, raw), partial(_scores_made, scores, raw, herd))


def _scores_made(scores: list[float], raw: list[float | None], herd: list[float]) -> Column:
    if len(raw) == len(scores) and raw != scores:
        try:
            predicted = inverse_share(raw, herd)
        except (TypeError, ValueError):  # not numbers, or herd bytes not aligned
            predicted = None
        if predicted is not None and (column := _predicted_column(INVERSE_SHARE, predicted, scores)):
            return column
    return column_encode(scores)


def final_column(record: PrioritizeRecord) -> Column:
    """A prioritize's final scores: as :data:`WEIGHTED_MEAN` of its plugins' scores when that gives them."""
    try:
        predicted = weighted_mean(record.plugins, len(record.final))
    except (TypeError, ValueError):  # scores that are not numbers, or not one per node
        predicted = None
    if (
        predicted is not None
        and len(record.final) == len(record.nodes)
        and (column := _predicted_column(WEIGHTED_MEAN, predicted, record.final))
    ):
        return column
    return column_encode(record.final)


# --- the extender scores, derived from the final scores ------------------------------------------------------


def _frozen_extender_score(final: float) -> int:
    """The extender score under this format's formula, frozen here (``engine.to_extender_score`` when the format
    was written): bodies are decoded with it forever, so it must not follow later changes to the engine."""
    return min(10, max(0, math.floor(final / 10 + 0.5 + 1e-9)))


_EXTENDER_THRESHOLDS = score_thresholds(_frozen_extender_score, 10)
_EXTENDER_THRESHOLDS_ARRAY = np.array(_EXTENDER_THRESHOLDS, dtype=np.float64)


def extender_of(final: Sequence[float]) -> list[int]:
    """The extender scores (0..10) of these final scores, under the frozen formula."""
    try:
        found = float_array(final)
        values = found if found is not None else np.frombuffer(array("d", final), dtype=np.float64)
    except (TypeError, OverflowError):  # not all numbers: the bisection raises (or answers) as it always did
        return list(map(bisect_right, repeat(_EXTENDER_THRESHOLDS), final))
    # One search in C instead of a bisection per node, with the same answer for every float (NaN sorts last in both:
    # ``bisect_right`` finds no threshold it is below) and every int (only those beyond 2**53 change as floats, and
    # they are far past the last threshold either way).
    indexes: list[int] = np.searchsorted(_EXTENDER_THRESHOLDS_ARRAY, values, side="right").tolist()
    return indexes
