"""DRF's rate throttles, reading their rates from settings on each request.

DRF's own classes copy ``DEFAULT_THROTTLE_RATES`` once at import, so neither ``override_settings`` nor a
settings change reaches them; these read ``api_settings`` (reloaded on ``setting_changed``) every time.
The counters live in Django's default cache: per process unless ``CACHES`` points at a shared one.
"""

from __future__ import annotations

from rest_framework.settings import api_settings
from rest_framework.throttling import AnonRateThrottle, ScopedRateThrottle, UserRateThrottle


class _RatesFromSettings:
    scope: str | None

    def get_rate(self) -> str | None:
        # djangorestframework-stubs type these rates as numbers; DRF reads "<count>/<period>" strings (the same
        # stubs type SimpleRateThrottle.THROTTLE_RATES, copied from them, as strings).
        rates: dict[str, str | None] = api_settings.DEFAULT_THROTTLE_RATES  # type: ignore[assignment]
        return rates.get(self.scope or "")


class AnonThrottle(_RatesFromSettings, AnonRateThrottle):
    pass


class UserThrottle(_RatesFromSettings, UserRateThrottle):
    pass


class ScopedThrottle(_RatesFromSettings, ScopedRateThrottle):
    """Per-view budget (``throttle_scope``) on top of the user's, for expensive reads such as verification."""
