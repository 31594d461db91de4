"""Errors schedlens shows besides the verbs' 400s, each in its own words: cluster objects, documents converted to our
types, the CLI's config file and connection. And the JSON scan refuses exactly what msgspec refuses."""

from __future__ import annotations

import errno
import json
import random
import socket
import ssl
from typing import Annotated, Any, Literal

import msgspec
import pytest

from scheduler_core.cli import kubectl_plugin
from scheduler_core.cli.failure_reasons import connection_failure, file_failure
from scheduler_core.cli.simulator import make_cluster
from scheduler_core.extender.protocol.cluster import NodeResourcesError, node_resources_spec
from scheduler_core.extender.protocol.decode_errors import Refusal, document_refusal
from scheduler_core.extender.protocol.json_syntax import scan


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"spec": {}}, "NodeResources object without metadata.name"),
        ({"metadata": None}, "NodeResources object without metadata.name"),
        (
            {"metadata": {"name": "n1"}, "spec": {"resourcesScore": {"gpu": "high"}}},
            "NodeResources 'n1': field spec.resourcesScore.gpu: expected an integer, got a string",
        ),
        (
            {"metadata": {"name": "n1"}, "spec": {"resourcesFilter": []}},
            "NodeResources 'n1': field spec.resourcesFilter: expected an object, got an array",
        ),
    ],
)
def test_a_node_resources_object_that_does_not_read_is_named_with_its_field(obj, message):
    with pytest.raises(NodeResourcesError) as caught:
        node_resources_spec(obj)
    assert str(caught.value) == message


class Limits(msgspec.Struct, forbid_unknown_fields=True):
    mode: Literal["a", "b"]
    count: Annotated[int, msgspec.Meta(ge=1)] = 1
    ratio: float = 0.5
    tags: dict[str, list[str]] | None = None


@pytest.mark.parametrize(
    ("document", "refusal"),
    [
        ({}, Refusal("missing required field `mode`")),
        ({"mode": "a", "extra": 1}, Refusal("unknown field `extra`")),
        ({"mode": "c"}, Refusal("expected one of 'a', 'b', got 'c'", "$.mode")),
        ({"mode": "a", "count": 0}, Refusal("expected an integer of at least 1, got 0", "$.count")),
        ({"mode": "a", "count": True}, Refusal("expected an integer of at least 1, got a boolean", "$.count")),
        ({"mode": "a", "ratio": "half"}, Refusal("expected a number, got a string", "$.ratio")),
        ({"mode": "a", "tags": {"x": ["1"], "y": [2]}}, Refusal("expected a string, got a number", "$.tags.y[0]")),
        ({"mode": "a", "tags": {"x": "1"}}, Refusal("expected an array, got a string", "$.tags.x")),
        ([], Refusal("expected an object, got an array")),
    ],
)
def test_a_converted_document_is_described_from_its_value_and_our_type(document: Any, refusal: Refusal):
    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.convert(document, Limits)
    assert document_refusal(document, Limits, caught.value) == refusal


def test_the_cli_config_file_s_errors_are_ours(tmp_path, monkeypatch):
    config = tmp_path / "config.yaml"
    monkeypatch.setenv(kubectl_plugin.CONFIG_FILE_ENV, str(config))
    monkeypatch.delenv("SCHEDLENS_SERVER", raising=False)
    monkeypatch.delenv("SCHEDLENS_TOKEN", raising=False)
    config.write_text("server: [http://x\n")
    with pytest.raises(kubectl_plugin.CliError) as caught:
        kubectl_plugin.connection(None, None)
    assert str(caught.value) == f"the config file {config} is not valid YAML at line 2, column 1"
    config.unlink()
    config.mkdir()
    with pytest.raises(kubectl_plugin.CliError) as caught:
        kubectl_plugin.connection(None, None)
    assert str(caught.value) == f"cannot read the config file {config}: it is a directory"


@pytest.mark.parametrize(
    ("reason", "text"),
    [
        (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), "the connection was refused"),
        (TimeoutError("timed out"), "no answer within 2.5 s"),
        (socket.gaierror(-2, "Name or service not known"), "its host name does not resolve"),
        (ssl.SSLCertVerificationError(1, "certificate verify failed"), "its TLS certificate cannot be verified"),
        (ssl.SSLError(1, "wrong version number"), "the TLS handshake failed"),
        (ConnectionResetError(errno.ECONNRESET, "reset"), "the connection was closed"),
        (OSError(errno.ENETUNREACH, "Network is unreachable"), "the connection failed (ENETUNREACH)"),
        ("unknown url type: ftp", "the connection failed"),
    ],
)
def test_a_connection_failure_is_named_by_its_class_not_its_sentence(reason, text):
    assert connection_failure(reason, 2.5) == text


def test_a_file_failure_is_named_by_its_errno():
    assert file_failure(PermissionError(errno.EACCES, "Permission denied")) == "permission denied"
    assert file_failure(OSError(errno.EIO, "Input/output error")) == "EIO"
    not_utf8 = UnicodeDecodeError("utf-8", b"ab\xff", 2, 3, "invalid start byte")
    assert file_failure(not_utf8) == "it is not UTF-8 text (byte 2)"


def test_the_scan_refuses_exactly_the_json_msgspec_refuses():
    # msgspec's verdict (an exception class, never its text) against the scan's, on bodies mutated at random.
    rng = random.Random(41)
    cluster = make_cluster(2).document()
    bases = [
        json.dumps(cluster).encode(),
        json.dumps(cluster, indent=1).encode(),
        b'{"a":[1,2.5e3,-0,"x\\u00e9\\ud83d\\ude00",true,false,null,{},[]],"b":{"c":"\xc3\xa9"}}',
    ]
    pieces = [b"{", b"}", b"[", b"]", b",", b":", b'"', b"\\", b"\\u", b"\\ud800", b"\\udc00", b"1", b"-", b".",
              b"e", b"NaN", b"tru", b"\x01", b"\xff", b"\xc3", b" ", b"\n", b"a", b"0"]  # fmt: skip
    disagreements = []
    for _ in range(3000):
        body = bytearray(rng.choice(bases))
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(body) + 1)
            if rng.random() < 0.5:
                body[at:at] = rng.choice(pieces)
            else:
                del body[at : at + rng.randint(1, 3)]
        data = bytes(body)
        try:
            msgspec.json.decode(data, type=msgspec.Raw)  # the grammar (strings skipped unread)
            msgspec.json.decode(data)  # and the strings: UTF-8, escapes
            well_formed = True
        except msgspec.ValidationError:
            continue  # a number beyond a float: msgspec stops there, before any later problem
        except msgspec.DecodeError:
            well_formed = False
        if well_formed == (scan(data).problem is not None):
            disagreements.append(data[:120])
    assert disagreements == []
