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

Reading a body is ``call_body_read``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import compress, filterfalse
from operator import not_
from typing import Any, NamedTuple

import msgspec

from dashboard.storage.columns import (
    FILTER_TRAFFIC,
    SAME_AS_SCORES,
    Column,
    cached_column,
    column_encode,
    extender_of,
    final_column,
    scores_column,
)
from dashboard.storage.identity_cache import IdentityCache
from dashboard.storage.shared_parts import (
    SharedFilterPart,
    SharedPartBytes,
    shared_part_encode,
)
from scheduler_core.extender.protocol.wire import encode_host_priorities
from scheduler_core.extender.record.compression import compressor
from scheduler_core.extender.record.spool_codec import SPOOL_DERIVING
from scheduler_core.extender.record.structs import (
    FilterRecord,
    PluginScores,
    PrioritizeRecord,
    VerbEvent,
)

BODY_FORMAT = 2
"""The first byte of every body written now; a later format gets another number and this module keeps reading the
earlier ones. 2 added the predicted column kinds (``WEIGHTED_MEAN``, ``INVERSE_SHARE``) and the shared parts: a
version that reads only 1 sets such a body aside as unreadable instead of misreading it."""
BODY_AS_SPOOLED = 3
"""The first byte of a body that is the record as the verb spooled it in ``SLR\\x04`` form (``spool_codec``), stored
without transcoding (:func:`body_as_spooled`): the ingester does not rebuild its lists, and reading decodes it as
the ingester did (``decode_event``), with every column the spool left out written again."""
BODY_FORMATS_READ = frozenset({1, 2, BODY_AS_SPOOLED})
TRANSCODED_FORMATS = frozenset({1, 2})
"""The formats that hold a :class:`Body` (zstd MessagePack after the format byte)."""
BODY_LEVEL = 1


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
ANSWER_PASSED = b'{"Nodes":null,"NodeNames":'


def passed_positions(nodes: Sequence[str], failures: Mapping[str, Any]) -> list[bool]:
    """Per node of a filter's candidates: it has no failure (it passed)."""
    return list(map(not_, map(failures.__contains__, nodes)))


_positions: IdentityCache[list[bool]] = IdentityCache(64)


def _passing(nodes: Sequence[str], failures: Mapping[str, Any]) -> list[bool]:
    """:func:`passed_positions`, once per pair of objects (``identity_cache``); read only."""
    return _positions.get((nodes, failures), partial(passed_positions, nodes, failures))


def filter_reference(event_id: str, record: FilterRecord) -> FilterReference | None:
    """What a later prioritize of the same cycle may refer to (see :class:`FilterReference`); None: nothing."""
    if record.passed != list(filterfalse(record.failures.__contains__, record.nodes)):
        return None
    traffic = _reference_traffic(record, passed_positions(record.nodes, record.failures))
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
    prefix = ANSWER_PASSED + _json.encode(record.passed)
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
    return EncodedBody(bytes([BODY_FORMAT]) + compressor(BODY_LEVEL).compress(_body_encoder.encode(body)), made, shared)


def body_as_spooled(spooled: bytes) -> bytes | None:
    """The body of a record stored as the verb spooled it; None for a spool form stored transcoded (``SLR\\x03``
    and earlier hold the columns ``SLR\\x04`` leaves out: stored as they are, a 1000-node cycle would outgrow its
    bound)."""
    return bytes([BODY_AS_SPOOLED]) + spooled if spooled.startswith(SPOOL_DERIVING) else None
