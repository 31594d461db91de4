"""Bad input over real HTTP to gunicorn: each answered 4xx naming the problem (never a 5xx), each attempt recorded,
and each record accepted by the database.

The same inputs decoded in process are ``tests/scheduler_core/extender/protocol/test_wire.py`` and
``tests/dashboard/extender/test_extender_views.py``; what only real HTTP shows is here: bodies without a length
(chunked), what gunicorn itself refuses before schedlens sees it, and that the record of every attempt survives ingest
(a NUL byte or a 300-character profile name once blocked the ingest of every record behind it).
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator

import msgspec
import pytest

from dashboard.ingest.spool_ingest import spool_ingest
from dashboard.models import VerbCall
from dashboard.spool import Spool
from scheduler_core.cli.simulator import make_cluster
from scheduler_core.extender.record.spool_codec import decode_event
from scheduler_core.extender.record.structs import VerbEvent
from tests.support.processes import Gunicorn, production_environment, wait_for
from tests.support.stored_calls import stored_record

pytestmark = pytest.mark.django_db

LIMIT = 1_000_000
JSON = "application/json"
POD = {"metadata": {"name": "web-1", "namespace": "shop", "uid": "uid-1", "labels": {"app": "web"}}}
NAUGHTY = [
    "'; DROP TABLE dashboard_schedulingcycle; --",
    '<script>alert("x")</script>',
    "<img src=x onerror=alert(1)>",
    "${jndi:ldap://example.invalid/a}",
    "{{7*7}}",
    "../../../../etc/passwd",
    "%s%s%n%x 100% full",
    "\u202egnp.exe",
    "zero\u200bwidth\ufeff",
    "Ω≈ç√∫˜µ≤≥÷ 田中さん 👩🏽‍🚀",
    "line\r\nInjected-Header: yes",
    'back\\slash "quote"',
    "null",
    "",
    "x" * 10_000,
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gunicorn, Spool]]:
    directory = tmp_path_factory.mktemp("bad-input")
    cluster_file = directory / "cluster.json"
    cluster_file.write_text(json.dumps(make_cluster(3).document()))
    env = {**production_environment(directory, cluster_file), "SCHEDLENS_MAX_BODY_BYTES": str(LIMIT)}
    gunicorn = Gunicorn(env, directory / "gunicorn.log")
    yield gunicorn, Spool(env["SCHEDLENS_SPOOL_DIR"])
    gunicorn.stop()


def send(
    server: tuple[Gunicorn, Spool],
    body: bytes | list[bytes],
    *,
    verb: str = "filter",
    profile: str = "default",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict, list[VerbEvent]]:
    """POST ``body`` (a list: chunked, without Content-Length); the answer and the records it left."""
    gunicorn, spool = server
    spool_ingest(spool=spool, confirm_grace_seconds=0)  # whatever an earlier test left: each test reads its own
    assert spool.depth() == 0
    conn = http.client.HTTPConnection("127.0.0.1", gunicorn.port, timeout=30)
    chunked = isinstance(body, list)
    all_headers = {"Content-Type": JSON} if headers is None else headers
    if chunked:
        all_headers = {**all_headers, "Transfer-Encoding": "chunked"}
    if chunked:
        conn.request("POST", f"/extender/{profile}/{verb}", body=iter(body), headers=all_headers, encode_chunked=True)
    else:
        conn.request("POST", f"/extender/{profile}/{verb}", body=body, headers=all_headers)
    response = conn.getresponse()
    status, data = response.status, response.read()
    conn.close()
    assert status < 500, f"{status}: {data[:300]!r}"
    # The answer is confirmed in the spool just after its last byte left; the client can be faster than that.
    wait_for(lambda: all(row.answered for row in spool.read_rows(100)), what="the answer to be confirmed")
    events = [decode_event(row) for _, row in spool.read_batch(100)]
    # Every record of an attempt goes into the database, whatever it holds, and nothing is set aside.
    assert spool_ingest(spool=spool) == len(events)
    assert spool.rejected() == []
    assert VerbCall.objects.filter(event_id__in=[e.event_id for e in events]).count() == len(events)
    return status, json.loads(data) if data.startswith(b"{") or data.startswith(b"[") else {}, events


OVER_THE_LIMIT = b'{"Pod":{},"NodeNames":["a"],"x":"' + b"y" * LIMIT + b'"}'
NOT_JSON = "malformed JSON at byte 0 (line 1, column 1): unexpected character 'n' where a value was expected"


def malformed(offset: int, what: str) -> str:
    return f"malformed JSON at byte {offset} (line 1, column {offset + 1}): {what}"


def too_deep(levels: int, offset: int) -> str:
    where = f"byte {offset} (line 1, column {offset + 1})"
    return f"JSON nested too deeply: {levels} levels of arrays and objects, the deepest opening at {where}"


def filter_body(**fields: object) -> bytes:
    return json.dumps({"Pod": POD, "Nodes": None, "NodeNames": ["node-001", "node-002"], **fields}).encode()


@pytest.mark.parametrize(
    ("body", "headers", "status", "message"),
    [
        (b'{"Pod":', None, 400, "truncated JSON: it ends at byte 7, inside an unfinished object"),
        (b"not json", None, 400, NOT_JSON),
        (filter_body(), {"Content-Type": "text/plain"}, 415, "Content-Type must be application/json, got text/plain"),
        (filter_body(), {}, 415, "Content-Type must be application/json, got none"),
        (b"", None, 400, "empty request body"),
        (OVER_THE_LIMIT, None, 413, f"request body of {len(OVER_THE_LIMIT)} bytes exceeds the limit of 1000000 bytes"),
        (b"[" * 100_000 + b"]" * 100_000, None, 400, too_deep(100_000, 99_999)),
        (
            b'{"Pod":{"x":' + b"[" * 100_000 + b"]" * 100_000 + b'},"NodeNames":["a"]}',
            None,
            400,
            too_deep(100_002, 100_011),
        ),
        (
            b'{"Pod":{"x":' + b'{"a":' * 100_000 + b"1" + b"}" * 100_000 + b'},"NodeNames":["a"]}',
            None,
            400,
            too_deep(100_002, 500_007),
        ),
        (
            b'{"Pod":{"metadata":{"name":"\xff\xfe"}},"NodeNames":["a"]}',
            None,
            400,
            "invalid UTF-8 at byte 28 (line 1, column 29)",
        ),
        (
            b'{"Pod":{"metadata":{"name":"\\ud800"}},"NodeNames":["a"]}',
            None,
            400,
            malformed(28, "unpaired UTF-16 surrogate escape \\ud800 in a string"),
        ),
        (b'{"Pod":{"metadata":{"name":NaN}},"NodeNames":["a"]}', None, 400, malformed(27, "NaN is not a JSON number")),
        (
            b'{"Pod":{"metadata":{"name":Infinity}},"NodeNames":["a"]}',
            None,
            400,
            malformed(27, "Infinity is not a JSON number"),
        ),
        (filter_body(NodeNames=["a", "a"]), None, 400, "duplicate node name 'a'"),
        (filter_body(NodeNames=["a", ""]), None, 400, "empty node name"),
        (filter_body(NodeNames=None), None, 400, "both Nodes and NodeNames are null; exactly one must be set"),
        (filter_body(Nodes={"items": []}), None, 400, "both Nodes and NodeNames are set; exactly one must be non-null"),
        (filter_body(NodeNames="node-001"), None, 400, "expected an array or null, got a string"),
    ],
    ids=[
        "truncated-json",
        "not-json",
        "wrong-content-type",
        "missing-content-type",
        "empty-body",
        "over-the-limit",
        "deep-array",
        "deep-array-in-pod",
        "deep-object-in-pod",
        "invalid-utf8",
        "lone-surrogate",
        "nan",
        "infinity",
        "duplicate-node-names",
        "empty-node-name",
        "both-lists-null",
        "both-lists-set",
        "node-names-not-a-list",
    ],
)
def test_a_bad_filter_is_refused_naming_the_problem_and_recorded(server, body, headers, status, message) -> None:
    answered, error, (event,) = send(server, body, headers=headers)
    assert answered == status
    assert error["error"] == message
    assert event.http_status == status
    assert event.error == error["error"]


def test_a_chunked_body_without_a_length_is_read_and_answered(server) -> None:
    body = filter_body()
    status, answer, (event,) = send(server, [body[:7], body[7:100], body[100:]])
    assert status == 200
    assert answer["NodeNames"] == ["node-001", "node-002"]
    assert event.pod_uid == "uid-1"


def test_a_chunked_body_over_the_limit_is_refused_without_reading_it_all(server) -> None:
    gunicorn, spool = server
    spool_ingest(spool=spool, confirm_grace_seconds=0)
    conn = http.client.HTTPConnection("127.0.0.1", gunicorn.port, timeout=10)
    conn.connect()
    assert conn.sock is not None
    # Chunks just past the limit and no terminating chunk: the server must answer without waiting for the rest
    # (a client that kept sending would race the server's close with a broken pipe, which proves nothing).
    chunk = b"y" * 65536
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(LIMIT // len(chunk) + 2))
    conn.sock.sendall(
        b"POST /extender/default/filter HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n" + chunks
    )
    response = http.client.HTTPResponse(conn.sock)
    response.begin()
    status, error = response.status, json.loads(response.read())
    conn.close()
    assert status == 413
    assert error["error"] == f"request body exceeds the limit of {LIMIT} bytes"
    wait_for(lambda: spool.depth() == 1 and spool.read_rows(1)[0].answered, what="the refusal to be recorded")
    (event,) = [decode_event(row) for _, row in spool.read_batch(10)]
    assert event.http_status == 413
    assert spool_ingest(spool=spool) == 1


def test_a_malformed_chunked_body_is_a_400_naming_it_not_a_500(server) -> None:
    gunicorn, spool = server
    spool_ingest(spool=spool, confirm_grace_seconds=0)
    conn = http.client.HTTPConnection("127.0.0.1", gunicorn.port, timeout=10)
    conn.connect()
    assert conn.sock is not None
    conn.sock.sendall(
        b"POST /extender/default/filter HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\nnot-a-chunk-size\r\n{}\r\n0\r\n\r\n"
    )
    response = http.client.HTTPResponse(conn.sock)
    response.begin()
    status, error = response.status, json.loads(response.read())
    conn.close()
    assert status == 400
    assert error["error"] == "the request body could not be read: its chunked transfer encoding is malformed"
    wait_for(lambda: spool.depth() == 1 and spool.read_rows(1)[0].answered, what="the refusal to be recorded")
    (event,) = [decode_event(row) for _, row in spool.read_batch(10)]
    assert event.http_status == 400
    assert spool_ingest(spool=spool) == 1


def test_a_number_beyond_any_float_where_a_number_is_read_is_not_a_500_and_is_stored(server) -> None:
    body = b'{"Pod":{},"NodeNameToMetaVictims":{"node-001":{"Pods":[],"NumPDBViolations":1' + b"0" * 400 + b"}}}"
    status, error, (event,) = send(server, body, verb="preempt")
    # NumPDBViolations is an int64 in kube-scheduler: a count it could never decode back is refused at its path.
    assert status == 400
    assert error["path"] == "$.NodeNameToMetaVictims.node-001.NumPDBViolations"
    assert event.http_status == 400


def test_a_number_beyond_any_float_in_a_field_nobody_reads_is_ignored(server) -> None:
    status, _, _ = send(server, b'{"Pod":{"spec":{"priority":1e400}},"Nodes":null,"NodeNames":["node-001"]}')
    assert status == 200


@pytest.mark.parametrize("name", NAUGHTY, ids=lambda n: repr(n[:20]))
def test_naughty_strings_in_names_and_labels_are_answered_byte_exactly_and_stored(server, name: str) -> None:
    pod = {"metadata": {"name": name, "namespace": name, "uid": f"uid-{len(name)}", "labels": {name: name}}}
    names = [f"node-{name}", "node-001"] if name else ["node-001"]
    status, answer, (event,) = send(server, json.dumps({"Pod": pod, "Nodes": None, "NodeNames": names}).encode())
    assert status == 200
    assert answer["NodeNames"] == names
    stored = VerbCall.objects.get(event_id=event.event_id)
    assert stored.cycle.pod_name == (name if len(name) <= 253 else stored.cycle.pod_name)
    assert len(stored.cycle.pod_name) <= 253


def test_nul_bytes_in_names_are_answered_and_stored_visibly(server) -> None:
    pod = {"metadata": {"name": "web\u0000evil", "namespace": "shop", "uid": "uid-nul"}}
    body = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": ["node\u0000x", "node-001"]}).encode()
    status, answer, (event,) = send(server, body)
    assert status == 200
    assert answer["NodeNames"] == ["node\u0000x", "node-001"], "kube-scheduler gets exactly what it sent"
    stored = VerbCall.objects.get(event_id=event.event_id)
    assert stored.cycle.pod_name == "web\u2400evil"
    assert stored_record(stored)["nodes"] == ["node\u2400x", "node-001"]


def test_a_profile_name_longer_than_the_column_is_a_404_and_is_stored(server) -> None:
    status, error, (event,) = send(server, filter_body(), profile="p" * 300)
    assert status == 404
    assert error["error"].startswith("unknown profile 'ppp")
    assert len(VerbCall.objects.get(event_id=event.event_id).cycle.profile) == 63


def test_preempt_answers_only_victims_that_were_in_the_input(server) -> None:
    victims = {
        "node-001": {"Pods": [{"UID": "victim-1"}, {"UID": "victim-2"}], "NumPDBViolations": 0},
        "node-002": {"Pods": [{"UID": "victim-3"}], "NumPDBViolations": 1},
        "not-a-node": {"Pods": [], "NumPDBViolations": 0},
    }
    body = json.dumps({"Pod": POD, "NodeNameToVictims": None, "NodeNameToMetaVictims": victims}).encode()
    status, answer, _ = send(server, body, verb="preempt")
    assert status == 200
    for node, kept in answer["NodeNameToMetaVictims"].items():
        assert node in victims
        assert kept == victims[node], "victims are passed through, never added or changed"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{}", "missing required field `PodName`"),
        (b'{"PodName":"","PodNamespace":"shop","PodUID":"u","Node":"node-001"}', "must not be empty"),
        (b'{"PodName":"p","PodNamespace":"shop","PodUID":"u","Node":""}', "must not be empty"),
        (b'{"PodName":1,"PodNamespace":"shop","PodUID":"u","Node":"n"}', "expected a string, got a number"),
    ],
    ids=["no-fields", "empty-pod-name", "empty-node", "pod-name-int"],
)
def test_a_bad_bind_is_refused_naming_the_field(server, body: bytes, message: str) -> None:
    status, error, (event,) = send(server, body, verb="bind")
    assert status == 400
    assert error["error"] == message
    assert event.http_status == 400


def test_what_gunicorn_refuses_never_reaches_schedlens_and_is_not_a_5xx(server) -> None:
    gunicorn, spool = server
    for head in (
        b"POST /extender/default/filter HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: abc\r\n\r\n",
        b"POST /extender/default/filter HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ):
        conn = http.client.HTTPConnection("127.0.0.1", gunicorn.port, timeout=10)
        conn.connect()
        assert conn.sock is not None
        conn.sock.sendall(head)
        status_line = conn.sock.makefile("rb").readline()
        conn.close()
        assert status_line.startswith(b"HTTP/1.1 400"), status_line
    assert spool.depth() == 0


def test_the_server_answers_normally_after_all_of_that(server) -> None:
    status, answer, _ = send(server, filter_body())
    assert status == 200
    assert msgspec.json.decode(msgspec.json.encode(answer))["NodeNames"] == ["node-001", "node-002"]
