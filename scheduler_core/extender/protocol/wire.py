"""kube-scheduler extender v1 wire types, decoded strictly and encoded exactly.

Keys are the Go field names (no JSON tags upstream, so nothing is ever omitted: absent values are ``null``).
Embedded Kubernetes objects are decoded only as far as the plugins need; everything else is skipped. In
full-Nodes mode each node is kept as its raw bytes so the filter answer echoes it back unchanged.

Structs are ``gc=False``: decoded wire data never forms reference cycles, and a 1000-node body decodes into
~100,000 objects that would otherwise drive the cyclic garbage collector (most of a full-Nodes call's time).

The protocol reference is ``shared/docs/extender-protocol.md``; upstream is
``staging/src/k8s.io/kube-scheduler/extender/v1/types.go``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, TypeVar

import msgspec

from scheduler_core.extender.protocol.decode_errors import EMPTY_BODY, json_refusal

_T = TypeVar("_T")

MAX_EXTENDER_PRIORITY = 10
MIN_EXTENDER_PRIORITY = 0

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
# Go's ``int64``: msgspec decodes any JSON integer into a Python int, however large, and Go could not decode an
# echo of an out-of-range one.
Int64 = Annotated[int, msgspec.Meta(ge=INT64_MIN, le=INT64_MAX)]


class WireError(ValueError):
    """A request body that does not decode; ``path`` names the JSON path of the first problem."""

    def __init__(self, message: str, path: str = "$") -> None:
        super().__init__(message)
        self.message = message
        self.path = path

    def __str__(self) -> str:
        return f"{self.message} (at {self.path})"


# --- The parts of Kubernetes objects the plugins read -------------------------------------------------


class OwnerReference(msgspec.Struct, gc=False):
    kind: str = ""
    name: str = ""
    controller: bool = False


class ObjectMeta(msgspec.Struct, rename="camel", gc=False):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    labels: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    annotations: dict[str, str] | None = None


class ResourceRequirements(msgspec.Struct, gc=False):
    limits: dict[str, str] | None = None
    requests: dict[str, str] | None = None


class Container(msgspec.Struct, gc=False):
    name: str = ""
    image: str = ""
    resources: ResourceRequirements | None = None


class PodSpec(msgspec.Struct, rename="camel", gc=False):
    containers: list[Container] | None = None
    init_containers: list[Container] | None = None
    scheduler_name: str = ""
    node_name: str = ""


class Pod(msgspec.Struct, gc=False):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)


class ContainerImage(msgspec.Struct, rename="camel", gc=False):
    names: list[str] | None = None
    size_bytes: Int64 = 0


class NodeStatus(msgspec.Struct, gc=False):
    images: list[ContainerImage] | None = None


class Node(msgspec.Struct, gc=False):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)


class NodeMeta(msgspec.Struct, gc=False):
    """Only a node's metadata: what every plugin but image-reading ones needs (the rest is skipped unread)."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)


# --- Extender types ----------------------------------------------------------------------------------


class RawNodeList(msgspec.Struct, gc=False):
    """``v1.NodeList`` with every item kept as the exact bytes kube-scheduler sent."""

    items: list[msgspec.Raw] | None = None


class ExtenderArgs(msgspec.Struct, gc=False):
    pod: Pod = msgspec.field(name="Pod")
    nodes: RawNodeList | None = msgspec.field(name="Nodes", default=None)
    node_names: list[str] | None = msgspec.field(name="NodeNames", default=None)


class NodeListOut(msgspec.Struct, gc=False):
    metadata: dict[str, str] = msgspec.field(default_factory=dict)
    items: list[msgspec.Raw] = msgspec.field(default_factory=list)


class ExtenderFilterResult(msgspec.Struct, gc=False):
    nodes: NodeListOut | None = msgspec.field(name="Nodes")
    node_names: list[str] | None = msgspec.field(name="NodeNames")
    failed_nodes: dict[str, str] | None = msgspec.field(name="FailedNodes")
    failed_and_unresolvable_nodes: dict[str, str] | None = msgspec.field(name="FailedAndUnresolvableNodes")
    error: str = msgspec.field(name="Error", default="")


class HostPriority(msgspec.Struct, gc=False):
    host: str = msgspec.field(name="Host")
    score: Int64 = msgspec.field(name="Score")


class ExtenderBindingArgs(msgspec.Struct):
    pod_name: str = msgspec.field(name="PodName")
    pod_namespace: str = msgspec.field(name="PodNamespace")
    pod_uid: str = msgspec.field(name="PodUID")
    node: str = msgspec.field(name="Node")


class ExtenderBindingResult(msgspec.Struct):
    error: str = msgspec.field(name="Error", default="")


class MetaPod(msgspec.Struct):
    uid: str = msgspec.field(name="UID")


class MetaVictims(msgspec.Struct):
    pods: list[MetaPod] = msgspec.field(name="Pods")
    num_pdb_violations: int = msgspec.field(name="NumPDBViolations", default=0)


