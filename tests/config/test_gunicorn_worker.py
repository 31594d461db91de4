"""The extender's gunicorn worker (config/gunicorn_worker.py) under real gunicorn, as production runs it.

A kept-alive connection's next request is served by the thread that answered the previous one when it arrives
within the linger; everything else behaves as stock gthread: keep-alive beyond the linger, clients that close,
pipelined requests, other connections waiting for a thread.
"""

from __future__ import annotations

import http.client
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from config.gunicorn_worker import linger_ms
from tests.config.thread_echo_wsgi import SPREAD
from tests.support.live_server import LiveServer


def start(linger: str, threads: int = 8) -> LiveServer:
    env = {"WEB_THREADS": str(threads), "WEB_KEEPALIVE_LINGER_MS": linger}
    return LiveServer(env, app="tests.config.thread_echo_wsgi:application")


def connection(server: LiveServer) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)


@pytest.fixture
def servers() -> Iterator[list[LiveServer]]:
    started: list[LiveServer] = []
    yield started
    for server in started:
        server.stop()


def post(conn: http.client.HTTPConnection, body: bytes = b"{}", path: str = "/x") -> str:
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    assert response.status == 200
    return response.read().decode()


def test_back_to_back_requests_on_one_connection_are_served_by_the_thread_that_answered(servers):
    servers.append(server := start(linger="1000"))
    # First make the pool start several threads (requests that answer only once all are in): handed back to the
    # poller, the connection's requests would go to whichever of them takes the next task.
    spread = [connection(server) for _ in range(SPREAD)]
    with ThreadPoolExecutor(SPREAD) as pool:
        started = set(pool.map(lambda conn: post(conn, path="/spread"), spread))
    assert len(started) == SPREAD
    for conn in spread:
        conn.close()
    conn = connection(server)
    threads = {post(conn, b'{"n": %d}' % i) for i in range(50)}
    conn.close()
    assert len(threads) == 1, "every request of the connection came within the linger: no handoff to the poller"


def test_without_linger_the_connection_is_kept_alive_through_the_poller(servers):
    servers.append(server := start(linger="0"))
    conn = connection(server)
    answers = [post(conn) for _ in range(50)]
    assert len(answers) == 50
    assert conn.sock is not None, "still the first connection: keep-alive held"
    conn.close()


def test_pipelined_requests_are_answered_in_order(servers):
    servers.append(server := start(linger="1000"))
    request = b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(request * 3)  # one write: the 2nd and 3rd request are read ahead with the first
        received = b""
        while received.count(b"HTTP/1.1 200 OK") < 3:
            chunk = sock.recv(65536)
            assert chunk, f"connection closed after {received.count(b'HTTP/1.1 200 OK')} answers"
            received += chunk


def test_a_client_closing_during_the_linger_frees_the_thread_for_the_next_connection(servers):
    # One thread and a linger far beyond the test's timeout: the second client is answered only because the
    # first one's close ended the linger at once.
    servers.append(server := start(linger="1000", threads=1))
    first = connection(server)
    post(first)
    first.close()
    second = http.client.HTTPConnection("127.0.0.1", server.port, timeout=0.9)
    assert post(second)
    second.close()


def test_a_connection_idle_past_the_linger_is_still_kept_alive_and_others_are_served_meanwhile(servers):
    servers.append(server := start(linger="50", threads=1))
    idle = connection(server)
    first_thread = post(idle)
    other = connection(server)  # waits for the only thread, which lingers on `idle` at most 50 ms
    assert post(other) == first_thread
    other.close()
    assert post(idle) == first_thread, "the idle connection went back to the poller, open, and is served again"
    idle.close()


def test_a_lingering_thread_gives_way_at_once_to_a_request_waiting_for_a_thread(servers):
    # One thread, lingering up to a second on a client that keeps its connection open: another client's request
    # is answered long before that second is out (stock gthread queues it behind nothing; this worker must not
    # queue it behind a linger either).
    servers.append(server := start(linger="1000", threads=1))
    busy = connection(server)
    post(busy)
    waiting = http.client.HTTPConnection("127.0.0.1", server.port, timeout=0.5)
    assert post(waiting)
    waiting.close()
    assert post(busy), "the busy client is served again, on its kept-alive connection"
    busy.close()


@pytest.mark.parametrize(
    ("value", "expected"), [("", 5.0), ("0", 0.0), ("2.5", 2.5), ("1000", 1000.0)], ids=["default", "off", "2.5", "max"]
)
def test_linger_setting(value, expected):
    assert linger_ms({"WEB_KEEPALIVE_LINGER_MS": value}) == expected


@pytest.mark.parametrize("value", ["soon", "-1", "1001"])
def test_a_bad_linger_setting_names_the_variable(value):
    with pytest.raises(RuntimeError, match="WEB_KEEPALIVE_LINGER_MS"):
        linger_ms({"WEB_KEEPALIVE_LINGER_MS": value})


def test_the_server_opens_no_control_socket_another_server_on_the_machine_would_share() -> None:
    # gunicorn 25+ opens its control socket at one path per user ($XDG_RUNTIME_DIR or ~/.gunicorn) and unlinks
    # whatever is there as it starts and stops: make run, make serve and a second replica on one host would take
    # each other's. schedlens is managed by its supervisor (Kubernetes, make serve), never by gunicornc.
    from gunicorn.app.base import Application

    class Configured(Application):  # gunicorn's own reading of the configuration file, as `--config` reads it
        def init(self, parser: object, opts: object, args: object) -> None:
            return None

        def load_config(self) -> None:
            self.load_config_from_module_name_or_filename("python:config.gunicorn_conf")

        def load(self) -> None:
            return None

    assert Configured().cfg.control_socket_disable is True
