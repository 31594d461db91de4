"""Logins: Django's own, except that where binds are real the demo's published password opens nothing."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.http import HttpRequest

from dashboard.services.demo_login import DEMO_PASSWORD, binds_are_real

log = logging.getLogger(__name__)


class RealClusterLoginBackend(ModelBackend):
    """The start-up check (``schedlens.E002``) refuses to serve a real cluster where a user has the demo's password;
    this refuses the login too, should such a password be set while the server runs."""

    def authenticate(
        self, request: HttpRequest | None, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> User | None:
        if password == DEMO_PASSWORD and binds_are_real():
            log.warning("login of %r with the demo's published password refused: binds are real", username)
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)
