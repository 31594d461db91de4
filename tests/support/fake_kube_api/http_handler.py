"""HTTP plumbing: each request read, recorded, handed to the server and its answer written (chunked for watches)."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from tests.support.fake_kube_api.faults import DROP
from tests.support.fake_kube_api.protocol import RecordedRequest, Response

if TYPE_CHECKING:
    from tests.support.fake_kube_api.server import FakeKubeAPI


class RequestHandler(BaseHTTPRequestHandler):
    fake: FakeKubeAPI
    protocol_version = "HTTP/1.1"  # keep-alive, as the client's connection pool expects

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _serve(self) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        request = RecordedRequest(
            method=self.command,
            path=parts.path,
            query=parse_qs(parts.query),
            headers={k: v for k, v in self.headers.items()},
            body=body,
            peer=(str(self.client_address[0]), int(self.client_address[1])),
        )
        self.fake._record(request)
        response = self.fake.handle(request)
        if response.status == DROP:
            self.close_connection = True
            return
        try:
            self._write(response)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout); nothing to do
            self.close_connection = True

    def _write(self, response: Response) -> None:
        self.send_response(response.status)
        headers = {"Content-Type": "application/json", **response.headers}
        if response.chunks is not None:
            headers["Transfer-Encoding"] = "chunked"
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            for chunk in response.chunks:
                if chunk:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        if response.body is None:
            data = b""
        elif isinstance(response.body, bytes):
            data = response.body
        elif isinstance(response.body, str):
            data = response.body.encode()
        else:
            data = json.dumps(response.body).encode()
        headers["Content-Length"] = str(len(data))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve
