"""Who may read the audit API: members of the auditor group (and superusers), with an API token each."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from rest_framework.authtoken.models import Token

AUDITOR_GROUP = "auditor"
"""Members (and superusers) may read the audit API."""


@dataclass(frozen=True, slots=True)
class IssuedToken:
    key: str
    user_created: bool
    token_created: bool


def auditor_token_issue(*, username: str, rotate: bool = False) -> IssuedToken:
    """Make ``username`` (created without a usable password if new) an auditor and return their API token.

    An existing token is returned as is unless ``rotate``, which replaces it (the old key stops working).
    """
    user_model = get_user_model()
    with transaction.atomic():
        user, user_created = user_model.objects.get_or_create(defaults=None, **{user_model.USERNAME_FIELD: username})
        if user_created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        group, _ = Group.objects.get_or_create(name=AUDITOR_GROUP)
        user.groups.add(group)
        if rotate:
            Token.objects.filter(user=user).delete()
        token, token_created = Token.objects.get_or_create(user=user)
    return IssuedToken(key=token.key, user_created=user_created, token_created=token_created)
