"""HTTP to the Kubernetes API server through the official client's own connection pool: what the Binding
(``kube.api``) and the pods' Events (``kube.events``) share.

The generated methods' pydantic validation, model objects and serialization cost more than the HTTP exchange itself
for what schedlens writes on every placement, so both post JSON bytes through :class:`JsonPoster`
(``benchmarks/cost/bind_parts.py`` measures both ways), on a private client whose hidden retries are bounded
(:func:`with_bounded_retries`), and read the raw answer (:func:`read_raw`).
"""

from __future__ import annotations

import copy
import logging

import urllib3
from kubernetes import client

__all__ = ["JsonPoster", "is_timeout", "read_raw", "with_bounded_retries"]

logger = logging.getLogger(__name__)


class JsonPoster:
    """POSTs JSON bytes to the API server through an ``ApiClient``'s own connection pool (its TLS settings, proxy
    and retries), with the headers its generated methods send: ``Accept``, the client's default headers and cookie,
    and its authorization, asked for on every request as the generated client does (so refreshed tokens are used),
    plus ``Content-Type``. The raw answer is the caller's to read (:func:`read_raw`).

    For what schedlens writes on every placement (the Binding, the ``Explained`` Event): the generated methods'
    pydantic validation, model objects and serialization cost more than the HTTP exchange itself
    (``benchmarks/cost/bind_parts.py`` measures both ways).
    """

    def __init__(self, api_client: client.ApiClient) -> None:
        self._api_client = api_client
        self._configuration = api_client.configuration
        pool: urllib3.PoolManager = api_client.rest_client.pool_manager
        # The API server's own connection pool, looked up once: PoolManager.request parses the URL and looks the pool
        # up again on every request. Through a proxy as the client goes.
        host, origin = self._configuration.host, urllib3.util.parse_url(self._configuration.host)
        direct = not isinstance(pool, urllib3.ProxyManager) and origin.host is not None
        self._origin = pool.connection_from_url(host) if direct else pool
        self._base = (origin.path or "") if direct else host

    def url(self, path: str) -> str:
        """The URL to pass to :meth:`post` for an API ``path`` (``/api/v1/...``)."""
        return f"{self._base}{path}"

    def post(self, url: str, body: bytes, timeout: float) -> urllib3.BaseHTTPResponse:
        """POST ``body`` (JSON) to ``url`` (from :meth:`url`) as ``RESTClientObject.request`` sends it; raw answer."""
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        headers.update(self._api_client.default_headers)
        if self._api_client.cookie:
            headers["Cookie"] = self._api_client.cookie
        for auth in self._configuration.auth_settings().values():  # BearerToken, refreshed by its hook if any
            if auth.get("in") == "header" and auth.get("value"):
                headers[auth["key"]] = auth["value"]
        return self._origin.urlopen(
            "POST", url, body=body, headers=headers, timeout=urllib3.Timeout(total=timeout), preload_content=False
        )


def with_bounded_retries(api_client: client.ApiClient) -> client.ApiClient:
    """A private client with the caller's configuration but without urllib3's hidden retries.

    urllib3 retries idempotent requests (our pod GET) up to three times on read timeouts, each
    with a fresh timeout, which would blow the bind budget. Only one reconnect is kept; any other
    retry is this module's decision.
    """
    try:
        configuration = copy.deepcopy(api_client.configuration)
    except Exception:  # an exotic configuration that cannot be copied: use the caller's client as is
        logger.warning("could not copy the Kubernetes client configuration; binding uses it unchanged")
        return api_client
    configuration.retries = urllib3.Retry(
        total=1, connect=1, read=0, redirect=0, status=0, other=0, raise_on_status=False
    )
    own = client.ApiClient(configuration)
    own.default_headers.update(api_client.default_headers)
    own.cookie = api_client.cookie
    return own


def read_raw(response: object) -> tuple[int, bytes]:
    """Status and body of a raw (``_preload_content=False``) response; releases the connection."""
    if not isinstance(response, urllib3.BaseHTTPResponse):
        raise TypeError(f"expected a raw urllib3 response, got {type(response).__name__}")
    try:
        return response.status, response.data
    finally:
        response.release_conn()


def is_timeout(exc: BaseException) -> bool:
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        return is_timeout(exc.reason)
    if isinstance(exc, urllib3.exceptions.NewConnectionError):  # subclasses ConnectTimeoutError in urllib3 2
        return False
    return isinstance(exc, (urllib3.exceptions.TimeoutError, TimeoutError))
