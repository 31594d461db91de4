"""Adapter to the Kubernetes API server.

With ``kube.watch`` (list + watch), ``kube.events`` (Events about pods) and ``kube.http`` (posting JSON through the
client's pool), the only modules in schedlens that import the official ``kubernetes`` package. Two things live here:

* :func:`load_api_client` finds a configuration (in-cluster service account, else a kubeconfig)
  or says there is none by returning ``None``;
* :class:`KubernetesBinder` answers kube-scheduler's ``bind`` verb by creating a ``v1`` Binding, and reads a pod's
  placement back (:meth:`KubernetesBinder.placement`) to reconcile a bind whose outcome was never recorded.

Client quirk worked around: the generated client declares the Binding subresource as returning a
``V1Binding``, but the API server answers ``201`` with a ``metav1.Status``. Deserialising that
fails (``target`` is required; client 37 raises a pydantic ``ValidationError``) *after the pod
was bound*. So every call here passes ``_preload_content=False`` and reads status and JSON itself.

The Binding itself is not sent through the generated method: its pydantic validation, model objects and
serialization cost about a fifth of the bind verb's CPU (the A/B in ``benchmarks/results-cost.md``). It is posted as
JSON bytes through the same client's connection pool by :class:`JsonPoster` (which ``kube.events`` uses too). A 2xx
answer is the bind; nothing is read back.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import msgspec
import urllib3
from kubernetes import client
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.incluster_config import InClusterConfigLoader

from scheduler_core.extender.protocol.binding import BindOutcome, PlacementUnknownError, PodPlacement
from scheduler_core.kube.http import JsonPoster, is_timeout, read_raw, with_bounded_retries

__all__ = [
    "JsonPoster",
    "KubeConfigError",
    "KubernetesBinder",
    "is_timeout",
    "load_api_client",
    "read_raw",
    "with_bounded_retries",
]

logger = logging.getLogger(__name__)

SERVICE_ACCOUNT_DIR: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount")
DEFAULT_KUBECONFIG: Final = "~/.kube/config"


class KubeConfigError(RuntimeError):
    """A Kubernetes configuration is present (or was asked for) but cannot be used."""


# ----------------------------------------------------------------------------
# Configuration
# ----------------------------------------------------------------------------


def load_api_client(
    *, kubeconfig: str | None = None, service_account_dir: Path = SERVICE_ACCOUNT_DIR
) -> client.ApiClient | None:
    """An API client for the cluster we run in or the kubeconfig we are given; None without config.

    Order: an explicit ``kubeconfig`` path; else the in-cluster service account
    (``KUBERNETES_SERVICE_HOST`` and ``_PORT`` set, token and CA files present); else
    ``$KUBECONFIG`` (``os.pathsep``-separated, missing files ignored as kubectl does); else
    ``~/.kube/config`` if it exists; else ``None``.

    Raises :class:`KubeConfigError` when a configuration exists but is unusable (or an explicit
    path is missing): silently falling back to "no cluster" would hide a deployment mistake.
    """
    if kubeconfig is not None:
        path = os.path.expanduser(kubeconfig)
        if not os.path.isfile(path):
            raise KubeConfigError(f"kubeconfig file not found: {kubeconfig}")
        return _client_from_kubeconfig(path)

    if _in_cluster_available(service_account_dir):
        configuration = client.Configuration()
        loader = InClusterConfigLoader(  # type: ignore[no-untyped-call]
            token_filename=str(service_account_dir / "token"),
            cert_filename=str(service_account_dir / "ca.crt"),
        )
        try:
            loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
        except (ConfigException, OSError) as exc:
            raise KubeConfigError(f"in-cluster configuration unusable: {exc}") from exc
        return client.ApiClient(configuration)

    env = os.environ.get("KUBECONFIG", "")
    candidates = [p for p in env.split(os.pathsep) if p] if env else [DEFAULT_KUBECONFIG]
    existing = [p for p in (os.path.expanduser(c) for c in candidates) if os.path.isfile(p)]
    if not existing:
        return None
    return _client_from_kubeconfig(os.pathsep.join(existing))


def _in_cluster_available(service_account_dir: Path) -> bool:
    return bool(
        os.environ.get("KUBERNETES_SERVICE_HOST")
        and os.environ.get("KUBERNETES_SERVICE_PORT")
        and (service_account_dir / "token").is_file()
        and (service_account_dir / "ca.crt").is_file()
    )


def _client_from_kubeconfig(paths: str) -> client.ApiClient:
    configuration = client.Configuration()
    try:
        # persist_config=False: never write refreshed tokens back into the user's kubeconfig.
        kube_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=paths, client_configuration=configuration, persist_config=False
        )
    except Exception as exc:  # ConfigException, YAML errors, exec-plugin failures: all mean "unusable"
        raise KubeConfigError(f"kubeconfig {paths} unusable: {exc}") from exc
    return client.ApiClient(configuration)


# ----------------------------------------------------------------------------
# Binding
# ----------------------------------------------------------------------------

_MIN_REQUEST_SECONDS: Final = 0.05
"""Below this much time left, do not start another request."""
_THROTTLE_ATTEMPTS: Final = 3
"""Binding attempts while the API server answers 429."""
_DEFAULT_THROTTLE_WAIT: Final = 0.25
"""Wait before retrying a 429 that carries no usable Retry-After."""
_MAX_ERROR_CHARS: Final = 300

_UID_MISMATCH = re.compile(r"UID in precondition|Precondition failed: UID", re.IGNORECASE)
_ALREADY_ASSIGNED = re.compile(r'is already assigned to node "([^"]*)"')


class KubernetesBinder:
    """Binds a pod by creating ``pods/{name}/binding`` with the pod UID as precondition.

    The whole ``bind`` (including a 409 follow-up read and 429 waits) finishes within
    ``timeout_seconds``, which must stay under kube-scheduler's extender HTTP timeout (5 s).
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        timeout_seconds: float = 4.0,
        max_throttle_wait_seconds: float = 1.0,
    ) -> None:
        if timeout_seconds <= 0:
            raise ValueError("timeout_seconds must be positive")
        self._timeout = float(timeout_seconds)
        self._max_throttle_wait = max(0.0, float(max_throttle_wait_seconds))
        self._api_client = with_bounded_retries(api_client)
        self._core = client.CoreV1Api(self._api_client)
        self._configuration = self._api_client.configuration
        self._poster = JsonPoster(self._api_client)

    def close(self) -> None:
        """Release this binder's connection pool (the caller's ``api_client`` is left alone)."""
        self._api_client.close()  # type: ignore[no-untyped-call]

    def bind(self, *, namespace: str, name: str, uid: str, node: str) -> BindOutcome:
        if not (namespace and name and node):
            return _failure(
                "bind request lacks the pod namespace, pod name or node name",
                "not sent: incomplete bind request",
            )
        deadline = time.monotonic() + self._timeout
        url, body = self._binding_request(namespace, name, uid, node)
        throttled = 0
        waited = 0.0
        dropped = 0
        while True:
            remaining = deadline - time.monotonic()
            if remaining < _MIN_REQUEST_SECONDS:
                return self._timed_out(throttled)
            try:
                response = self._poster.post(url, body, remaining)
                status, data = read_raw(response)
            except urllib3.exceptions.SSLError as exc:  # as the generated client reports it: no HTTP answer
                return _failure(f"could not reach the API server: {type(exc).__name__}", "no HTTP answer")
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                if is_timeout(exc):
                    return self._timed_out(throttled)
                if _is_dropped(exc) and dropped == 0 and deadline - time.monotonic() > 0.5:
                    # The connection broke before an answer. Retrying is safe: if the first attempt did bind,
                    # the retry gets a 409 naming our node, which counts as success.
                    dropped += 1
                    continue
                return _failure(f"could not reach the API server: {_describe(exc)}", "no HTTP answer")
            if 200 <= status <= 299:  # 201 and a Status: bound, nothing to read back
                return BindOutcome(error="", detail="bound", status=status)
            reason, message = _reason_and_message(str(response.reason or ""), _text(data))
            if status == 429:
                throttled += 1
                wait = self._throttle_wait(response.headers, waited, deadline)
                if throttled < _THROTTLE_ATTEMPTS and wait is not None:
                    logger.info("bind %s/%s throttled (429); retrying in %.2f s", namespace, name, wait)
                    time.sleep(wait)
                    waited += wait
                    continue
                return _failure(
                    f"API server is throttling requests (429 Too Many Requests after {throttled} attempts)",
                    f"429 x{throttled}: {message or reason}",
                    status,
                )
            if status == 409:
                return self._after_conflict(namespace, name, uid, node, message, deadline)
            return _failure_for_status(status, reason, message)

    def placement(self, *, namespace: str, name: str) -> PodPlacement:
        """Where the pod is now (``spec.nodeName``), by the GET the 409 follow-up uses; within the bind's budget.

        For reconciling a bind whose outcome was never recorded (``scheduler_core.extender.record.bind_intents``): 404
        is a pod that no longer exists; any other failure raises :class:`PlacementUnknownError` (ask again later).
        """
        pod, problem = self._read_pod(namespace, name, time.monotonic() + self._timeout)
        if pod is None:
            if problem == "404":
                return PodPlacement(exists=False)
            raise PlacementUnknownError(f"could not read pod {namespace}/{name}: {problem}")
        metadata = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        return PodPlacement(exists=True, uid=str(metadata.get("uid") or ""), node=str(spec.get("nodeName") or ""))

    # ----- helpers -----

    def _binding_request(self, namespace: str, name: str, uid: str, node: str) -> tuple[str, bytes]:
        """URL (a path, for the API server's pool) and JSON body of ``POST pods/{name}/binding``: the ``v1.Binding``
        the generated client would send."""
        safe = self._configuration.safe_chars_for_path_param
        url = self._poster.url(
            f"/api/v1/namespaces/{quote(namespace, safe=safe)}/pods/{quote(name, safe=safe)}/binding"
        )
        metadata = {"name": name, "namespace": namespace, **({"uid": uid} if uid else {})}
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        return url, msgspec.json.encode(binding)

    def _throttle_wait(self, headers: Any, waited: float, deadline: float) -> float | None:
        """Seconds to wait before retrying a 429, or None when the budget does not allow another attempt."""
        requested = _retry_after_seconds(headers)
        if requested is None:
            requested = _DEFAULT_THROTTLE_WAIT
        wait = min(requested, self._max_throttle_wait - waited)
        if wait < 0 or (requested > 0 and wait <= 0):
            return None
        if deadline - time.monotonic() - wait < 4 * _MIN_REQUEST_SECONDS:
            return None
        return wait

    def _timed_out(self, throttled: int) -> BindOutcome:
        extra = f" (after {throttled} throttled attempts)" if throttled else ""
        return _failure(
            f"binding timed out: the API server did not answer within {self._timeout:g} s{extra}",
            "timeout, no HTTP answer",
        )

    def _after_conflict(
        self, namespace: str, name: str, uid: str, node: str, message: str, deadline: float
    ) -> BindOutcome:
        """409 from the binding: find out whether the pod is bound to our node already (that is a success)."""
        if _UID_MISMATCH.search(message):
            return _failure("pod UID does not match (the pod was recreated)", f"409: {message}", 409)

        pod, problem = self._read_pod(namespace, name, deadline)
        if pod is not None:
            metadata = pod.get("metadata") or {}
            spec = pod.get("spec") or {}
            pod_uid = str(metadata.get("uid") or "")
            bound_to = str(spec.get("nodeName") or "")
            if uid and pod_uid and pod_uid != uid:
                return _failure(
                    "pod UID does not match (the pod was recreated)",
                    f"409: {message}; the pod now has UID {pod_uid}",
                    409,
                )
            if bound_to == node:
                return BindOutcome(error="", detail="409: already bound to the same node", status=409)
            if bound_to:
                return _other_node(bound_to, message)
            return _failure(f"binding conflict: {message or 'the API server answered 409'}", f"409: {message}", 409)

        if problem == "404":
            return _failure("pod not found (deleted before binding)", f"409: {message}; then 404 reading the pod", 409)

        # The pod could not be read back. The API server checks the UID precondition before it reports
        # "already assigned", so that message alone identifies our pod's node.
        assigned = _ALREADY_ASSIGNED.search(message)
        if assigned is not None:
            if assigned.group(1) == node:
                return BindOutcome(
                    error="",
                    detail=f"409: already bound to the same node (pod read failed: {problem})",
                    status=409,
                )
            return _other_node(assigned.group(1), message)
        return _failure(f"binding conflict and the pod could not be read back ({problem})", f"409: {message}", 409)

    def _read_pod(self, namespace: str, name: str, deadline: float) -> tuple[dict[str, Any] | None, str]:
        """The pod's JSON, or None and a short description of why not ("404" when it does not exist)."""
        remaining = deadline - time.monotonic()
        if remaining < _MIN_REQUEST_SECONDS:
            return None, "no time left to read the pod"
        try:
            response = self._core.read_namespaced_pod(
                name, namespace, _preload_content=False, _request_timeout=remaining
            )
            _, data = read_raw(response)
            pod = json.loads(data)
        except ApiException as exc:
            if exc.status == 404:
                return None, "404"
            reason, _ = _status_of(exc)
            return None, f"{exc.status} {reason}".strip()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            return None, "timeout" if is_timeout(exc) else _describe(exc)
        except ValueError:
            return None, "the pod read back was not JSON"
        if not isinstance(pod, dict):
            return None, "the pod read back was not a JSON object"
        return pod, ""


