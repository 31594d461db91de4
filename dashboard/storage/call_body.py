"""The binary body of a call (``VerbCall.body``, since migration 0004): a per-node record and its answer in one value.

A filter, prioritize or preempt call's record and answer are stored as one **body**: a format byte, then one zstd
frame of MessagePack (:func:`body_encode` / :func:`body_decode`). Columnar as the record already is, with what the
record repeats taken out and put back on reading, each time only after checking that putting it back gives exactly
what was recorded:

- numbers as columns (``columns``: shuffled floats, decimal text, predictions from other columns);
- a filter's ``passed`` (the nodes without a failure, in order), which nodes are unresolvable (one flag per failure),
  and the ``NodeNames`` of its answer (the passed list again);
- a prioritize call's ``extender`` (``final`` on the 0..10 scale) and its answer (hosts and those scores);
- when the cycle's filter call is known to the ingester: a prioritize call's nodes (that filter's passed nodes) and
  its ``NetworkTraffic`` raw bytes (the filter's figures for the same nodes, from the same snapshot), stored as a
  reference to that call's event id (:class:`FilterReference`); the reference is sealed into the chain with the
  body, and the filter call is sealed too, so neither can change unnoticed;
- (format 2) a prioritize call's ``final`` and ``NetworkTraffic``'s scores as what they differ from the engine's
  formulas by (``columns``);
- (format 2) a filter call's candidates, failures and traffic figures as a shared part, stored once for every filter
  with the same lists and named in the body by its digest (``shared_parts``).

Binary, the body needs no base64 (unlike packed JSON), and it is a fraction of the packed JSON of the same record
(``benchmarks/record`` measures what is stored). The chain seals the body's SHA-256 (``dashboard.audit.chain``).

Decoding never reads the database: the caller passes where a referenced filter call's record (``filter_records``)
and a shared part's bytes (``shared_parts``) are found.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import compress, filterfalse
from operator import not_
from typing import Any, NamedTuple, cast

import msgspec
import zstandard

from dashboard.storage.columns import (
    FILTER_TRAFFIC,
    INVERSE_SHARE,
    SAME_AS_SCORES,
    WEIGHTED_MEAN,
    Column,
    cached_column,
    column_decode,
    column_encode,
    extender_of,
    final_column,
    from_prediction,
    scores_column,
)
from dashboard.storage.identity_cache import IdentityCache
from dashboard.storage.shared_parts import (
    SharedFilterPart,
    SharedPartBytes,
    SharedPartLookup,
    shared_part_decode,
    shared_part_encode,
)
from scheduler_core.compression import compressor, decompressor
from scheduler_core.record import (
    CallRecord,
    FilterRecord,
    NodeMode,
    PluginScores,
    PreemptRecord,
    PrioritizeRecord,
    VerbEvent,
)
from scheduler_core.record_formulas import inverse_share, weighted_mean
from scheduler_core.wire import encode_host_priorities

BODY_FORMAT = 2
"""The first byte of every body written now; a later format gets another number and this module keeps reading the
earlier ones. 2 added the predicted column kinds (``WEIGHTED_MEAN``, ``INVERSE_SHARE``) and the shared parts: a
version that reads only 1 sets such a body aside as unreadable instead of misreading it."""
BODY_FORMATS_READ = frozenset({1, 2})
_BODY_LEVEL = 1


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
    shared_part: str = ""
    """(Format 2) The digest of the ``SharedFilterPart`` holding this call's nodes, failures and traffic figures
    (then not in ``record`` nor ``traffic``); empty: none."""
    answer_shared: bool = False
    """(Format 2) ``answer`` is the shared part's (then empty here)."""


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


