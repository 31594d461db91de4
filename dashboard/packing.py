"""Compact storage of the large JSON columns of a verb call (its record and its answer).

A 1000-node cycle is ~180 KB of JSON (per-node names, figures and scores), which PostgreSQL's TOAST
compression (pglz, a 4 KB window) only brings down to ~48 KB: the same node names repeat 12–30 KB apart. The
ingester therefore stores a large value as ``{"$zstd": "<base64 of zstd(JSON)>"}`` inside the same ``jsonb``
column, and :class:`PackedJSONField` gives every reader the original value back (``call.record``,
``.values("record")``, the API, exports): nothing outside this module sees the packed form.

The audit chain hashes what is stored (:func:`stored_form`): a packed value is sealed as its packed text, so
the chain costs one short string per call to compute and to verify instead of walking ~10,000 numbers, and
an altered packed value or a value swapped for plain JSON breaks the link like any other change. Values
written before packing existed (plain JSON) are stored, read and hashed as before.

Since migration 0004 the ingester writes a per-node record (filter, prioritize, preempt) and its answer as one
binary **body** (``VerbCall.body``, ``bytea``) instead: :func:`body_encode` / :func:`body_decode`. Columnar as the
record already is, with what the record repeats taken out and put back on reading, each time only after
checking that putting it back gives exactly what was recorded:

- numbers as columns (:class:`Column`): byte counts as the floats' 8 bytes shuffled (byte ``i`` of every value
  together: the zero low bytes of whole numbers become runs), other numbers as their shortest decimal text;
- a filter's ``passed`` (the nodes without a failure, in order), which nodes are unresolvable (one flag per failure),
  and the ``NodeNames`` of its answer (the passed list again);
- a prioritize call's ``extender`` (``final`` on the 0..10 scale) and its answer (hosts and those scores);
- when the cycle's filter call is known to the ingester: a prioritize call's nodes (that filter's passed nodes) and
  its ``NetworkTraffic`` raw bytes (the filter's figures for the same nodes, from the same snapshot), stored as a
  reference to that call's event id (:class:`FilterFacts`); the reference is sealed into the chain with the body,
  and the filter call is sealed too, so neither can change unnoticed;
- (format 2) a prioritize call's ``final`` (the weighted mean of its plugins' recorded scores) and
  ``NetworkTraffic``'s scores (``100 − x·100/max`` of its raw and herd bytes) as what they differ from that
  formula by: nothing, for the engine's records, one residual per node without metrics;
- (format 2) a filter call's candidates, failures and traffic figures as a :class:`SharedFilterPart`, stored once
  for every filter with the same lists (``SharedPart``, by the SHA-256 of its bytes, which the body names and every
  reader checks) instead of in each body.

The result, one zstd frame behind a format byte, is a third of the packed JSON of a 1000-node cycle (10.2 against
32 KB, ``benchmarks/record_path.py``) and needs no base64. The chain seals the body's SHA-256
(``dashboard.services.audit``).
"""

from __future__ import annotations

import base64
import hashlib
import math
from array import array
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import compress, filterfalse, repeat
from math import isfinite
from operator import countOf, is_not, not_
from typing import Any, NamedTuple

import msgspec
import numpy as np
import zstandard
from django.db import models

from dashboard.identity_memo import IdentityMemo
from scheduler_core.compression import compressor, decompressor
from scheduler_core.engine import score_thresholds
from scheduler_core.lru import LRU
from scheduler_core.record import FilterRecord, PluginScores, PrioritizeRecord, VerbEvent
from scheduler_core.wire import encode_host_priorities

PACK_KEY = "$zstd"
MIN_PACKED_BYTES = 1024
"""Smaller values stay plain JSON (readable in SQL; compression would gain little)."""
_LEVEL = 3
"""zstd's default: ~0.1 ms for a 1000-node record, within a few per cent of its higher levels' size here."""


class PackedDict(dict[str, Any]):
    """A JSON object as read or to be written, with its packed text (what the column holds)."""

    stored: str


class PackedList(list[Any]):
    """A JSON array as read or to be written, with its packed text (what the column holds)."""

    stored: str


def _wrap(value: Any, stored: str) -> Any:
    wrapped: PackedDict | PackedList
    if isinstance(value, dict):
        wrapped = PackedDict(value)
    elif isinstance(value, list):
        wrapped = PackedList(value)
    else:
        return value  # a scalar is never large
    wrapped.stored = stored
    return wrapped


