"""JSON posted through the official client's connection pool, without its generated methods.

A generated ``create_*`` method validates its arguments with pydantic, builds model objects and serializes them back
to JSON: for the two requests schedlens sends per pod (the Binding, the ``Explained`` Event) that was most of their
CPU (the A/Bs in ``benchmarks/results-cost.md``). :class:`JsonPoster` sends the JSON bytes through the same client's
pool (its TLS settings, proxy and retries) with the headers the generated methods send: ``Accept``, the client's
default headers and cookie, its authorization asked for on every request as the generated client does (so
refreshed tokens are used), plus ``Content-Type``.
"""

from __future__ import annotations

from urllib.parse import quote

import urllib3
from kubernetes import client

__all__ = ["JsonPoster"]


class JsonPoster:
    def __init__(self, api_client: client.ApiClient) -> None:
        self._api_client = api_client
        self._configuration = api_client.configuration
        self._pool: urllib3.PoolManager = api_client.rest_client.pool_manager

    def url(self, path: str, **names: str) -> str:
        """The API server's URL of ``path``, its ``{name}`` fields quoted as the generated client quotes them."""
        safe = self._configuration.safe_chars_for_path_param
        host: str = self._configuration.host
        return host + path.format(**{k: quote(v, safe=safe) for k, v in names.items()})

    def post(self, url: str, body: bytes, timeout: float) -> urllib3.BaseHTTPResponse:
        """POST ``body`` as ``RESTClientObject.request`` sends a JSON body; the raw answer (read it with
        ``kube_api.read_raw``)."""
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        headers.update(self._api_client.default_headers)
        if self._api_client.cookie:
            headers["Cookie"] = self._api_client.cookie
        for auth in self._configuration.auth_settings().values():  # BearerToken, refreshed by its hook if any
            if auth.get("in") == "header" and auth.get("value"):
                headers[auth["key"]] = auth["value"]
        return self._pool.request(
            "POST", url, body=body, headers=headers, timeout=urllib3.Timeout(total=timeout), preload_content=False
        )
