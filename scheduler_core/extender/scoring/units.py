"""Human units for reasons and explanations (decimal, like network gear and Prometheus dashboards)."""

_UNITS = ("B", "kB", "MB", "GB", "TB", "PB")
MB = 1_000_000
"""Bytes in a (decimal) megabyte: what-if thresholds are given in MB/s."""


def human_bytes(value: float) -> str:
    amount = float(value)
    for unit in _UNITS:
        if abs(amount) < 1000 or unit == _UNITS[-1]:
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1000
    raise AssertionError("unreachable")


def human_rate(bytes_per_second: float) -> str:
    return human_bytes(bytes_per_second) + "/s"


def score_text(value: float) -> str:
    """A score as the record keeps it: up to 4 decimals, trailing zeros dropped (``59.4632``, ``75``)."""
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text