def pack(value: Any) -> Any:
    """``value`` marked for packed storage when its JSON is large; otherwise ``value`` itself."""
    if not isinstance(value, dict | list):
        return value
    data = msgspec.json.encode(value)
    if len(data) < MIN_PACKED_BYTES:
        return value
    return _wrap(value, base64.b64encode(compressor(_LEVEL).compress(data)).decode("ascii"))


def unpack(value: Any) -> Any:
    """The original value of what a column holds (packed or plain)."""
    if not (isinstance(value, dict) and len(value) == 1 and isinstance(value.get(PACK_KEY), str)):
        return value
    stored: str = value[PACK_KEY]
    try:
        original = msgspec.json.decode(decompressor().decompress(base64.b64decode(stored, validate=True)))
    except (ValueError, zstandard.ZstdError, msgspec.DecodeError) as exc:
        # Damaged (or tampered with): readers get an empty record saying so; the chain still hashes the text.
        original = {"$unreadable": f"packed value cannot be read: {exc}"}
    return _wrap(original, stored)


def stored_form(value: Any) -> Any:
    """What the column holds for ``value``: the packed object for a packed value, else ``value`` itself."""
    if isinstance(value, PackedDict | PackedList):
        return {PACK_KEY: value.stored}
    return value


class PackedJSONField(models.JSONField):  # type: ignore[type-arg]
    """A ``jsonb`` (or JSON text) column whose large values the ingester packs; reads give the original value."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        return unpack(super().from_db_value(value, expression, connection))

    def get_prep_value(self, value: Any) -> Any:
        return super().get_prep_value(stored_form(value))


# --- the binary body of a call (migration 0004) ----------------------------------------------------------

BODY_FORMAT = 2
"""The first byte of every body written now; a later format gets another number and this module keeps reading the
earlier ones. 2 added the predicted column kinds (``WEIGHTED_MEAN``, ``INVERSE_SHARE``): a version that reads only
1 sets such a body aside as unreadable instead of misreading it."""
BODY_FORMATS_READ = frozenset({1, 2})
_BODY_LEVEL = 1


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
    per value (a 1000-node column: ~40 µs).

    Byte counts (whole numbers in the millions and more) as the floats' 8 bytes, shuffled; anything else finite as
    its shortest decimal text (msgspec writes each float so that it reads back identical, and keeps ``None`` and
    ints as they are): scores rounded to 4 decimals are ~3 bytes each once compressed, few distinct values less.
    """
    maybe_none = False
    try:
        total = sum(values)  # type: ignore[arg-type]
    except TypeError:  # None among them (a node without a metric), or not numbers
        maybe_none = True
        total = sum(filter(_no_none, values))  # type: ignore[arg-type]
    if not isfinite(total):
        return Column(GENERIC, values=list(values))  # NaN or infinities (never from the engine): kept as they are
    sample = [v for v in values[:64] if v is not None]
    if sample and all(type(v) is float and v.is_integer() and abs(v) >= 1e6 for v in sample):
        # The sum went through: no None (comparing every value with None costs as much as the rest together).
        nones = [i for i, v in enumerate(values) if v is None] if maybe_none else []
        floats = list(filter(_no_none, values)) if nones else values
        try:
            raw = array("d", floats).tobytes()  # type: ignore[arg-type]
        except TypeError:
            return Column(GENERIC, values=list(values))
        # Every value a float, not an int or bool the array would have taken as one (it would read back a float).
        if not (_NEGATIVE_ZERO in raw or countOf(map(type, floats), float) != len(floats)):
            return Column(F64_SHUFFLED, _shuffle(raw, 8), nones=nones)
    return Column(TEXT, _json.encode(values))


_columns: IdentityMemo[Column] = IdentityMemo(64)


def _column_of(values: Sequence[float | None]) -> Column:
    """:func:`column_encode`, once per list object (``dashboard.identity_memo``): one snapshot's traffic figures, a
    plugin's scores for one candidate list."""
    return _columns.get((values,), partial(column_encode, values))


def column_decode(column: Column) -> list[Any]:
    kind = column.kind
    values: list[Any]
    if kind == TEXT:
        return list(msgspec.json.decode(column.data))
    if kind == GENERIC:
        return list(column.values)
    if kind != F64_SHUFFLED:
        raise ValueError(f"column kind {kind} cannot be decoded alone")
    values = array("d", _unshuffle(column.data, 8)).tolist()
    for position in column.nones:
        values.insert(position, None)
    return values


_MSGPACK_FLOAT64 = np.dtype([("tag", "u1"), ("value", ">f8")])
"""An item of a MessagePack array of floats: the float 64 tag (0xcb), then the value big-endian."""


