"""Who may read the audit record: members of the ``auditor`` group, and superusers."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from dashboard.audit.auditors import AUDITOR_GROUP


class IsAuditor(BasePermission):
    """The default permission of every API view (``DEFAULT_PERMISSION_CLASSES``).

    Anonymous requests fail here too, and DRF turns that into a 401 because the first authentication class
    (TokenAuthentication) names a ``WWW-Authenticate`` scheme. Writes are refused by the viewsets being
    read-only (405), not here, so that an auditor learns the API cannot write rather than that they may not.
    """

    message = f"Reading the audit record needs membership of the {AUDITOR_GROUP!r} group."

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if user is None or not user.is_authenticated or not user.is_active:
            return False
        return bool(user.is_superuser or user.groups.filter(name=AUDITOR_GROUP).exists())