class FilterReference(msgspec.Struct, gc=False):
    """What a prioritize body may refer to in its cycle's filter call (its passed nodes and their traffic figures),
    in a few bytes the ingester keeps until that prioritize comes.

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
_preempt_record_decoder = msgspec.json.Decoder(PreemptRecord)
_ANSWER_PASSED = b'{"Nodes":null,"NodeNames":'


def _passed_positions(nodes: Sequence[str], failures: Mapping[str, Any]) -> list[bool]:
    return list(map(not_, map(failures.__contains__, nodes)))


_positions: IdentityCache[list[bool]] = IdentityCache(64)


def _passing(nodes: Sequence[str], failures: Mapping[str, Any]) -> list[bool]:
    """:func:`_passed_positions`, once per pair of objects (``identity_cache``); read only."""
    return _positions.get((nodes, failures), partial(_passed_positions, nodes, failures))


def filter_reference(event_id: str, record: FilterRecord) -> FilterReference | None:
    """What a later prioritize of the same cycle may refer to (see :class:`FilterReference`); None: nothing."""
    if record.passed != list(filterfalse(record.failures.__contains__, record.nodes)):
        return None
    traffic = _reference_traffic(record, _passed_positions(record.nodes, record.failures))
    return FilterReference(event_id, _msgpack.encode(record.passed), traffic)


def _reference_traffic(record: FilterRecord, passing: Sequence[bool]) -> bytes:
    """``FilterReference.traffic``: the filter's traffic figures at its passing positions; empty when it has none."""
    if len(record.traffic_bytes) != len(record.nodes):
        return b""
    return _msgpack.encode(list(compress(record.traffic_bytes, passing)))


@dataclass(frozen=True, slots=True)
class _FilterShape:
    """What a filter's body takes from its record's per-node lists (:func:`_filter_shape`)."""

    passed_derived: bool
    unresolvable: bytes | None
    answer_prefix: bytes
    shared_part: SharedPartBytes | None
    """The lists as a shared part; None: they stay in the body (small)."""
    answer: bytes
    """The shared part's answer (see ``SharedFilterPart``); empty: none."""
    nul: bool
    """A name or reason in the lists (or in the shared part's answer) holds NUL."""
    reference_passed: bytes
    reference_traffic: bytes


_EMPTY: tuple[()] = ()
_shapes: IdentityCache[_FilterShape] = IdentityCache(64)


def _filter_shape(record: FilterRecord, response: bytes) -> _FilterShape:
    """:func:`_shape_made`, once per set of list objects (``identity_cache``): the spool's reader hands the same
    candidate list, outcome and snapshot figures on from pod to pod."""
    lists = (record.nodes, record.failures, record.passed, record.traffic_bytes, record.unresolvable)
    sources = tuple(value if value else _EMPTY for value in lists)  # an empty list is never shared; any empty will do
    return _shapes.get(sources, partial(_shape_made, record, response))


def _shape_made(record: FilterRecord, response: bytes) -> _FilterShape:
    failures = record.failures
    passing = _passing(record.nodes, failures)  # one pass over the nodes for the uses below (read only)
    passed_derived = record.passed == list(compress(record.nodes, passing))
    unresolvable: bytes | None = None
    if record.unresolvable:
        flags = bytes(map(set(record.unresolvable).__contains__, failures))
        if list(compress(failures, flags)) == record.unresolvable:
            unresolvable = flags  # the failed nodes that are unresolvable, in failures order, each once
    elif failures:
        unresolvable = b""
    prefix = _ANSWER_PASSED + _json.encode(record.passed)
    shared = SharedFilterPart(
        nodes=_json.encode(record.nodes),
        failures=_json.encode(failures) if failures else b"",
        traffic=cached_column(record.traffic_bytes) if record.traffic_bytes else None,
        answer=response[len(prefix) :] if response.startswith(prefix) else b"",
    )
    stored = shared_part_encode(shared)
    return _FilterShape(
        passed_derived=passed_derived,
        unresolvable=unresolvable,
        answer_prefix=prefix,
        shared_part=stored,
        answer=shared.answer if stored is not None else b"",
        nul=any(b"\\u0000" in text for text in (shared.nodes, shared.failures, shared.answer)),
        reference_passed=_msgpack.encode(record.passed) if passed_derived else b"",
        reference_traffic=_reference_traffic(record, passing) if passed_derived else b"",
    )