def _float_array(values: Sequence[Any]) -> np.ndarray | None:
    """``values`` as a float64 array when every one is a float (not an int, a bool or None), else None.

    Through MessagePack, which writes each float as its tag and 8 bytes: ~5 µs for 1000 values, where checking the
    types and converting in numpy take ~40. Sound: each item begins with its type's tag, so when the item at 0 is a
    float 64 the next begins 9 bytes on, and so on; with every tag 0xcb and the length 9 bytes an item, all are.
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
    return items["value"].astype(np.float64)


def _floats_or_nan(values: Sequence[Any]) -> np.ndarray:
    """``values`` as float64, None as NaN (numpy's own conversion when they are not all floats)."""
    found = _float_array(values)
    return found if found is not None else np.array(values, dtype=np.float64)


_RESIDUAL = np.dtype("<i8")
"""A predicted column's residuals: ten-thousandths (the record's 4 decimals), little-endian 64-bit integers."""


def _on_grid(values: np.ndarray) -> np.ndarray:
    """``values`` in ten-thousandths, each the nearest whole number (``engine.round4`` rounds the same way)."""
    return np.rint(values * 1e4)


def _from_prediction(predicted: np.ndarray, residuals: bytes) -> np.ndarray:
    grid = _on_grid(predicted)
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
    actual = _float_array(values)
    if actual is None or len(actual) != len(predicted):
        return None  # ints, bools or None would come back as floats
    if _from_prediction(predicted, b"").tobytes() == actual.tobytes():
        return Column(kind, b"")  # every value is the prediction (an engine's record): what the rest would find
    with np.errstate(invalid="ignore"):
        difference = _on_grid(actual) - _on_grid(predicted)
    if not np.isfinite(difference).all() or np.abs(difference).max(initial=0.0) >= 2.0**53:
        return None
    residuals = difference.astype(_RESIDUAL)
    if np.count_nonzero(residuals) * 4 > len(values):
        return None
    data = residuals.tobytes() if residuals.any() else b""
    if _from_prediction(predicted, data).tobytes() != actual.tobytes():
        return None  # -0.0, or a value off the 4-decimal grid
    return Column(kind, data)


def _weighted_mean(plugins: Sequence[PluginScores], count: int) -> np.ndarray:
    """The final scores the engine computes from these recorded scores (``engine.run_prioritize``)."""
    totals = np.zeros(count)
    total_weight = 0
    for plugin in plugins:
        if plugin.applicable:
            total_weight += plugin.weight
            totals += _floats_or_nan(plugin.scores) * plugin.weight
    return totals / total_weight if total_weight else totals


def _inverse_share(raw: Sequence[float | None], herd: Sequence[float]) -> np.ndarray:
    """``100 − x·100/max(x)`` for x = raw + herd bytes (``NetworkTraffic``'s scores); 0 where raw is None."""
    figures = _floats_or_nan(raw)  # None → NaN
    if herd:
        figures += _floats_or_nan(herd)
    known = ~np.isnan(figures)
    highest = float(figures[known].max()) if known.any() else 0.0
    factor = 100.0 / highest if highest > 0 else 0.0
    return np.where(known, 100.0 - figures * factor, 0.0)


def _scores_column(plugin: PluginScores) -> Column:
    """A plugin's scores: as :data:`INVERSE_SHARE` of its raw figures when that gives them, else as they are; once
    per pair of lists when there are no herd bytes (``dashboard.identity_memo``: the same snapshot and candidates)."""
    scores, raw, herd = plugin.scores, plugin.raw, plugin.herd_bytes
    if not raw or raw is scores:
        return _column_of(scores)
    if herd:
        return _scores_made(scores, raw, herd)
    return _columns.get((scores, raw), partial(_scores_made, scores, raw, herd))


def _scores_made(scores: list[float], raw: list[float | None], herd: list[float]) -> Column:
    if len(raw) == len(scores) and raw != scores:
        try:
            predicted = _inverse_share(raw, herd)
        except (TypeError, ValueError):  # not numbers, or herd bytes not aligned
            predicted = None
        if predicted is not None and (column := _predicted_column(INVERSE_SHARE, predicted, scores)):
            return column
    return column_encode(scores)


def _final_column(part: PrioritizeRecord) -> Column:
    """A prioritize's final scores: as :data:`WEIGHTED_MEAN` of its plugins' scores when that gives them."""
    try:
        predicted = _weighted_mean(part.plugins, len(part.final))
    except (TypeError, ValueError):  # scores that are not numbers, or not one per node
        predicted = None
    if (
        predicted is not None
        and len(part.final) == len(part.nodes)
        and (column := _predicted_column(WEIGHTED_MEAN, predicted, part.final))
    ):
        return column
    return column_encode(part.final)


def _frozen_extender_score(final: float) -> int:
    """The extender score under this format's formula, frozen here (``engine.to_extender_score`` when the format
    was written): bodies are decoded with it forever, so it must not follow later changes to the engine."""
    return min(10, max(0, math.floor(final / 10 + 0.5 + 1e-9)))


_EXTENDER_THRESHOLDS = score_thresholds(_frozen_extender_score, 10)
_EXTENDER_THRESHOLDS_ARRAY = np.array(_EXTENDER_THRESHOLDS, dtype=np.float64)


def _extender_of(final: Sequence[float]) -> list[int]:
    try:
        found = _float_array(final)
        values = found if found is not None else np.frombuffer(array("d", final), dtype=np.float64)
    except (TypeError, OverflowError):  # not all numbers: the bisection raises (or answers) as it always did
        return list(map(bisect_right, repeat(_EXTENDER_THRESHOLDS), final))
    # One search in C instead of a bisection per node, with the same answer for every float (NaN sorts last in both:
    # ``bisect_right`` finds no threshold it is below) and every int (only those beyond 2**53 change as floats, and
    # they are far past the last threshold either way).
    indexes: list[int] = np.searchsorted(_EXTENDER_THRESHOLDS_ARRAY, values, side="right").tolist()
    return indexes


class FilterBody(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    record: bytes
    """JSON of the ``FilterRecord`` without what the fields below hold."""
    passed_derived: bool = False
    unresolvable: bytes | None = None
    """One byte per failed node (in ``failures`` order): 1 when unresolvable. None: the list is in ``record``."""
    traffic: Column | None = None
    answer_passed: bool = False
    """The answer is ``{"Nodes":null,"NodeNames":<passed>`` followed by ``answer``."""
    answer: bytes = b""
    part: str = ""
    """(Format 2) The digest of the :class:`SharedFilterPart` holding this call's nodes, failures and traffic figures
    (then not in ``record`` nor ``traffic``); empty: none."""
    answer_shared: bool = False
    """(Format 2) ``answer`` is the part's (then empty here)."""


class SharedFilterPart(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """(Format 2) What a filter call shares with many others, stored once (``SharedPart``, by the SHA-256 of its
    stored bytes): its candidates, its failures and the snapshot's traffic figures for them, the same for every pod
    of a kind between two traffic snapshots. ~9 of a 1000-node filter's ~10 KB, and most of its writing cost."""

    nodes: bytes
    """JSON of the record's ``nodes``."""
    failures: bytes = b""
    """JSON of its ``failures``; empty: none failed."""
    traffic: Column | None = None
    answer: bytes = b""
    """The answer after its ``NodeNames`` (the failed nodes and their reasons) as the first filter with these lists
    was answered, which the others' answers repeat; a body whose answer differs keeps its own."""


class Part(NamedTuple):
    """A shared part as stored: its digest (the SHA-256 of ``data``, hex) and its bytes (zstd of MessagePack)."""

    digest: str
    data: bytes


MIN_SHARED_BYTES = 1024
"""A filter's lists smaller than this (JSON and columns) stay in its body: a row of their own would cost more."""
PartLookup = Callable[[str], "bytes | None"]
"""Digest of a shared part → its stored bytes, or None when it is not stored."""


class PrioritizeBody(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    record: bytes
    """JSON of the ``PrioritizeRecord`` without its columns (and without ``nodes`` when they are referenced)."""
    scores: list[Column]
    raws: list[Column | None]
    herd: list[Column | None]
    final: Column
    filter_event: str = ""
    """Event id of the cycle's filter call that ``FILTER_TRAFFIC`` columns and ``nodes_passed`` refer to."""
    nodes_passed: bool = False
    """The nodes are that filter call's passed nodes."""
    extender: bytes | list[int] | None = None
    """None: derived from ``final``."""
    answer: bytes | None = None
    """None: derived (each node with its extender score)."""


class Body(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    node_mode: str = ""
    error_path: str = ""
    filter: FilterBody | None = None
    prioritize: PrioritizeBody | None = None
    record: bytes = b""
    """Any other record, as JSON (preempt)."""
    answer: bytes = b"null"


class FilterFacts(msgspec.Struct, gc=False):
    """What a prioritize body may refer to in a filter call, in a few bytes kept until that prioritize comes.

    Only for a filter whose ``passed`` is the nodes without a failure, in order (always, from the engine): then
    "the passed nodes" and "their traffic figures" are the entries of ``nodes`` and ``traffic_bytes`` at the
    positions of nodes not in ``failures``, which :func:`body_decode` finds again from the filter's record.
    """

    event_id: str
    passed: bytes
    """MessagePack of the filter's passed nodes (compared, never decoded)."""
    traffic: bytes
    """MessagePack of its traffic figures at those positions; empty when it has none."""


_json = msgspec.json.Encoder()
_msgpack = msgspec.msgpack.Encoder()
_body_encoder = msgspec.msgpack.Encoder()
_body_decoder = msgspec.msgpack.Decoder(Body)
_filter_record_decoder = msgspec.json.Decoder(FilterRecord)
_names_json_decoder = msgspec.json.Decoder(list[str])
_failures_json_decoder = msgspec.json.Decoder(dict[str, dict[str, str]])
_prioritize_record_decoder = msgspec.json.Decoder(PrioritizeRecord)
_ANSWER_PASSED = b'{"Nodes":null,"NodeNames":'


def _passed_positions(nodes: Sequence[str], failures: Mapping[str, Any]) -> list[bool]:
    return list(map(not_, map(failures.__contains__, nodes)))


_positions: IdentityMemo[list[bool]] = IdentityMemo(64)


def _passing(nodes: Sequence[str], failures: Mapping[str, Any]) -> list[bool]:
    """:func:`_passed_positions`, once per pair of objects (``dashboard.identity_memo``); read only."""
    return _positions.get((nodes, failures), partial(_passed_positions, nodes, failures))


def filter_facts(event_id: str, part: FilterRecord) -> FilterFacts | None:
    """What a later prioritize of the same cycle may refer to (see :class:`FilterFacts`); None: nothing."""
    if part.passed != list(filterfalse(part.failures.__contains__, part.nodes)):
        return None
    traffic = _facts_traffic(part, _passed_positions(part.nodes, part.failures))
    return FilterFacts(event_id, _msgpack.encode(part.passed), traffic)


def _facts_traffic(part: FilterRecord, passing: Sequence[bool]) -> bytes:
    """``FilterFacts.traffic``: the filter's traffic figures at its passing positions; empty when it has none."""
    if len(part.traffic_bytes) != len(part.nodes):
        return b""
    return _msgpack.encode(list(compress(part.traffic_bytes, passing)))


@dataclass(frozen=True, slots=True)
class _FilterShape:
    """What a filter's body takes from its record's per-node lists (:func:`_filter_shape`)."""

    passed_derived: bool
    unresolvable: bytes | None
    answer_prefix: bytes
    part: Part | None
    """The lists as a shared part; None: they stay in the body (small)."""
    answer: bytes
    """The part's answer (see :class:`SharedFilterPart`); empty: none."""
    nul: bool
    """A name or reason in the lists (or in the part's answer) holds NUL."""
    facts_passed: bytes
    facts_traffic: bytes


_EMPTY: tuple[()] = ()
_shapes: IdentityMemo[_FilterShape] = IdentityMemo(64)


def _filter_shape(part: FilterRecord, response: bytes) -> _FilterShape:
    """:func:`_shape_made`, once per set of list objects (``dashboard.identity_memo``): the spool's reader hands the
    same candidate list, outcome and snapshot figures on from pod to pod."""
    lists = (part.nodes, part.failures, part.passed, part.traffic_bytes, part.unresolvable)
    sources = tuple(value if value else _EMPTY for value in lists)  # an empty list is never shared; any empty will do
    return _shapes.get(sources, partial(_shape_made, part, response))


def _shape_made(part: FilterRecord, response: bytes) -> _FilterShape:
    failures = part.failures
    passing = _passing(part.nodes, failures)  # one pass over the nodes for the uses below (read only)
    passed_derived = part.passed == list(compress(part.nodes, passing))
    unresolvable: bytes | None = None
    if part.unresolvable:
        flags = bytes(map(set(part.unresolvable).__contains__, failures))
        if list(compress(failures, flags)) == part.unresolvable:
            unresolvable = flags  # the failed nodes that are unresolvable, in failures order, each once
    elif failures:
        unresolvable = b""
    prefix = _ANSWER_PASSED + _json.encode(part.passed)
    shared = SharedFilterPart(
        nodes=_json.encode(part.nodes),
        failures=_json.encode(failures) if failures else b"",
        traffic=_column_of(part.traffic_bytes) if part.traffic_bytes else None,
        answer=response[len(prefix) :] if response.startswith(prefix) else b"",
    )
    stored: Part | None = None
    size = len(shared.nodes) + len(shared.failures) + (len(_msgpack.encode(shared.traffic)) if shared.traffic else 0)
    if size >= MIN_SHARED_BYTES:
        data = compressor(_LEVEL).compress(_msgpack.encode(shared))  # once per shape: the default level
        stored = Part(hashlib.sha256(data).hexdigest(), data)
    return _FilterShape(
        passed_derived=passed_derived,
        unresolvable=unresolvable,
        answer_prefix=prefix,
        part=stored,
        answer=shared.answer if stored is not None else b"",
        nul=any(b"\\u0000" in text for text in (shared.nodes, shared.failures, shared.answer)),
        facts_passed=_msgpack.encode(part.passed) if passed_derived else b"",
        facts_traffic=_facts_traffic(part, passing) if passed_derived else b"",
    )


def _filter_body(
    part: FilterRecord, response: bytes, facts: list[FilterFacts | None] | None = None
) -> tuple[FilterBody, Part | None]:
    shape = _filter_shape(part, response)
    if shape.nul:
        raise NulInRecordError("a node name or reason contains NUL")
    if facts is not None and shape.passed_derived:
        facts.append(FilterFacts("", shape.facts_passed, shape.facts_traffic))
    shared = shape.part is not None
    slim = msgspec.structs.replace(
        part,
        nodes=[] if shared else part.nodes,
        passed=[] if shape.passed_derived else part.passed,
        failures={} if shared else part.failures,
        unresolvable=[] if shape.unresolvable is not None else part.unresolvable,
        traffic_bytes=[],
    )
    answer_passed = False
    answer = response
    if response.startswith(shape.answer_prefix):
        answer_passed, answer = True, response[len(shape.answer_prefix) :]
    answer_shared = answer_passed and bool(shape.answer) and answer == shape.answer
    body = FilterBody(
        record=_json.encode(slim),
        passed_derived=shape.passed_derived,
        unresolvable=shape.unresolvable,
        traffic=_column_of(part.traffic_bytes) if part.traffic_bytes and not shared else None,
        answer_passed=answer_passed,
        answer=b"" if answer_shared else answer,
        part=shape.part.digest if shape.part is not None else "",
        answer_shared=answer_shared,
    )
    return body, shape.part


def _prioritize_body(
    part: PrioritizeRecord, response: bytes, facts: FilterFacts | None, *, answer_derived: bool = False
) -> PrioritizeBody:
    nodes_passed = facts is not None and _msgpack.encode(part.nodes) == facts.passed
    referenced = False
    scores: list[Column] = []
    raws: list[Column | None] = []
    herd: list[Column | None] = []
    slim_plugins: list[PluginScores] = []
    for plugin in part.plugins:
        scores.append(_scores_column(plugin))
        raw: Column | None = None
        if plugin.raw:
            if plugin.raw == plugin.scores:
                raw = Column(SAME_AS_SCORES)
            elif nodes_passed and facts is not None and facts.traffic and _msgpack.encode(plugin.raw) == facts.traffic:
                raw, referenced = Column(FILTER_TRAFFIC), True
            else:
                raw = _column_of(plugin.raw)
        raws.append(raw)
        herd.append(column_encode(plugin.herd_bytes) if plugin.herd_bytes else None)
        slim_plugins.append(msgspec.structs.replace(plugin, scores=[], raw=[], herd_bytes=[]))
    extender: bytes | list[int] | None = None
    if _extender_of(part.final) != part.extender:
        try:
            extender = bytes(part.extender)
        except (ValueError, TypeError):  # not 0..255 (never from the engine): as they are
            extender = list(part.extender)
    # ``answer_derived``: the event says so (``VerbEvent.answer_derived``); its answer was written from the record.
    derived_answer = answer_derived or encode_host_priorities(part.nodes, part.extender) == response
    slim = msgspec.structs.replace(
        part, nodes=[] if nodes_passed else part.nodes, plugins=slim_plugins, final=[], extender=[]
    )
    return PrioritizeBody(
        record=_json.encode(slim),
        scores=scores,
        raws=raws,
        herd=herd,
        final=_final_column(part),
        filter_event=facts.event_id if facts is not None and (nodes_passed or referenced) else "",
        nodes_passed=nodes_passed,
        extender=extender,
        answer=None if derived_answer else response,
    )


class NulInRecordError(ValueError):
    """A string of the record contains NUL, which PostgreSQL refuses: ``dashboard.services.storable`` first."""


def _has_nul(body: Body) -> bool:
    # Every string of a body is in one of its JSON parts, where msgspec writes NUL as this escape.
    parts = [body.record, body.answer]
    if body.filter is not None:
        parts += [body.filter.record, body.filter.answer]
    if body.prioritize is not None:
        parts += [body.prioritize.record, body.prioritize.answer or b""]
    return any(b"\\u0000" in part for part in parts) or "\x00" in body.node_mode + body.error_path


def body_encode(event: VerbEvent, *, filter_facts: FilterFacts | None = None) -> bytes:
    """The stored body of ``event``'s record and answer (a filter, prioritize or preempt call).

    ``filter_facts``: the cycle's filter call, when the ingester knows it, for a prioritize call to refer to.
    Raises :class:`NulInRecordError` when a string holds NUL.
    """
    return body_encode_with_facts(event, filter_facts=filter_facts).body


class EncodedBody(NamedTuple):
    body: bytes
    facts: FilterFacts | None
    """A filter call's: what a prioritize of its cycle may refer to (as :func:`filter_facts` gives it)."""
    part: Part | None
    """The shared part the body refers to: stored (once) with it."""


def body_encode_with_facts(event: VerbEvent, *, filter_facts: FilterFacts | None = None) -> EncodedBody:
    """:func:`body_encode`, with a filter call's facts and shared part."""
    response = bytes(event.response)  # empty for a derived answer decoded without it: never read then
    body = Body(node_mode=event.node_mode, error_path=event.error_path)
    facts: list[FilterFacts | None] = []
    shared: Part | None = None
    if event.filter is not None:
        body.filter, shared = _filter_body(event.filter, response, facts)
    elif event.prioritize is not None:
        body.prioritize = _prioritize_body(
            event.prioritize, response, filter_facts, answer_derived=event.answer_derived
        )
    else:
        part = event.bind or event.preempt
        body.record = _json.encode(part) if part is not None else b"{}"
        body.answer = response
    if _has_nul(body):
        raise NulInRecordError("a string of the record contains NUL")
    made = facts[0] if facts else None
    if made is not None:
        made.event_id = event.event_id
    return EncodedBody(
        bytes([BODY_FORMAT]) + compressor(_BODY_LEVEL).compress(_body_encoder.encode(body)), made, shared
    )


FilterLookup = Callable[[str], "Mapping[str, Any] | None"]
"""Event id of a filter call → its record (as :func:`body_decode` gives it), or None when it is not found."""


_shared_part_decoder = msgspec.msgpack.Decoder(SharedFilterPart)


def _shared_part(digest: str, parts: PartLookup) -> SharedFilterPart:
    data = parts(digest)
    if data is None:
        raise ValueError(f"the shared part {digest} this record refers to is not stored")
    if hashlib.sha256(data).hexdigest() != digest:
        raise ValueError(f"the shared part {digest} this record refers to does not match its digest (altered)")
    return _shared_part_decoder.decode(decompressor().decompress(data))


def _filter_record(body: FilterBody, parts: PartLookup) -> tuple[FilterRecord, SharedFilterPart | None]:
    part = _filter_record_decoder.decode(body.record)
    shared: SharedFilterPart | None = None
    if body.part:
        shared = _shared_part(body.part, parts)
        part.nodes = _names_json_decoder.decode(shared.nodes)
        if shared.failures:
            part.failures = _failures_json_decoder.decode(shared.failures)
        if shared.traffic is not None:
            part.traffic_bytes = column_decode(shared.traffic)
    if body.passed_derived:
        failures = part.failures
        part.passed = [n for n in part.nodes if n not in failures]
    if body.unresolvable is not None:
        part.unresolvable = list(compress(part.failures, body.unresolvable))
    if body.traffic is not None:
        part.traffic_bytes = column_decode(body.traffic)
    return part, shared


def _prioritize_record(body: PrioritizeBody, lookup: FilterLookup) -> PrioritizeRecord:
    part = _prioritize_record_decoder.decode(body.record)
    filter_record = lookup(body.filter_event) if body.filter_event else None
    if body.filter_event and filter_record is None:
        raise ValueError(f"the filter call {body.filter_event} this record refers to is not stored")
    if body.nodes_passed:
        part.nodes = list(filter_record["passed"]) if filter_record is not None else []
    traffic: list[Any] | None = None
    for plugin, scores, raw, herd in zip(part.plugins, body.scores, body.raws, body.herd, strict=True):
        # Raw figures and herd bytes first: a plugin's scores may be predicted from them (``INVERSE_SHARE``).
        if raw is not None and raw.kind == FILTER_TRAFFIC:
            if traffic is None:
                assert filter_record is not None
                nodes, failures = filter_record["nodes"], filter_record.get("failures", {})
                traffic = list(compress(filter_record["traffic_bytes"], _passed_positions(nodes, failures)))
            plugin.raw = list(traffic)
        elif raw is not None and raw.kind != SAME_AS_SCORES:
            plugin.raw = column_decode(raw)
        if herd is not None:
            plugin.herd_bytes = column_decode(herd)
        if scores.kind == INVERSE_SHARE:
            plugin.scores = _from_prediction(_inverse_share(plugin.raw, plugin.herd_bytes), scores.data).tolist()
        else:
            plugin.scores = column_decode(scores)
        if raw is not None and raw.kind == SAME_AS_SCORES:
            plugin.raw = list(plugin.scores)
    if body.final.kind == WEIGHTED_MEAN:
        predicted = _weighted_mean(part.plugins, len(part.nodes))
        part.final = _from_prediction(predicted, body.final.data).tolist()
    else:
        part.final = column_decode(body.final)
    part.extender = _extender_of(part.final) if body.extender is None else list(body.extender)
    return part


def stored_part(digest: str) -> bytes | None:
    """The stored bytes of a shared part (``SharedPart``), the latest few kept in memory: they never change."""
    found = _stored_parts.get(digest)
    if found is None:
        from dashboard.models import SharedPart  # the model's module imports this one

        data = SharedPart.objects.filter(digest=digest).values_list("data", flat=True).first()
        if data is None:
            return None
        found = bytes(data)
        _stored_parts.put(digest, found)  # thread-safe: the dashboard's threads read calls side by side
    return found


STORED_PARTS_KEPT = 32
_stored_parts: LRU[str, bytes] = LRU(STORED_PARTS_KEPT)


def body_decode(body: bytes, *, lookup: FilterLookup, parts: PartLookup = stored_part) -> tuple[dict[str, Any], Any]:
    """The record (as ``dashboard.services.cycles`` built it from the event) and the answer, from a stored body.

    ``parts``: where a filter's shared part is found (by default, the database)."""
    if not body or body[0] not in BODY_FORMATS_READ:
        raise ValueError(f"unknown body format {body[:1]!r}")
    decoded = _body_decoder.decode(decompressor().decompress(body[1:]))
    answer: Any
    part: Any
    if decoded.filter is not None:
        part, shared = _filter_record(decoded.filter, parts)
        text = shared.answer if decoded.filter.answer_shared and shared is not None else decoded.filter.answer
        if decoded.filter.answer_passed:
            text = _ANSWER_PASSED + _json.encode(part.passed) + text
        answer = msgspec.json.decode(text)
    elif decoded.prioritize is not None:
        part = _prioritize_record(decoded.prioritize, lookup)
        if decoded.prioritize.answer is None:
            answer = [{"Host": h, "Score": s} for h, s in zip(part.nodes, part.extender, strict=True)]
        else:
            answer = msgspec.json.decode(decoded.prioritize.answer)
    else:
        part = None
        answer = msgspec.json.decode(decoded.answer)
    record: dict[str, Any] = msgspec.to_builtins(part) if part is not None else msgspec.json.decode(decoded.record)
    if decoded.error_path:
        record["error_path"] = decoded.error_path
    if decoded.node_mode:
        record["node_mode"] = decoded.node_mode
    return record, answer


def body_referring_to(body: bytes, event_ids: Mapping[str, str]) -> bytes:
    """``body`` with its reference to a filter call (a prioritize's) renamed by ``event_ids`` (old → new); other
    bodies as they are. For copies of whole cycles under new event ids (``benchmarks/dashboard.py``), never for
    recorded ones."""
    decoded = _body_decoder.decode(decompressor().decompress(body[1:]))
    if decoded.prioritize is None or decoded.prioritize.filter_event not in event_ids:
        return body
    decoded.prioritize.filter_event = event_ids[decoded.prioritize.filter_event]
    return body[:1] + compressor(_BODY_LEVEL).compress(_body_encoder.encode(decoded))


def body_read(body: bytes, *, lookup: FilterLookup, parts: PartLookup = stored_part) -> tuple[dict[str, Any], Any]:
    """:func:`body_decode`, or, for a damaged body, a record saying so (as :func:`unpack` does for packed JSON)."""
    try:
        return body_decode(body, lookup=lookup, parts=parts)
    except (ValueError, TypeError, KeyError, zstandard.ZstdError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        return {"$unreadable": f"stored body cannot be read: {exc}"}, None
