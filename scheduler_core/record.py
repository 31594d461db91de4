"""The record of one verb call: what was asked, what every plugin said, what was answered.

Columnar on purpose (one list per quantity, aligned with ``nodes``): a 1000-node cycle stays a few tens
of KB before compression instead of a thousand rows or objects. Structs are ``gc=False`` (they hold only
builtins, never a cycle), so a record does not add to the cyclic collector's work on the verb path.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

import msgspec
import zstandard

from scheduler_core.compression import compressor, decompressor
from scheduler_core.lru import LRU
from scheduler_core.wire import encode_host_priorities

Verb = Literal["filter", "prioritize", "bind", "preempt"]
NODE_CACHE = "NodeCache"
"""The pseudo-plugin a prioritize record names for nodes kube-scheduler sent that the node cache does not know:
they answer 0 whatever the plugins said (its ``notes`` name them)."""
NodeMode = Literal["names", "nodes", ""]


class FilterRecord(msgspec.Struct, omit_defaults=True, gc=False):
    nodes: list[str]
    """Candidates in the order kube-scheduler sent them."""
    passed: list[str]
    failures: dict[str, dict[str, str]] = msgspec.field(default_factory=dict)
    """Failed node → {plugin: reason}; only failed nodes appear (the rest passed every plugin)."""
    details: dict[str, dict[str, str]] = msgspec.field(default_factory=dict)
    """Failed node → {plugin: node-specific figures}."""
    unresolvable: list[str] = msgspec.field(default_factory=list)
    traffic_bytes: list[float | None] = msgspec.field(default_factory=list)
    """Raw received bytes per candidate (aligned with ``nodes``) from the profile's traffic query."""
    metric_age_seconds: float | None = None
    metric_note: str = ""


class PluginScores(msgspec.Struct, omit_defaults=True, gc=False):
    name: str
    weight: int
    scores: list[float]
    """Normalized 0..100 per node, aligned with ``PrioritizeRecord.nodes``."""
    raw: list[float | None] = msgspec.field(default_factory=list)
    herd_bytes: list[float] = msgspec.field(default_factory=list)
    """Bytes assumed on top of ``raw`` per node for its recent binds (aligned with ``nodes``); empty when none."""
    notes: dict[str, str] = msgspec.field(default_factory=dict)
    """Node → why its score is what it is, for nodes that need a word (missing metrics, …)."""
    applicable: bool = True
    note: str = ""
    metric_age_seconds: float | None = None
    herd_binds: list[int] = msgspec.field(default_factory=list)
    """How many recent binds ``herd_bytes`` come from, per node (aligned with ``nodes``); empty when none."""
    herd_newest_age_ms: list[int | None] = msgspec.field(default_factory=list)
    """Age of each node's newest recent bind at the call, in whole milliseconds (None: no bind); empty when no node
    has one. Whole numbers: a third of the bytes of the same ages as floats, spooled and stored for every call."""
    requested: list[str] = msgspec.field(default_factory=list)
    """What the pod asks of the plugin: its extended resources (``NodeResourceFitByCR``), its images
    (``ImageLocality``)."""
    inputs: dict[str, list[float | None]] = msgspec.field(default_factory=dict)
    """Per-node figures the score is computed from, by what they measure, aligned with ``nodes``: each requested
    resource's ``resourcesScore`` (None: no NodeResources object) for ``NodeResourceFitByCR``."""
    missing_score: float | None = None
    """The score the plugin gives a node it has no figure for, by its policy (``NetworkTraffic``: 50, neutral, or 0
    under ``missingPolicy: fail``); None in records from before it was kept."""


class PrioritizeRecord(msgspec.Struct, omit_defaults=True, gc=False):
    nodes: list[str]
    plugins: list[PluginScores]
    final: list[float]
    """Weighted mean of the applicable plugins' scores, 0..100."""
    extender: list[int]
    """``final`` on the extender's 0..10 scale (``answer_scale``, rounded half up): what kube-scheduler received."""
    answer_scale: str = "fixed"
    """``fixed`` (final / 10) or ``spread`` (min–max over the candidates): ``scheduler_core.answer``."""
    extender_weight: int = 0
    """The extender's weight in kube-scheduler's configuration as the profile states it; 0: not stated."""


class BindRecord(msgspec.Struct, omit_defaults=True, gc=False):
    node: str
    detail: str = ""
    api_status: int | None = None
    simulated: bool = False


class PreemptRecord(msgspec.Struct, omit_defaults=True, gc=False):
    candidates: list[str]
    kept: list[str]
    dropped: dict[str, str] = msgspec.field(default_factory=dict)


def _null() -> msgspec.Raw:
    return msgspec.Raw(b"null")