class Victims(msgspec.Struct):
    pods: list[Pod] = msgspec.field(name="Pods")
    num_pdb_violations: int = msgspec.field(name="NumPDBViolations", default=0)


class ExtenderPreemptionArgs(msgspec.Struct):
    pod: Pod = msgspec.field(name="Pod")
    node_name_to_victims: dict[str, Victims | None] | None = msgspec.field(name="NodeNameToVictims", default=None)
    node_name_to_meta_victims: dict[str, MetaVictims | None] | None = msgspec.field(
        name="NodeNameToMetaVictims", default=None
    )


class ExtenderPreemptionResult(msgspec.Struct):
    node_name_to_meta_victims: dict[str, MetaVictims] = msgspec.field(name="NodeNameToMetaVictims")


# --- Decoding ----------------------------------------------------------------------------------------

_args_decoder = msgspec.json.Decoder(ExtenderArgs)
_node_decoder = msgspec.json.Decoder(Node)
_node_meta_decoder = msgspec.json.Decoder(NodeMeta)
_binding_decoder = msgspec.json.Decoder(ExtenderBindingArgs)
_preemption_decoder = msgspec.json.Decoder(ExtenderPreemptionArgs)
_encoder = msgspec.json.Encoder()


def _decode(decoder: msgspec.json.Decoder[_T], body: bytes) -> _T:
    if not body.strip():
        raise WireError(EMPTY_BODY)
    try:
        return decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError) as exc:
        # Only now is the body read again, to say in our words what is wrong and where (decode_errors).
        refusal = json_refusal(body, decoder.type, exc)
        raise WireError(refusal.message, refusal.path) from None


def decode_extender_args(body: bytes) -> ExtenderArgs:
    """Decode a filter/prioritize body. Exactly one of ``Nodes`` and ``NodeNames`` must be non-null."""
    args = _decode(_args_decoder, body)
    if args.nodes is None and args.node_names is None:
        raise WireError("both Nodes and NodeNames are null; exactly one must be set", "$.NodeNames")
    if args.nodes is not None and args.node_names is not None:
        raise WireError("both Nodes and NodeNames are set; exactly one must be non-null", "$.NodeNames")
    if args.nodes is not None:
        if args.nodes.items is None:
            raise WireError("Nodes.items is null", "$.Nodes.items")
        # Full-Nodes items stay raw until the verb decodes them (as far as its plugins read), so their names
        # are checked there (``NODE_ITEM_NAME_PATH``): a second pass here doubled a 1000-node decode.
    else:
        check_node_names(args.node_names or [], NODE_NAMES_PATH)
    return args


class _ArgsWithRawNames(msgspec.Struct, gc=False):
    pod: Pod = msgspec.field(name="Pod")
    nodes: RawNodeList | None = msgspec.field(name="Nodes", default=None)
    node_names: msgspec.Raw = msgspec.field(name="NodeNames", default=msgspec.Raw(b"null"))


_raw_names_decoder = msgspec.json.Decoder(_ArgsWithRawNames)


def decode_extender_args_known_names(
    body: bytes, known: Callable[[bytes], list[str] | None]
) -> tuple[ExtenderArgs, bytes | None]:
    """:func:`decode_extender_args`, taking a NodeNames list ``known(its JSON bytes)`` has seen decoded and checked.

    Also returns the list's JSON bytes (None in full-Nodes mode or on the plain path), for the caller to
    remember the decoded names by. Anything unusual (a decoding error, both or neither of Nodes and
    NodeNames) takes the plain path, so errors read exactly as :func:`decode_extender_args` words them.
    """
    try:
        partial = _raw_names_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError):
        return decode_extender_args(body), None
    raw = bytes(partial.node_names)
    if raw == b"null":
        if partial.nodes is None or partial.nodes.items is None:
            return decode_extender_args(body), None  # refused, in its words
        return ExtenderArgs(pod=partial.pod, nodes=partial.nodes, node_names=None), None
    if partial.nodes is not None:
        return decode_extender_args(body), None  # both set: refused, in its words
    names = known(raw)
    if names is None:  # the names alone, not the whole body again; anything odd is refused in its words
        try:
            names = _names_decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError):
            return decode_extender_args(body), None
        check_node_names(names, NODE_NAMES_PATH)
    return ExtenderArgs(pod=partial.pod, nodes=None, node_names=names), raw


NODE_NAMES_PATH = "$.NodeNames[{}]".format
_names_decoder = msgspec.json.Decoder(list[str])
NODE_ITEM_NAME_PATH = "$.Nodes.items[{}].metadata.name".format


def check_node_names(names: Sequence[str], path: Callable[[int], str]) -> None:
    """Refuse an empty or repeated node name; ``path(index)`` is the JSON path of the index-th name."""
    if "" in names or len(set(names)) != len(names):
        seen: set[str] = set()  # only to name the first bad entry: the check above runs in C
        for index, name in enumerate(names):
            if not name:
                raise WireError("empty node name", path(index))
            if name in seen:
                raise WireError(f"duplicate node name {name!r}", path(index))
            seen.add(name)