def _filter_body(
    record: FilterRecord, response: bytes, references: list[FilterReference | None] | None = None
) -> tuple[FilterBody, SharedPartBytes | None]:
    shape = _filter_shape(record, response)
    if shape.nul:
        raise NulInRecordError("a node name or reason contains NUL")
    if references is not None and shape.passed_derived:
        references.append(FilterReference("", shape.reference_passed, shape.reference_traffic))
    shared = shape.shared_part is not None
    slim = msgspec.structs.replace(
        record,
        nodes=[] if shared else record.nodes,
        passed=[] if shape.passed_derived else record.passed,
        failures={} if shared else record.failures,
        unresolvable=[] if shape.unresolvable is not None else record.unresolvable,
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
        traffic=cached_column(record.traffic_bytes) if record.traffic_bytes and not shared else None,
        answer_passed=answer_passed,
        answer=b"" if answer_shared else answer,
        shared_part=shape.shared_part.digest if shape.shared_part is not None else "",
        answer_shared=answer_shared,
    )
    return body, shape.shared_part


def _prioritize_body(
    record: PrioritizeRecord, response: bytes, reference: FilterReference | None, *, answer_derived: bool = False
) -> PrioritizeBody:
    nodes_passed = reference is not None and _msgpack.encode(record.nodes) == reference.passed
    referenced = False
    scores: list[Column] = []
    raws: list[Column | None] = []
    herd: list[Column | None] = []
    slim_plugins: list[PluginScores] = []
    for plugin in record.plugins:
        scores.append(scores_column(plugin))
        raw: Column | None = None
        if plugin.raw:
            if plugin.raw == plugin.scores:
                raw = Column(SAME_AS_SCORES)
            elif (
                nodes_passed
                and reference is not None
                and reference.traffic
                and _msgpack.encode(plugin.raw) == reference.traffic
            ):
                raw, referenced = Column(FILTER_TRAFFIC), True
            else:
                raw = cached_column(plugin.raw)
        raws.append(raw)
        herd.append(column_encode(plugin.herd_bytes) if plugin.herd_bytes else None)
        slim_plugins.append(msgspec.structs.replace(plugin, scores=[], raw=[], herd_bytes=[]))
    extender: bytes | list[int] | None = None
    if extender_of(record.final) != record.extender:
        try:
            extender = bytes(record.extender)
        except (ValueError, TypeError):  # not 0..255 (never from the engine): as they are
            extender = list(record.extender)
    # ``answer_derived``: the event says so (``VerbEvent.answer_derived``); its answer was written from the record.
    derived_answer = answer_derived or encode_host_priorities(record.nodes, record.extender) == response
    slim = msgspec.structs.replace(
        record, nodes=[] if nodes_passed else record.nodes, plugins=slim_plugins, final=[], extender=[]
    )
    return PrioritizeBody(
        record=_json.encode(slim),
        scores=scores,
        raws=raws,
        herd=herd,
        final=final_column(record),
        filter_event=reference.event_id if reference is not None and (nodes_passed or referenced) else "",
        nodes_passed=nodes_passed,
        extender=extender,
        answer=None if derived_answer else response,
    )


class NulInRecordError(ValueError):
    """A string of the record contains NUL, which PostgreSQL refuses: ``dashboard.ingest.sanitize`` first."""


def _has_nul(body: Body) -> bool:
    # Every string of a body is in one of its JSON fields, where msgspec writes NUL as this escape.
    texts = [body.record, body.answer]
    if body.filter is not None:
        texts += [body.filter.record, body.filter.answer]
    if body.prioritize is not None:
        texts += [body.prioritize.record, body.prioritize.answer or b""]
    return any(b"\\u0000" in text for text in texts) or "\x00" in body.node_mode + body.error_path