class VerbEvent(msgspec.Struct, omit_defaults=True, gc=False):
    """One verb call, as appended to the spool and folded into a scheduling cycle by the ingester."""

    event_id: str
    verb: str
    profile: str
    started_at: float
    """Unix seconds."""
    duration_ms: float
    http_status: int
    pod_namespace: str = ""
    pod_name: str = ""
    pod_uid: str = ""
    pod_resource_version: str = ""
    node_mode: NodeMode = ""
    error: str = ""
    """The ``Error`` answered, or why the request was refused (400/404/413)."""
    error_path: str = ""
    filter: FilterRecord | None = None
    prioritize: PrioritizeRecord | None = None
    bind: BindRecord | None = None
    preempt: PreemptRecord | None = None
    response: msgspec.Raw = msgspec.field(default_factory=_null)
    """The JSON answered (``null`` for a refused call).

    In full-Nodes mode each echoed node is replaced by ``{"$echoed": name}``: the bytes were the request's.
    """
    server: str = ""
    """Which process answered (host:pid), to trace calls of one cycle across replicas."""
    answer_derived: bool = False
    """A prioritize's answer is its record's hosts with their extender scores, as ``wire.encode_host_priorities``
    writes them (the verb answered exactly that): the spool leaves the answer out and writes it again on reading."""