def _item_error(exc: Exception, raw: msgspec.Raw, item_type: type, index: int) -> WireError:
    refusal = json_refusal(bytes(raw), item_type, exc, part="node")
    return WireError(refusal.message, f"$.Nodes.items[{index}]{refusal.path[1:]}")


def decode_node(raw: msgspec.Raw, index: int) -> Node:
    """Decode the fields plugins need from one raw ``Nodes.items`` element."""
    try:
        return _node_decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError) as exc:
        raise _item_error(exc, raw, Node, index) from None


def decode_node_meta(raw: msgspec.Raw, index: int) -> NodeMeta:
    """Decode only ``metadata`` of one raw ``Nodes.items`` element (``status`` is skipped, not validated)."""
    try:
        return _node_meta_decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError) as exc:
        raise _item_error(exc, raw, NodeMeta, index) from None


def decode_binding_args(body: bytes) -> ExtenderBindingArgs:
    return _decode(_binding_decoder, body)


def decode_preemption_args(body: bytes) -> ExtenderPreemptionArgs:
    args = _decode(_preemption_decoder, body)
    if args.node_name_to_victims is None and args.node_name_to_meta_victims is None:
        return args  # No candidates: a valid, if empty, request.
    for field_name, mapping in (
        ("NodeNameToVictims", args.node_name_to_victims),
        ("NodeNameToMetaVictims", args.node_name_to_meta_victims),
    ):
        for node, victims in (mapping or {}).items():
            if victims is None:
                raise WireError("victims are null", f"$.{field_name}.{node}")
            # Checked here, not by an Int64 annotation, so the refusal names the range as Go's int64.
            if not INT64_MIN <= victims.num_pdb_violations <= INT64_MAX:
                raise WireError("NumPDBViolations out of int64 range", f"$.{field_name}.{node}.NumPDBViolations")
    return args


# --- Encoding ----------------------------------------------------------------------------------------


def encode(value: object) -> bytes:
    """Compact JSON; integers stay integers and raw node bytes are written verbatim."""
    return _encoder.encode(value)


_HOST_PREFIXES: dict[str, bytes] = {}
"""Host name → ``{"Host":"<name>","Score":`` as ``encode`` writes it; nodes are few and long-lived."""
_SCORE_ENDS = {score: b"%d}," % score for score in range(MAX_EXTENDER_PRIORITY + 1)}
"""A host's score and its object's end, then the separator: the last one's comma becomes the list's end."""


def host_prefixes(hosts: Sequence[str]) -> list[bytes]:
    """Each host's ``{"Host":…,"Score":`` as JSON, encoded once per process (keep them for a repeated list)."""
    prefixes: list[bytes | None] = list(map(_HOST_PREFIXES.get, hosts))
    if not all(prefixes):  # a None, for new names: the first answer naming them pays (another thread may clear)
        prefixes = [_host_prefix(h) if p is None else p for h, p in zip(hosts, prefixes, strict=True)]
    return prefixes  # type: ignore[return-value]  # no None left


def encode_host_priorities(hosts: Sequence[str], scores: Sequence[int], prefixes: Sequence[bytes] = ()) -> bytes:
    """``encode([HostPriority(h, s), ...])`` byte for byte (int scores), without one object per node.

    The verbs answer with it, and the stored-body format (``dashboard.storage.call_body``) derives answers with it.
    ``prefixes``: :func:`host_prefixes` of ``hosts``, if the caller kept them. The 0..10 scores are looked up, so
    the answer of a 5000-node prioritize is one join of interleaved parts instead of 5000 objects encoded.
    """
    if not hosts:
        return encode([HostPriority(host=h, score=s) for h, s in zip(hosts, scores, strict=True)])
    try:
        ends = list(map(_SCORE_ENDS.__getitem__, scores))
    except (KeyError, TypeError):  # not an extender score: let the encoder write (or refuse) it
        return encode([HostPriority(host=h, score=s) for h, s in zip(hosts, scores, strict=True)])
    prefixes = prefixes or host_prefixes(hosts)
    if not len(ends) == len(prefixes) == len(hosts):
        raise ValueError(f"{len(hosts)} hosts, {len(prefixes)} prefixes but {len(ends)} scores")
    parts: list[bytes] = [b"["] * (2 * len(prefixes) + 1)
    parts[1::2] = prefixes
    parts[2::2] = ends
    parts[-1] = ends[-1][:-1] + b"]"
    return b"".join(parts)


def _host_prefix(host: str) -> bytes:
    if len(_HOST_PREFIXES) > 100_000:  # names churned (autoscaling): start over rather than grow forever
        _HOST_PREFIXES.clear()
    prefix = _HOST_PREFIXES[host] = _encoder.encode(HostPriority(host=host, score=0))[:-2]
    return prefix
