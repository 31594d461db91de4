"""Clients of the audit API that authenticate as a given user, with the token the product issues them."""

from __future__ import annotations

from django.contrib.auth.models import User
from rest_framework.test import APIClient

from dashboard.audit.auditors import auditor_token_issue


def token_client(user: User | None) -> APIClient:
    client = APIClient()
    if user is not None:
        key = auditor_token_issue(username=user.username).key if user.groups.exists() else _plain_token(user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def _plain_token(user: User) -> str:
    from rest_framework.authtoken.models import Token

    return Token.objects.get_or_create(user=user)[0].key