def body_encode(event: VerbEvent, *, filter_reference: FilterReference | None = None) -> bytes:
    """The stored body of ``event``'s record and answer (a filter, prioritize or preempt call).

    ``filter_reference``: the cycle's filter call, when the ingester knows it, for a prioritize call to refer to.
    Raises :class:`NulInRecordError` when a string holds NUL.
    """
    return body_encode_with_references(event, filter_reference=filter_reference).body


class EncodedBody(NamedTuple):
    body: bytes
    filter_reference: FilterReference | None
    """A filter call's: what a prioritize of its cycle may refer to (as :func:`filter_reference` gives it)."""
    shared_part: SharedPartBytes | None
    """The shared part the body refers to: stored (once) with it."""


def body_encode_with_references(event: VerbEvent, *, filter_reference: FilterReference | None = None) -> EncodedBody:
    """:func:`body_encode`, with what refers to the body or is referred to by it: a filter call's reference (for a
    prioritize of its cycle) and the shared part its body names."""
    response = bytes(event.response)  # empty for a derived answer decoded without it: never read then
    body = Body(node_mode=event.node_mode, error_path=event.error_path)
    references: list[FilterReference | None] = []
    shared: SharedPartBytes | None = None
    if event.filter is not None:
        body.filter, shared = _filter_body(event.filter, response, references)
    elif event.prioritize is not None:
        body.prioritize = _prioritize_body(
            event.prioritize, response, filter_reference, answer_derived=event.answer_derived
        )
    else:
        other = event.bind or event.preempt
        body.record = _json.encode(other) if other is not None else b"{}"
        body.answer = response
    if _has_nul(body):
        raise NulInRecordError("a string of the record contains NUL")
    made = references[0] if references else None
    if made is not None:
        made.event_id = event.event_id
    return EncodedBody(
        bytes([BODY_FORMAT]) + compressor(_BODY_LEVEL).compress(_body_encoder.encode(body)), made, shared
    )


FilterRecordLookup = Callable[[str], "FilterRecord | None"]
"""Event id of a filter call → its record (as :func:`body_decode` gives it), or None when it is not found."""


def _filter_record_decode(
    body: FilterBody, shared_parts: SharedPartLookup
) -> tuple[FilterRecord, SharedFilterPart | None]:
    """A filter body's record, with its shared part's lists put back (and the part, for its answer)."""
    record = _filter_record_decoder.decode(body.record)
    shared: SharedFilterPart | None = None
    if body.shared_part:
        shared = shared_part_decode(body.shared_part, shared_parts)
        record.nodes = _names_json_decoder.decode(shared.nodes)
        if shared.failures:
            record.failures = _failures_json_decoder.decode(shared.failures)
        if shared.traffic is not None:
            record.traffic_bytes = column_decode(shared.traffic)
    if body.passed_derived:
        failures = record.failures
        record.passed = [n for n in record.nodes if n not in failures]
    if body.unresolvable is not None:
        record.unresolvable = list(compress(record.failures, body.unresolvable))
    if body.traffic is not None:
        record.traffic_bytes = column_decode(body.traffic)
    return record, shared


def _prioritize_record_decode(body: PrioritizeBody, filter_records: FilterRecordLookup) -> PrioritizeRecord:
    record = _prioritize_record_decoder.decode(body.record)
    filter_record = filter_records(body.filter_event) if body.filter_event else None
    if body.filter_event and filter_record is None:
        raise ValueError(f"the filter call {body.filter_event} this record refers to is not stored")
    if body.nodes_passed:
        record.nodes = list(filter_record.passed) if filter_record is not None else []
    traffic: list[Any] | None = None
    for plugin, scores, raw, herd in zip(record.plugins, body.scores, body.raws, body.herd, strict=True):
        # Raw figures and herd bytes first: a plugin's scores may be predicted from them (``INVERSE_SHARE``).
        if raw is not None and raw.kind == FILTER_TRAFFIC:
            if traffic is None:
                assert filter_record is not None
                nodes, failures = filter_record.nodes, filter_record.failures
                traffic = list(compress(filter_record.traffic_bytes, _passed_positions(nodes, failures)))
            plugin.raw = list(traffic)
        elif raw is not None and raw.kind != SAME_AS_SCORES:
            plugin.raw = column_decode(raw)
        if herd is not None:
            plugin.herd_bytes = column_decode(herd)
        if scores.kind == INVERSE_SHARE:
            plugin.scores = from_prediction(inverse_share(plugin.raw, plugin.herd_bytes), scores.data).tolist()
        else:
            plugin.scores = column_decode(scores)
        if raw is not None and raw.kind == SAME_AS_SCORES:
            plugin.raw = list(plugin.scores)
    if body.final.kind == WEIGHTED_MEAN:
        predicted = weighted_mean(record.plugins, len(record.nodes))
        record.final = from_prediction(predicted, body.final.data).tolist()
    else:
        record.final = column_decode(body.final)
    record.extender = extender_of(record.final) if body.extender is None else list(body.extender)
    return record


