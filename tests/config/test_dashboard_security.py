"""The dashboard behind TLS, as deployed: gunicorn serving https with ``SCHEDLENS_HTTPS=true``.

Login required, CSRF enforced, cookies ``Secure``/``HttpOnly``/``SameSite``, HSTS, a Content-Security-Policy
without inline script; plain http redirected to https for browsers but never for the machine endpoints
(kube-scheduler's POSTs, probes, scrapes). Plus static checks of the templates: no inline script or handler
the policy would have to allow.
"""

from __future__ import annotations

import http.client
import re
import secrets
import ssl
from collections.abc import Iterator
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User

from tests.support.paths import REPO
from tests.support.pki import Pki, client_context
from tests.support.processes import Gunicorn, database_url

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "correct horse battery staple"
TEMPLATES = REPO / "dashboard" / "templates"


def env_for(settings, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "DATABASE_URL": database_url(settings.DATABASES["default"]),
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_DEBUG": "false",
        "SCHEDLENS_HTTPS": "true",
        "SCHEDLENS_CLUSTER_SOURCE": "none",
        "SCHEDLENS_BIND_MODE": "simulated",
        "SCHEDLENS_CONFIG": "",
        "SCHEDLENS_INGEST_IN_PROCESS": "false",
        "SCHEDLENS_SPOOL_DIR": str(tmp_path / "spool"),
        **extra,
    }


@pytest.fixture
def https_server(settings, tmp_path: Path, pki: Pki) -> Iterator[Gunicorn]:
    env = env_for(settings, tmp_path, SCHEDLENS_TLS_CERT=str(pki.server_cert), SCHEDLENS_TLS_KEY=str(pki.server_key))
    server = Gunicorn(env, tmp_path / "gunicorn.log", ssl_context=client_context(pki, cert=None, key=None))
    yield server
    server.stop()


class Browser:
    """Just enough of a browser: keeps cookies, sends Referer/Origin like one on a same-origin form post."""

    def __init__(self, server: Gunicorn) -> None:
        self.server = server
        self.cookies: dict[str, str] = {}
        self.set_cookie_headers: list[str] = []

    def request(self, method: str, path: str, body: dict[str, str] | None = None) -> http.client.HTTPResponse:
        conn = http.client.HTTPSConnection("127.0.0.1", self.server.port, context=self.server.ssl_context, timeout=10)
        headers = {"Host": f"127.0.0.1:{self.server.port}", "Referer": f"{self.server.url}/accounts/login/"}
        headers["Origin"] = self.server.url
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        data = None
        if body is not None:
            data = urlencode(body)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        response.read()
        conn.close()
        for header in response.headers.get_all("Set-Cookie") or []:
            self.set_cookie_headers.append(header)
            for name, morsel in SimpleCookie(header).items():
                self.cookies[name] = morsel.value
        return response


def cookie_attributes(headers: list[str], name: str) -> str:
    (header,) = [h for h in headers if h.startswith(f"{name}=")][-1:]
    return header.lower()


def test_the_dashboard_over_https_sends_hsts_csp_and_secure_cookies_and_enforces_csrf(https_server) -> None:
    User.objects.create_user("olga", password=PASSWORD)
    browser = Browser(https_server)

    assert browser.request("GET", "/").status == 302, "login required"
    login = browser.request("GET", "/accounts/login/")
    assert login.status == 200
    assert login.headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    policy = login.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy
    assert "unsafe-inline" not in policy
    assert "unsafe-eval" not in policy
    assert login.headers["X-Frame-Options"] == "DENY"
    assert login.headers["X-Content-Type-Options"] == "nosniff"
    csrf = cookie_attributes(browser.set_cookie_headers, "csrftoken")
    assert "; secure" in csrf
    assert "samesite=lax" in csrf

    forged = browser.request("POST", "/accounts/login/", {"username": "olga", "password": PASSWORD})
    assert forged.status == 403, "no CSRF token, no login"
    assert "sessionid" not in browser.cookies

    signed_in = browser.request(
        "POST",
        "/accounts/login/",
        {"username": "olga", "password": PASSWORD, "csrfmiddlewaretoken": browser.cookies["csrftoken"]},
    )
    assert signed_in.status == 302
    session = cookie_attributes(browser.set_cookie_headers, "sessionid")
    assert "; secure" in session
    assert "; httponly" in session
    assert "samesite=lax" in session
    assert browser.request("GET", "/").status == 200


def test_plain_http_is_redirected_for_browsers_but_never_for_kube_scheduler_or_probes(settings, tmp_path) -> None:
    # Behind a TLS-terminating proxy that did not say so (no X-Forwarded-Proto trusted): every request looks http.
    server = Gunicorn(env_for(settings, tmp_path), tmp_path / "gunicorn.log")
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)

        def answer(method: str, path: str, body: bytes | None = None) -> http.client.HTTPResponse:
            conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            return response

        dashboard = answer("GET", "/")
        assert dashboard.status == 301
        assert dashboard.headers["Location"] == f"https://127.0.0.1:{server.port}/"
        assert answer("GET", "/api/v1/cycles/").status == 301
        filtered = answer("POST", "/extender/default/filter", b'{"Pod":{},"Nodes":null,"NodeNames":["a"]}')
        assert filtered.status == 200, "Go turns a redirected POST into a GET: the verbs are never redirected"
        assert answer("GET", "/healthz").status == 200
        assert answer("GET", "/readyz").status == 200
        assert answer("GET", "/metrics").status == 200
        conn.close()
    finally:
        server.stop()


# --- templates: nothing the Content-Security-Policy would have to allow --------------------------------------

TEMPLATE_FILES = sorted(TEMPLATES.rglob("*.html"))


def test_there_are_templates_to_check() -> None:
    assert len(TEMPLATE_FILES) >= 5


@pytest.mark.parametrize("path", TEMPLATE_FILES, ids=lambda p: str(p.relative_to(TEMPLATES)))
def test_templates_have_no_inline_script_handler_or_style(path: Path) -> None:
    text = re.sub(r"{#.*?#}|{%\s*comment\s*%}.*?{%\s*endcomment\s*%}", "", path.read_text(encoding="utf-8"), flags=re.S)
    for tag in re.findall(r"<script\b[^>]*>", text, flags=re.IGNORECASE):
        assert "src=" in tag, f"inline script: {tag}"
    assert not re.search(r"\son[a-z]+\s*=", text, flags=re.IGNORECASE), "inline event handler"
    assert "javascript:" not in text.lower()
    assert not re.search(r"<style\b", text, flags=re.IGNORECASE), "inline style element"
    assert not re.search(r"\|\s*safe\b|{%\s*autoescape\s+off", text), "autoescaping turned off"


def test_the_https_context_of_the_fixture_verifies_the_server(pki: Pki) -> None:
    assert client_context(pki, cert=None, key=None).verify_mode == ssl.CERT_REQUIRED
