"""The spool's bytes for a ``VerbEvent`` (:func:`encode_event`) and the event again (:func:`decode_event`).

The verbs append one record per call to the spool, on the request path; the ingester reads them back, in another
process and often another version. Five forms exist, told apart by their first bytes, and every one ever written is
still read:

- JSON (starts with ``{``): every call without a per-node record (bind, refused calls), readable as it is;
- :data:`SPOOL_BINARY` (``SLR\\x01``): zstd-compressed MessagePack of the event, fields by position;
- :data:`SPOOL_BINARY_DERIVED` (``SLR\\x02``): the same, for a prioritize whose answer is left out because it is
  derived from the record (``VerbEvent.answer_derived``);
- :data:`SPOOL_FRAMED` (``SLR\\x03``, written by default): the per-node fields and the answer each compressed as a
  frame of its own, the rest of the event compressed as one;
- :data:`SPOOL_DERIVING` (``SLR\\x04``, written with ``SCHEDLENS_SPOOL_FORM=deriving``): the same, a prioritize's
  scores that its other columns give back left out (``record_formulas``).

A per-node record holds thousands of floats: binary, they are copied as 8 bytes each instead of being formatted as
decimal text. The per-node fields repeat from call to call (a candidate list, a filter's outcome, one traffic
snapshot's figures: the verbs hand the same objects on), so the framed form compresses each such frame once per
object on writing, and the reader decodes a repeated frame once, by its bytes, and hands the same (never mutated)
object on.

Positions are the format: a field added to ``VerbEvent`` goes last, with a default, or records already spooled no
longer read (``tests/scheduler_core/extender/record/test_record_spool.py`` pins the order).

A bind intent (``BindIntent``, :func:`encode_intent`) is no verb record: JSON, in the spool's own ``bind_intents``
table (``dashboard.spool``), never read by the ingester.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import msgspec
import zstandard

from scheduler_core.extender.lru import LRU
from scheduler_core.extender.protocol.wire import encode_host_priorities
from scheduler_core.extender.record.compression import compressor, decompressor
from scheduler_core.extender.record.formulas import derived_final, derived_scores, final_derives, scores_derive
from scheduler_core.extender.record.structs import (
    NETWORK_TRAFFIC,
    BindIntent,
    FilterRecord,
    PluginScores,
    PrioritizeRecord,
    VerbEvent,
)

_names_decoder = msgspec.msgpack.Decoder(list[str])
_failures_decoder = msgspec.msgpack.Decoder(dict[str, dict[str, str]])
_figures_decoder = msgspec.msgpack.Decoder(list[float | None])
_scores_decoder = msgspec.msgpack.Decoder(list[float])
_SHARED_FIELDS: dict[type[msgspec.Struct], dict[str, msgspec.msgpack.Decoder[Any]]] = {
    FilterRecord: {
        "nodes": _names_decoder,
        "passed": _names_decoder,
        "failures": _failures_decoder,
        "unresolvable": _names_decoder,
        "traffic_bytes": _figures_decoder,
    },
    PluginScores: {"scores": _scores_decoder, "raw": _figures_decoder},
    PrioritizeRecord: {"nodes": _names_decoder},
}
"""Per-node fields the spool's reader takes whole as bytes and decodes once per distinct value (:func:`_shared`):
a candidate list, a filter's outcome, the traffic figures of one snapshot and a plugin's scores for one list repeat
from pod to pod."""
_EMPTY_ARRAY = b"\x90"
_EMPTY_MAP = b"\x80"
SHARED_KEPT = 64
"""Distinct values of each kind the reader keeps decoded, the least recently read dropped first: values made afresh
for each record (a herd-adjusted score column) pass through without pushing out those that repeat."""
_shared_values: dict[msgspec.msgpack.Decoder[Any], LRU[bytes, Any]] = {
    decoder: LRU(SHARED_KEPT) for fields in _SHARED_FIELDS.values() for decoder in fields.values()
}
"""Per decoder: the ingester prepares in one thread and prepares again in another (the LRU is thread-safe)."""


def _shared(raw: msgspec.Raw, decoder: msgspec.msgpack.Decoder[Any]) -> Any:
    """``raw`` decoded, the same object for the same bytes: never mutated by anyone (as the verbs' node lists).

    A many-node list is that many new strings (or floats) to decode, hash and free per record; found again by its
    bytes, it is one hash, and its strings keep theirs for every lookup the ingester makes with them. An empty list
    or map is never shared: it is the one value someone might fill.
    """
    data = bytes(raw)
    if data == _EMPTY_ARRAY:
        return []
    if data == _EMPTY_MAP:
        return {}
    return _shared_values[decoder].get_or_make(data, partial(decoder.decode, data))


class _Reader:
    """How the spool's reader makes one record type: its spooled form, and which positions hold per-node fields.

    ``derivable``: (the ``SLR\\x04`` form) fields the writer leaves out when ``derived(record)`` names them, because
    ``fill`` writes them again from the rest of the record (``record_formulas``): a per-node field as frame
    :data:`DERIVED_FRAME`, another as nil.
    """

    def __init__(
        self,
        record: type[msgspec.Struct],
        nested: dict[str, Any] | None = None,
        *,
        derivable: tuple[str, ...] = (),
        derived: Callable[[Any], tuple[str, ...]] | None = None,
        fill: Callable[[Any], None] | None = None,
        form: str = "",
    ) -> None:
        shared = _SHARED_FIELDS[record]
        nested = nested or {}
        fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
        framed: list[tuple[str, Any] | tuple[str, Any, Any]] = []
        self.shared: list[tuple[int, msgspec.msgpack.Decoder[Any]]] = []
        self.nested: list[tuple[int, _Reader]] = []
        self.names = [info.name for info in msgspec.structs.fields(record)]
        self.derivable = derivable
        self.derived = derived
        self.fill = fill
        self.empty: dict[int, type[list[Any]] | type[dict[Any, Any]]] = {}
        for position, info in enumerate(msgspec.structs.fields(record)):
            kind: Any = info.type
            framed_kind: Any = info.type
            if info.name in shared:
                kind, framed_kind = msgspec.Raw, int
                self.shared.append((position, shared[info.name]))
                self.empty[position] = dict if shared[info.name] is _failures_decoder else list
            elif info.name in nested:
                reader = nested[info.name]
                kind = list[reader.spooled]  # type: ignore[name-defined]
                framed_kind = list[reader.framed]  # type: ignore[name-defined]
                self.nested.append((position, reader))
            elif info.name in derivable:
                framed_kind = info.type | None  # nil: derived
            if info.default is not msgspec.NODEFAULT:
                fields.append((info.name, kind, info.default))
                framed.append((info.name, framed_kind, info.default))
            elif info.default_factory is msgspec.NODEFAULT:
                fields.append((info.name, kind))
                framed.append((info.name, framed_kind))
            elif kind is msgspec.Raw:  # what the writer leaves out (omit_defaults) is the empty list or map
                empty = _EMPTY_MAP if shared[info.name] is _failures_decoder else _EMPTY_ARRAY
                fields.append((info.name, kind, msgspec.Raw(empty)))
                framed.append((info.name, framed_kind, 0))  # frame 0: the empty list or map
            else:
                fields.append((info.name, kind, msgspec.field(default_factory=info.default_factory)))
                framed.append((info.name, framed_kind, msgspec.field(default_factory=info.default_factory)))
        self.shared_positions = frozenset(position for position, _ in self.shared)
        self.record = record
        self.spooled = msgspec.defstruct(f"Spooled{record.__name__}", fields, gc=False, module=__name__)
        self.framed = msgspec.defstruct(
            f"Framed{form}{record.__name__}", framed, omit_defaults=True, gc=False, module=__name__
        )

    def read(self, spooled: Any) -> Any:
        values = list(msgspec.structs.astuple(spooled))
        for position, decoder in self.shared:
            values[position] = _shared(values[position], decoder)
        for position, reader in self.nested:
            values[position] = [reader.read(item) for item in values[position]]
        return self.record(*values)

    def write_framed(self, record: Any, frames: list[bytes]) -> Any:
        """``record`` with each per-node field replaced by its frame's number in ``frames`` (appended there)."""
        values = list(msgspec.structs.astuple(record))
        derived = self.derived(record) if self.derived is not None else ()
        for position, _ in self.shared:
            if self.names[position] in derived:
                values[position] = DERIVED_FRAME
            else:
                values[position] = _frame_number(values[position], frames, raw=False)
        for position, reader in self.nested:
            values[position] = [reader.write_framed(item, frames) for item in values[position]]
        for name in derived:
            if (position := self.names.index(name)) not in self.shared_positions:
                values[position] = None
        return self.framed(*values)

    def read_framed(self, framed: Any, frames: list[bytes]) -> Any:
        values = list(msgspec.structs.astuple(framed))
        for position, decoder in self.shared:
            number = values[position]
            if number == DERIVED_FRAME and self.names[position] in self.derivable:
                values[position] = None  # written again by ``fill``
            else:
                values[position] = self.empty[position]() if number == 0 else _frame_value(frames, number, decoder)
        for position, reader in self.nested:
            values[position] = [reader.read_framed(item, frames) for item in values[position]]
        record = self.record(*values)
        if self.fill is not None:
            self.fill(record)
        return record


DERIVED_FRAME = -1
"""(``SLR\\x04``) The frame number of a per-node field left out because the record's other fields give it."""


def _scores_derived(plugin: PluginScores) -> tuple[str, ...]:
    # Tried for the plugin whose formula it is only: another plugin's scores are spooled without converting its
    # columns for a check that fails. Read back whatever the plugin (frame DERIVED_FRAME: the inverse share).
    return ("scores",) if plugin.name == NETWORK_TRAFFIC and scores_derive(plugin) else ()


def _fill_scores(plugin: PluginScores) -> None:
    if plugin.scores is None:
        plugin.scores = derived_scores(plugin)


def _final_derived(record: PrioritizeRecord) -> tuple[str, ...]:
    return ("final",) if final_derives(record.plugins, record.final) else ()


def _fill_final(record: PrioritizeRecord) -> None:
    if record.final is None:
        record.final = derived_final(record.plugins, len(record.nodes))


_FILTER_READER = _Reader(FilterRecord)
_PRIORITIZE_READER = _Reader(PrioritizeRecord, {"plugins": _Reader(PluginScores)})
_DERIVING_PRIORITIZE_READER = _Reader(
    PrioritizeRecord,
    {
        "plugins": _Reader(
            PluginScores, derivable=("scores",), derived=_scores_derived, fill=_fill_scores, form="Deriving"
        )
    },
    derivable=("final",),
    derived=_final_derived,
    fill=_fill_final,
    form="Deriving",
)


def _event_form(name: str, replaced: dict[str, tuple[Any, Any]]) -> type[msgspec.Struct]:
    """A ``VerbEvent`` as the spool holds it in binary form: MessagePack, fields by position, the ``replaced`` fields
    with another type and default (name → (type, default)).

    Made from ``VerbEvent``'s own field list, so a field added there is carried without anyone copying it by hand.
    Records already spooled keep reading only if a new field goes last, with a default (positions are the format);
    ``tests/scheduler_core/extender/record/test_record_spool.py`` pins the order.
    """
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for info in msgspec.structs.fields(VerbEvent):
        if info.name in replaced:
            fields.append((info.name, *replaced[info.name]))
        elif info.default is not msgspec.NODEFAULT:
            fields.append((info.name, info.type, info.default))
        elif info.default_factory is not msgspec.NODEFAULT:
            fields.append((info.name, info.type, msgspec.field(default_factory=info.default_factory)))
        else:
            fields.append((info.name, info.type))
    return msgspec.defstruct(name, fields, array_like=True, gc=False, module=__name__)


_SpoolEvent = _event_form(
    "SpoolEvent",  # the answer as bytes, the per-node fields as MessagePack taken whole (``_shared``)
    {
        "response": (bytes, b"null"),
        "filter": (_FILTER_READER.spooled | None, None),
        "prioritize": (_PRIORITIZE_READER.spooled | None, None),
    },
)
_FramedSpoolEvent = _event_form(
    "FramedSpoolEvent",  # the rest of a :data:`SPOOL_FRAMED` record: per-node fields and answer as frame numbers
    {
        "response": (int, 0),
        "filter": (_FILTER_READER.framed | None, None),
        "prioritize": (_PRIORITIZE_READER.framed | None, None),
    },
)
_DerivingSpoolEvent = _event_form(
    "DerivingSpoolEvent",  # the rest of a :data:`SPOOL_DERIVING` record: as framed, derived columns left out
    {
        "response": (int, 0),
        "filter": (_FILTER_READER.framed | None, None),
        "prioritize": (_DERIVING_PRIORITIZE_READER.framed | None, None),
    },
)
SPOOL_FIELDS = tuple(info.name for info in msgspec.structs.fields(VerbEvent))
"""The binary spool form's fields, in their positions."""
_RESPONSE = SPOOL_FIELDS.index("response")
_PRIORITIZE = SPOOL_FIELDS.index("prioritize")
_FILTER = SPOOL_FIELDS.index("filter")


SPOOL_BINARY = b"SLR\x01"
"""The first bytes of a record spooled in binary form (JSON records start with ``{``): zstd-compressed MessagePack."""
SPOOL_BINARY_DERIVED = b"SLR\x02"
"""The same form, for a prioritize whose answer (``answer_derived``) is left out: its answer's place holds no bytes.

A magic of its own so that a version before it sets such a record aside (rejected, kept) rather than store an
empty answer."""
SPOOL_FRAMED = b"SLR\x03"
"""The form written now: the per-node fields (those of ``_SHARED_FIELDS``) and the answer each compressed as a frame
of its own, the rest of the record compressed as one; MessagePack ``[rest, frame 1, frame 2, …]`` where the rest
holds each frame's number (0: empty, or a derived answer). A frame the writer compressed before, from the same object
(a candidate list, a filter outcome's lists and answer, a snapshot's column), is not compressed again
(:func:`_frame_number`)."""
SPOOL_DERIVING = b"SLR\x04"
""":data:`SPOOL_FRAMED`, where a prioritize leaves out the columns its other columns give
back by the frozen formulas of ``record_formulas`` (checked bit for bit on writing): its final scores (nil in the
rest) and a plugin's scores that are the inverse share of its raw figures and herd bytes (frame
:data:`DERIVED_FRAME`). The reader writes them again. A magic of its own: a version before it sets such a record
aside (rejected, kept) rather than read it without its final scores."""
SPOOL_BINARY_FORMS = (SPOOL_BINARY, SPOOL_BINARY_DERIVED, SPOOL_FRAMED, SPOOL_DERIVING)
"""Every binary form's first bytes (``bytes.startswith`` takes the tuple)."""
_ZSTD_LEVEL = -1
"""One of zstd's fast levels: on the verbs' path, and a record's names and reasons repeat enough to compress well
even so."""
FRAMES_KEPT = 32
"""Frames each process keeps compressed, by object, the least recently written dropped first: the frames of a few
candidate lists and outcomes, and the score columns made afresh for each call passing through."""
_json_encoder = msgspec.json.Encoder()
_json_decoder = msgspec.json.Decoder(VerbEvent)
_binary_encoder = msgspec.msgpack.Encoder()
_binary_decoder = msgspec.msgpack.Decoder(_SpoolEvent)
_framed_decoder = msgspec.msgpack.Decoder(_FramedSpoolEvent)
_deriving_decoder = msgspec.msgpack.Decoder(_DerivingSpoolEvent)
_frames_decoder = msgspec.msgpack.Decoder(list[bytes])
_ANSWER_DERIVED = SPOOL_FIELDS.index("answer_derived")
_written_frames: LRU[int, tuple[Any, bytes]] = LRU(FRAMES_KEPT)
"""id(value) → (the value, its compressed frame); holding the value keeps its id from being reused meanwhile."""
_read_frames: dict[msgspec.msgpack.Decoder[Any] | None, LRU[bytes, Any]] = {
    decoder: LRU(SHARED_KEPT) for decoder in {*(d for fields in _SHARED_FIELDS.values() for d in fields.values()), None}
}
"""Per decoder (None: an answer's bytes): compressed frame → the value decoded from it, as :func:`_shared`."""


def _frame_number(value: Any, frames: list[bytes], *, raw: bool) -> int:
    """``value``'s number among ``frames`` once its compressed frame is appended there; 0 for an empty value.

    Per-node values are never mutated once recorded (the verbs share them between calls), so a value is compressed
    once per object, not once per call that records it.
    """
    if not value:
        return 0
    found = _written_frames.get(id(value))
    if found is None or found[0] is not value:
        data = value if raw else _binary_encoder.encode(value)
        found = (value, compressor(_ZSTD_LEVEL).compress(data))
        _written_frames.put(id(value), found)
    frames.append(found[1])
    return len(frames)


def _frame_value(frames: list[bytes], number: int, decoder: msgspec.msgpack.Decoder[Any] | None) -> Any:
    """Frame ``number`` decoded (bytes when ``decoder`` is None), the same object for the same compressed bytes."""
    if not 0 < number <= len(frames):
        raise msgspec.DecodeError(f"a record refers to its part {number} but has {len(frames)} parts")
    frame = frames[number - 1]
    return _read_frames[decoder].get_or_make(frame, partial(_decode_frame, frame, decoder))


def _decode_frame(frame: bytes, decoder: msgspec.msgpack.Decoder[Any] | None) -> Any:
    try:
        data = decompressor().decompress(frame)
    except zstandard.ZstdError as exc:
        raise msgspec.DecodeError(f"a record's part cannot be decompressed: {exc}") from None
    return data if decoder is None else decoder.decode(data)


def encode_event(event: VerbEvent, *, deriving: bool = False) -> bytes:
    """The spool's bytes for ``event``; :func:`decode_event` gives it back field for field.

    ``deriving``: in :data:`SPOOL_DERIVING` form (a prioritize leaves out the scores its other columns give back),
    else :data:`SPOOL_FRAMED`. Off until every reader of a cluster reads the new form (the rollback rule,
    ``docs/stored-formats.md``): ``SCHEDLENS_SPOOL_FORM``.

    A call with a per-node record (filter, prioritize, preempt) is written in :data:`SPOOL_FRAMED` form: its
    thousands of floats are copied as 8 bytes each instead of being formatted as decimal text, and compressed; the
    frames that repeat from call to call are compressed once (``benchmarks/verbs/record_encode.py`` measures it). Other
    calls (bind, refusals) stay JSON, readable.

    A prioritize's answer, a large share of its record, is left out when it is derived from the record
    (``answer_derived``): its frame number is 0 and the reader writes it again.
    """
    if event.filter is None and event.prioritize is None and event.preempt is None:
        return _json_encoder.encode(event)
    frames: list[bytes] = []
    values: list[Any] = list(msgspec.structs.astuple(event))
    if event.filter is not None:
        values[_FILTER] = _FILTER_READER.write_framed(event.filter, frames)
    if event.prioritize is not None:
        writer = _DERIVING_PRIORITIZE_READER if deriving else _PRIORITIZE_READER
        values[_PRIORITIZE] = writer.write_framed(event.prioritize, frames)
    derived = event.answer_derived and event.prioritize is not None
    values[_RESPONSE] = 0 if derived else _frame_number(event.response, frames, raw=True)
    rest = compressor(_ZSTD_LEVEL).compress(_binary_encoder.encode(values))
    return (SPOOL_DERIVING if deriving else SPOOL_FRAMED) + _binary_encoder.encode([rest, *frames])


def decode_event(data: bytes, *, derive_answer: bool = True) -> VerbEvent:
    """A spooled record, in any form (framed, binary with or without its derived answer, or JSON as every version
    wrote).

    ``derive_answer=False``: a left-out answer stays empty (:func:`answer_of` writes it when it is needed). For the
    ingester, which stores a derived answer as derived and never reads it: writing it again would look up every
    node name as a new string, for nothing.
    """
    if data.startswith(SPOOL_DERIVING):
        return _decode_framed(data, derive_answer, _deriving_decoder, _DERIVING_PRIORITIZE_READER)
    if data.startswith(SPOOL_FRAMED):
        return _decode_framed(data, derive_answer, _framed_decoder, _PRIORITIZE_READER)
    derived = data.startswith(SPOOL_BINARY_DERIVED)
    if not derived and not data.startswith(SPOOL_BINARY):
        return _json_decoder.decode(data)
    wire = _binary_decoder.decode(decompressor().decompress(memoryview(data)[len(SPOOL_BINARY) :]))
    values = list(msgspec.structs.astuple(wire))
    if values[_FILTER] is not None:
        values[_FILTER] = _FILTER_READER.read(values[_FILTER])
    if values[_PRIORITIZE] is not None:
        values[_PRIORITIZE] = _PRIORITIZE_READER.read(values[_PRIORITIZE])
    if derived:
        values[_RESPONSE] = _derived_answer(values[_PRIORITIZE], derive_answer)
    else:
        values[_RESPONSE] = msgspec.Raw(values[_RESPONSE])
    return VerbEvent(*values)


def _decode_framed(
    data: bytes, derive_answer: bool, decoder: msgspec.msgpack.Decoder[Any], prioritize: _Reader
) -> VerbEvent:
    rest, *frames = _frames_decoder.decode(memoryview(data)[len(SPOOL_FRAMED) :]) or [b""]
    try:
        unpacked = decompressor().decompress(rest)
    except zstandard.ZstdError as exc:
        raise msgspec.DecodeError(f"a record cannot be decompressed: {exc}") from None
    values: list[Any] = list(msgspec.structs.astuple(decoder.decode(unpacked)))
    if values[_FILTER] is not None:
        values[_FILTER] = _FILTER_READER.read_framed(values[_FILTER], frames)
    if values[_PRIORITIZE] is not None:
        values[_PRIORITIZE] = prioritize.read_framed(values[_PRIORITIZE], frames)
    number = values[_RESPONSE]
    if number == 0 and values[_ANSWER_DERIVED] and values[_PRIORITIZE] is not None:
        values[_RESPONSE] = _derived_answer(values[_PRIORITIZE], derive_answer)
    else:
        values[_RESPONSE] = msgspec.Raw(_frame_value(frames, number, None) if number else b"")
    return VerbEvent(*values)


def _derived_answer(scored: PrioritizeRecord | None, derive: bool) -> msgspec.Raw:
    if scored is None:
        raise msgspec.DecodeError("a record spooled without its derived answer has no prioritize part")
    return msgspec.Raw(encode_host_priorities(scored.nodes, scored.extender) if derive else b"")


def answer_of(event: VerbEvent) -> bytes:
    """The answer of ``event``, written again from its record when it was decoded without it."""
    if not event.response and event.answer_derived and (scored := event.prioritize) is not None:
        return encode_host_priorities(scored.nodes, scored.extender)
    return bytes(event.response)


INTENT_FORMS = (b"{",)
"""The forms of a bind intent (``BindIntent``, the spool's ``bind_intents`` table) the reader reads: JSON, fields by
name (a field added later reads as its default from older intents)."""
_intent_decoder = msgspec.json.Decoder(BindIntent)


def encode_intent(intent: BindIntent) -> bytes:
    """The spool's bytes for a bind intent: JSON, a few hundred bytes, readable with ``sqlite3``."""
    return _json_encoder.encode(intent)


def decode_intent(data: bytes) -> BindIntent:
    """A spooled bind intent; raises ``msgspec.DecodeError`` for bytes of no form it reads."""
    if not data.startswith(INTENT_FORMS):
        raise msgspec.DecodeError(f"not a bind intent of a form this version reads (starts with {bytes(data[:4])!r})")
    return _intent_decoder.decode(data)