# ----------------------------------------------------------------------------
# Events on pods
# ----------------------------------------------------------------------------

# ----------------------------------------------------------------------------
# Module helpers
# ----------------------------------------------------------------------------


def _status_of(exc: ApiException) -> tuple[str, str]:
    """``(reason, message)`` from the ``metav1.Status`` body of an error answer (best effort)."""
    body = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    return _reason_and_message(str(exc.reason or ""), body)


def _text(data: bytes) -> str | None:
    """An answer's body as the generated client keeps it for an error (UTF-8, or nothing)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _reason_and_message(reason: str, body: object) -> tuple[str, str]:
    """``(reason, message)`` from an answer's HTTP reason and ``metav1.Status`` body (best effort)."""
    if not isinstance(body, str) or not body:
        return reason, ""
    try:
        status = json.loads(body)
    except ValueError:
        return reason, _first_line(body)
    if not isinstance(status, dict):
        return reason, _first_line(body)
    return str(status.get("reason") or reason), str(status.get("message") or "")


def _retry_after_seconds(headers: Any) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or HTTP date); None when absent or unparsable."""
    if not headers:
        return None
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    if value is None:
        return None
    text = str(value).strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _failure_for_status(status: int, reason: str, message: str) -> BindOutcome:
    said = message or reason or "no message"
    detail = f"{status}: {said}"
    if status == 404:
        return _failure("pod not found (deleted before binding)", detail, status)
    if status in (401, 403):
        return _failure(f"API server refused the binding ({status} {reason}): {said}", detail, status)
    if status >= 500:
        return _failure(f"API server error {status} ({reason}): {said}", detail, status)
    return _failure(f"API server rejected the binding ({status} {reason}): {said}", detail, status)


def _other_node(bound_to: str, message: str) -> BindOutcome:
    return _failure(
        f"pod is already bound to another node: {bound_to}",
        f"409: already bound to node {bound_to}" + (f" ({message})" if message else ""),
        409,
    )


def _failure(error: str, detail: str, status: int | None = None) -> BindOutcome:
    return BindOutcome(error=_error_text(error), detail=_one_line(detail), status=status)


def _error_text(text: str) -> str:
    """Safe for kube-scheduler, which uses Error as a Go format string: no ``%``, one short line."""
    cleaned = _one_line(text.replace("%", " percent"))
    return cleaned or "binding failed"


def _one_line(text: str, limit: int = _MAX_ERROR_CHARS) -> str:
    cleaned = " ".join(text.split())
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 3] + "..."


def _first_line(text: object) -> str:
    lines = str(text or "").strip().splitlines()
    return lines[0] if lines else ""


def _is_dropped(exc: BaseException) -> bool:
    """The connection broke after the request may have been sent (reset, closed without an answer)."""
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        return _is_dropped(exc.reason)
    return isinstance(exc, (urllib3.exceptions.ProtocolError, ConnectionResetError))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        exc = exc.reason
    text = str(exc)
    # urllib3 prefixes "<urllib3.connection.HTTPConnection object at 0x...>: "; keep the readable part.
    text = re.sub(r"<[^>]*object at 0x[0-9a-f]+>:\s*", "", text)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