_names_decoder = msgspec.msgpack.Decoder(list[str])
_failures_decoder = msgspec.msgpack.Decoder(dict[str, dict[str, str]])
_figures_decoder = msgspec.msgpack.Decoder(list[float | None])
_scores_decoder = msgspec.msgpack.Decoder(list[float])
_SHARED: dict[type[msgspec.Struct], dict[str, msgspec.msgpack.Decoder[Any]]] = {
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
"""Per-node parts the spool's reader takes whole as bytes and decodes once per distinct value (:func:`_shared`):
a candidate list, a filter's outcome, the traffic figures of one snapshot and a plugin's scores for one list repeat
from pod to pod."""
_EMPTY_ARRAY = b"\x90"
_EMPTY_MAP = b"\x80"
SHARED_KEPT = 64
"""Distinct values of each kind the reader keeps decoded, the least recently read dropped first: values made afresh
for each record (a herd-adjusted score column) pass through without pushing out those that repeat."""
_shared_values: dict[msgspec.msgpack.Decoder[Any], LRU[bytes, Any]] = {
    decoder: LRU(SHARED_KEPT) for parts in _SHARED.values() for decoder in parts.values()
}
"""Per decoder: the ingester prepares in one thread and prepares again in another (the LRU is thread-safe)."""


def _shared(raw: msgspec.Raw, decoder: msgspec.msgpack.Decoder[Any]) -> Any:
    """``raw`` decoded, the same object for the same bytes: never mutated by anyone (as the verbs' node lists).

    A 1000-node list is ~1000 new strings (or floats) to decode, hash and free per record; found again by its bytes,
    it is one hash of ~10 KB, and its strings keep theirs for every lookup the ingester makes with them. An empty
    list or map is never shared: it is the one value someone might fill.
    """
    data = bytes(raw)
    if data == _EMPTY_ARRAY:
        return []
    if data == _EMPTY_MAP:
        return {}
    return _shared_values[decoder].get_or_make(data, partial(decoder.decode, data))


class _Reader:
    """How the spool's reader makes one record type: its spooled form, and which positions hold shared parts."""

    def __init__(self, record: type[msgspec.Struct], nested: dict[str, Any] | None = None) -> None:
        shared = _SHARED[record]
        nested = nested or {}
        fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
        framed: list[tuple[str, Any] | tuple[str, Any, Any]] = []
        self.shared: list[tuple[int, msgspec.msgpack.Decoder[Any]]] = []
        self.nested: list[tuple[int, _Reader]] = []
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
            if info.default is not msgspec.NODEFAULT:
                fields.append((info.name, kind, info.default))
                framed.append((info.name, framed_kind, info.default))
            elif info.default_factory is msgspec.NODEFAULT:
                fields.append((info.name, kind))
                framed.append((info.name, framed_kind))
            elif kind is msgspec.Raw:  # what the writer leaves out (omit_defaults) is the empty list or map
                empty = _EMPTY_MAP if shared[info.name] is _failures_decoder else _EMPTY_ARRAY
                fields.append((info.name, kind, msgspec.Raw(empty)))
                framed.append((info.name, framed_kind, 0))  # part 0: the empty list or map
            else:
                fields.append((info.name, kind, msgspec.field(default_factory=info.default_factory)))
                framed.append((info.name, framed_kind, msgspec.field(default_factory=info.default_factory)))
        self.record = record
        self.spooled = msgspec.defstruct(f"Spooled{record.__name__}", fields, gc=False, module=__name__)
        self.framed = msgspec.defstruct(
            f"Framed{record.__name__}", framed, omit_defaults=True, gc=False, module=__name__
        )

    def read(self, spooled: Any) -> Any:
        values = list(msgspec.structs.astuple(spooled))
        for position, decoder in self.shared:
            values[position] = _shared(values[position], decoder)
        for position, reader in self.nested:
            values[position] = [reader.read(item) for item in values[position]]
        return self.record(*values)

    def write_framed(self, record: Any, parts: list[bytes]) -> Any:
        """``record`` with each per-node part replaced by its number in ``parts`` (appended there, compressed)."""
        values = list(msgspec.structs.astuple(record))
        for position, _ in self.shared:
            values[position] = _part_number(values[position], parts, raw=False)
        for position, reader in self.nested:
            values[position] = [reader.write_framed(item, parts) for item in values[position]]
        return self.framed(*values)

    def read_framed(self, framed: Any, parts: list[bytes]) -> Any:
        values = list(msgspec.structs.astuple(framed))
        for position, decoder in self.shared:
            number = values[position]
            values[position] = self.empty[position]() if number == 0 else _shared_part(parts, number, decoder)
        for position, reader in self.nested:
            values[position] = [reader.read_framed(item, parts) for item in values[position]]
        return self.record(*values)


_FILTER_READER = _Reader(FilterRecord)
_PRIORITIZE_READER = _Reader(PrioritizeRecord, {"plugins": _Reader(PluginScores)})


def _event_form(name: str, replaced: dict[str, tuple[Any, Any]]) -> type[msgspec.Struct]:
    """A ``VerbEvent`` as the spool holds it in binary form: MessagePack, fields by position, the ``replaced`` fields
    with another type and default (name → (type, default)).

    Made from ``VerbEvent``'s own field list, so a field added there is carried without anyone copying it by hand.
    Records already spooled keep reading only if a new field goes last, with a default (positions are the format);
    ``tests/core/test_record_spool.py`` pins the order.
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
    "SpoolEvent",  # the answer as bytes, the per-node parts as MessagePack taken whole (``_shared``)
    {
        "response": (bytes, b"null"),
        "filter": (_FILTER_READER.spooled | None, None),
        "prioritize": (_PRIORITIZE_READER.spooled | None, None),
    },
)
_FramedSpoolEvent = _event_form(
    "FramedSpoolEvent",  # the rest of a :data:`SPOOL_FRAMED` record: per-node parts and answer as part numbers
    {
        "response": (int, 0),
        "filter": (_FILTER_READER.framed | None, None),
        "prioritize": (_PRIORITIZE_READER.framed | None, None),
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
"""The form written now: the per-node parts (the fields of ``_SHARED``) and the answer each compressed on their own,
the rest of the record compressed as one; MessagePack ``[rest, part 1, part 2, …]`` where the rest holds each part's
number (0: empty, or a derived answer). A part the writer compressed before, the same object (a candidate list, a
filter outcome's lists and answer, a snapshot's column), is not compressed again (:func:`_part_number`)."""
SPOOL_BINARY_FORMS = (SPOOL_BINARY, SPOOL_BINARY_DERIVED, SPOOL_FRAMED)
"""Every binary form's first bytes (``bytes.startswith`` takes the tuple)."""
_ZSTD_LEVEL = -1
"""One of zstd's fast levels: a 1000-node record's names and reasons repeat, so even it makes it 5-10× smaller."""
PARTS_KEPT = 32
"""Parts each process keeps compressed, by object, the least recently written dropped first: the parts of a few
candidate lists and outcomes, and the score columns made afresh for each call passing through."""
_json_encoder = msgspec.json.Encoder()
_json_decoder = msgspec.json.Decoder(VerbEvent)
_binary_encoder = msgspec.msgpack.Encoder()
_binary_decoder = msgspec.msgpack.Decoder(_SpoolEvent)
_framed_decoder = msgspec.msgpack.Decoder(_FramedSpoolEvent)
_frames_decoder = msgspec.msgpack.Decoder(list[bytes])
_ANSWER_DERIVED = SPOOL_FIELDS.index("answer_derived")
_written_parts: LRU[int, tuple[Any, bytes]] = LRU(PARTS_KEPT)
"""id(part) → (the part, its compressed bytes); holding the part keeps its id from being reused meanwhile."""
_read_parts: dict[msgspec.msgpack.Decoder[Any] | None, LRU[bytes, Any]] = {
    decoder: LRU(SHARED_KEPT) for decoder in {*(d for parts in _SHARED.values() for d in parts.values()), None}
}
"""Per decoder (None: an answer's bytes): compressed part → the value decoded from it, as :func:`_shared`."""


def _part_number(value: Any, parts: list[bytes], *, raw: bool) -> int:
    """``value``'s number among ``parts`` once its compressed bytes are appended there; 0 for an empty value.

    Parts are never mutated once recorded (the verbs share them between calls), so a part is compressed once per
    object: at 5000 nodes a filter's lists and answer took ~0.5 ms to encode and compress on every call.
    """
    if not value:
        return 0
    found = _written_parts.get(id(value))
    if found is None or found[0] is not value:
        data = value if raw else _binary_encoder.encode(value)
        found = (value, compressor(_ZSTD_LEVEL).compress(data))
        _written_parts.put(id(value), found)
    parts.append(found[1])
    return len(parts)


def _shared_part(parts: list[bytes], number: int, decoder: msgspec.msgpack.Decoder[Any] | None) -> Any:
    """Part ``number`` decoded (bytes when ``decoder`` is None), the same object for the same compressed bytes."""
    if not 0 < number <= len(parts):
        raise msgspec.DecodeError(f"a record refers to its part {number} but has {len(parts)} parts")
    frame = parts[number - 1]
    return _read_parts[decoder].get_or_make(frame, partial(_decode_part, frame, decoder))


def _decode_part(frame: bytes, decoder: msgspec.msgpack.Decoder[Any] | None) -> Any:
    try:
        data = decompressor().decompress(frame)
    except zstandard.ZstdError as exc:
        raise msgspec.DecodeError(f"a record's part cannot be decompressed: {exc}") from None
    return data if decoder is None else decoder.decode(data)


def encode_event(event: VerbEvent) -> bytes:
    """The spool's bytes for ``event``; :func:`decode_event` gives it back field for field.

    A call with a per-node record (filter, prioritize, preempt) is written in :data:`SPOOL_FRAMED` form: its
    thousands of floats are copied as 8 bytes each instead of being formatted as decimal text, and compressed (a
    1000-node filter's record is ~10 KB, a prioritize's ~24 KB). The parts that repeat from call to call are
    compressed once: at 5000 nodes, encoding a filter's record takes ~0.02 ms instead of ~0.6 (one compressed
    stream), a prioritize's ~0.86 instead of ~1.03, its score columns being new for each call
    (``benchmarks/record_encode.py``). Other calls (bind, refusals) stay JSON, readable.

    A prioritize's answer, a third of its record at 1000 nodes, is left out when it is derived from the record
    (``answer_derived``): its part number is 0 and the reader writes it again.
    """
    if event.filter is None and event.prioritize is None and event.preempt is None:
        return _json_encoder.encode(event)
    parts: list[bytes] = []
    values: list[Any] = list(msgspec.structs.astuple(event))
    if event.filter is not None:
        values[_FILTER] = _FILTER_READER.write_framed(event.filter, parts)
    if event.prioritize is not None:
        values[_PRIORITIZE] = _PRIORITIZE_READER.write_framed(event.prioritize, parts)
    derived = event.answer_derived and event.prioritize is not None
    values[_RESPONSE] = 0 if derived else _part_number(event.response, parts, raw=True)
    rest = compressor(_ZSTD_LEVEL).compress(_binary_encoder.encode(values))
    return SPOOL_FRAMED + _binary_encoder.encode([rest, *parts])


def decode_event(data: bytes, *, derive_answer: bool = True) -> VerbEvent:
    """A spooled record, in any form (framed, binary with or without its derived answer, or JSON as every version
    wrote).

    ``derive_answer=False``: a left-out answer stays empty (:func:`answer_of` writes it when it is needed). For the
    ingester, which stores a derived answer as derived and never reads it: writing it again costs ~0.14 ms per
    1000-node prioritize, the names being new strings to look up.
    """
    if data.startswith(SPOOL_FRAMED):
        return _decode_framed(data, derive_answer)
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


def _decode_framed(data: bytes, derive_answer: bool) -> VerbEvent:
    rest, *parts = _frames_decoder.decode(memoryview(data)[len(SPOOL_FRAMED) :]) or [b""]
    try:
        unpacked = decompressor().decompress(rest)
    except zstandard.ZstdError as exc:
        raise msgspec.DecodeError(f"a record cannot be decompressed: {exc}") from None
    values: list[Any] = list(msgspec.structs.astuple(_framed_decoder.decode(unpacked)))
    if values[_FILTER] is not None:
        values[_FILTER] = _FILTER_READER.read_framed(values[_FILTER], parts)
    if values[_PRIORITIZE] is not None:
        values[_PRIORITIZE] = _PRIORITIZE_READER.read_framed(values[_PRIORITIZE], parts)
    number = values[_RESPONSE]
    if number == 0 and values[_ANSWER_DERIVED] and values[_PRIORITIZE] is not None:
        values[_RESPONSE] = _derived_answer(values[_PRIORITIZE], derive_answer)
    else:
        values[_RESPONSE] = msgspec.Raw(_shared_part(parts, number, None) if number else b"")
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
