"""Numbers as pages print them: three significant digits, thousands as k, M, G, T, and the unit.

`128000` tokens/s reads `128k tokens/s`, `4982` samples/s `4.98k samples/s`, `3.3` steps/s
`3.3 steps/s`. The job page's and the other charts' script (static/js/units.js) follows the
same rule, so a figure reads the same in a table and in a chart's hover.
"""

import math

DASH = "\u2013"  # an en dash: no value
_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_TINY = 1e-3  # below it, 2.5e-05 reads better than 0.000025
# Kinds of rate the poll records (RunSummary.throughput_unit) and the unit each is shown with.
RATE_UNITS = {"tokens": "tokens/s", "samples": "samples/s", "steps": "steps/s"}


def _significant(value: float) -> str:
    """Three significant digits, trailing zeros dropped: 12.3, 3.3, 0.5, 250."""
    text = f"{value:.3g}"
    if "e" in text:  # .3g writes 250.0 as 250, but 1000 as 1e+03: never here (below 1000)
        return f"{value:.0f}"
    return text


def number_text(value: float | None) -> str:
    """A number for people: `128k`, `4.98k`, `1.23M`, `3.3`, `0.012`, `2.5e-05`, `1.28e+17`."""
    if value is None or isinstance(value, bool):
        return DASH
    number = float(value)
    if not math.isfinite(number):
        return "NaN" if math.isnan(number) else ("∞" if number > 0 else "-∞")
    size = abs(number)
    if size == 0:
        return "0"
    if size < _TINY or size >= 1e15:
        return f"{number:.3g}"
    for scale, prefix in _PREFIXES:
        # 999,950 rounds to 1e3 k: it reads 1M, not 1e+03k.
        if size >= scale * 0.9995:
            return _significant(number / scale) + prefix
    return _significant(number)


def quantity(value: float | None, unit: str) -> str:
    """A number with its unit: `128k tokens/s`, `71.5 °C`, `12.3 %`; a dash when missing."""
    if value is None:
        return DASH
    text = number_text(value)
    if not unit:
        return text
    return f"{text} {unit}"


def rate_unit(kind: str) -> str:
    """The unit of a recorded rate kind (`tokens` -> `tokens/s`); `/s` for one not known."""
    return RATE_UNITS.get(kind, f"{kind}/s" if kind else "/s")
