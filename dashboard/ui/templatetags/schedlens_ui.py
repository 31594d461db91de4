"""Human units and operator-local times for the dashboard templates. Everything returned is escaped."""

from __future__ import annotations

from datetime import UTC, datetime

from django import template
from django.utils.html import format_html

from scheduler_core.extender.scoring.units import human_bytes, human_rate

register = template.Library()


@register.filter(name="bytes")
def bytes_filter(value: float | None) -> str:
    return "—" if value is None else human_bytes(value)


@register.filter(name="rate")
def rate_filter(value: float | None) -> str:
    return "—" if value is None else human_rate(value)


@register.filter
def rate_over(value: float | None, window_seconds: int | None) -> str:
    """Bytes over a window as a rate: 1.0 MB over 5 min → 3.3 kB/s; empty when the window is not known."""
    return "" if value is None or not window_seconds else human_rate(value / window_seconds)


@register.filter
def ms(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.0f} ms" if value >= 100 else f"{value:.1f} ms" if value >= 1 else f"{value * 1000:.0f} µs"


@register.filter
def age(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


@register.filter
def score(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


@register.filter
def signed(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1f}"


@register.simple_tag
def when(value: datetime | float | None) -> str:
    """A ``<time>`` in UTC (a datetime, or Unix seconds as the domain keeps them); ``app.js`` rewrites the text to the
    operator's zone and keeps UTC in the title."""
    if value is None:
        return "—"
    if isinstance(value, int | float):
        value = datetime.fromtimestamp(value, tz=UTC)
    utc = value.astimezone(UTC)
    text = utc.strftime("%Y-%m-%d %H:%M:%S UTC")
    return format_html(
        '<time datetime="{}" title="{}" class="ts">{}</time>',
        utc.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        text,
        text,
    )


@register.filter
def relative(value: float | None) -> str:
    """A relative error as a signed percentage: 2.0 → +200.0 %, −0.5 → −50.0 %."""
    return "—" if value is None else f"{value * 100:+.1f} %"