def body_decode(
    body: bytes, *, filter_records: FilterRecordLookup, shared_parts: SharedPartLookup
) -> tuple[CallRecord, Any]:
    """The record (as the event carried it) and the answer, from a stored body.

    ``filter_records``: where the filter call a prioritize body refers to is found; ``shared_parts``: where the
    shared part a filter body names is found."""
    if not body or body[0] not in BODY_FORMATS_READ:
        raise ValueError(f"unknown body format {body[:1]!r}")
    decoded = _body_decoder.decode(decompressor().decompress(body[1:]))
    answer: Any
    record = CallRecord(node_mode=node_mode_of(decoded.node_mode), error_path=decoded.error_path)
    if decoded.filter is not None:
        record.filter, shared = _filter_record_decode(decoded.filter, shared_parts)
        text = shared.answer if decoded.filter.answer_shared and shared is not None else decoded.filter.answer
        if decoded.filter.answer_passed:
            text = _ANSWER_PASSED + _json.encode(record.filter.passed) + text
        answer = msgspec.json.decode(text)
    elif decoded.prioritize is not None:
        scored = record.prioritize = _prioritize_record_decode(decoded.prioritize, filter_records)
        if decoded.prioritize.answer is None:
            answer = [{"Host": h, "Score": s} for h, s in zip(scored.nodes, scored.extender, strict=True)]
        else:
            answer = msgspec.json.decode(decoded.prioritize.answer)
    else:
        if decoded.record not in (b"", b"{}"):  # a body holds no other record than a preempt's
            record.preempt = _preempt_record_decoder.decode(decoded.record)
        answer = msgspec.json.decode(decoded.answer)
    return record, answer


def node_mode_of(text: str) -> NodeMode:
    if text not in ("names", "nodes", ""):
        raise ValueError(f"unknown node mode {text[:20]!r}")
    return cast(NodeMode, text)


def body_referring_to(body: bytes, event_ids: Mapping[str, str]) -> bytes:
    """``body`` with its reference to a filter call (a prioritize's) renamed by ``event_ids`` (old → new); other
    bodies as they are. For copies of whole cycles under new event ids (``benchmarks/dashboard/history.py``), never for
    recorded ones."""
    decoded = _body_decoder.decode(decompressor().decompress(body[1:]))
    if decoded.prioritize is None or decoded.prioritize.filter_event not in event_ids:
        return body
    decoded.prioritize.filter_event = event_ids[decoded.prioritize.filter_event]
    return body[:1] + compressor(_BODY_LEVEL).compress(_body_encoder.encode(decoded))


def body_read(
    body: bytes, *, filter_records: FilterRecordLookup, shared_parts: SharedPartLookup
) -> tuple[CallRecord, Any]:
    """:func:`body_decode`, or, for a damaged body, a record saying so (as ``packed_json.unpack`` does)."""
    try:
        return body_decode(body, filter_records=filter_records, shared_parts=shared_parts)
    except (ValueError, TypeError, KeyError, zstandard.ZstdError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        return CallRecord(unreadable=f"stored body cannot be read: {exc}"), None
