"""How the report writes numbers: bytes, seconds, percentages, significant digits, "–".

Every number in the report is formatted here, in Python (bytes as "1.23 MB", times to three
significant digits), so the Typst template only lays out strings. A cell is never empty: "–"
marks a value that does not apply, and each caption says what it means there.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "decoded",
    "variant_meanings",
    "CENSORED",
    "DASH",
    "clock_phrase",
    "fmt_bandwidth",
    "fmt_bytes",
    "fmt_percent",
    "fmt_seconds",
    "fmt_stat",
    "fmt_time_to_target",
    "fmt_value",
    "missing",
    "sig",
    "time_to_target_cell",
]

DASH = "–"
_NBSP = "\u00a0"  # keeps a number and its unit on one line


# --------------------------------------------------------------------------- formatting


def missing(x: Any) -> bool:
    """Whether a cell's value is absent (None, NaN, NA): it is then shown as "–"."""
    if x is None:
        return True
    try:
        return bool(pd.isna(x))
    except (TypeError, ValueError):  # lists and dicts are not missing
        return False


def sig(x: float, digits: int = 3) -> str:
    """``x`` rounded to ``digits`` significant digits, in positional notation (no exponent)."""
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    exp = math.floor(math.log10(abs(x)))
    decimals = digits - 1 - exp
    rounded = round(x, decimals)
    # Rounding can add a digit (9.996 -> 10.0); then one decimal fewer keeps `digits` digits.
    if rounded != 0 and math.floor(math.log10(abs(rounded))) > exp:
        decimals -= 1
        rounded = round(x, decimals)
    return f"{rounded:.{max(decimals, 0)}f}"


def _scaled(value: float, units: Sequence[tuple[float, str]]) -> str:
    """Format with the largest unit whose 3-significant-digit value is at least 1."""
    for factor, unit in units:
        text = sig(value / factor)
        if abs(float(text)) >= 1:
            return f"{text}{_NBSP}{unit}"
    factor, unit = units[-1]  # below the smallest unit: exponent form, not a row of zeros
    return f"{value / factor:.3g}{_NBSP}{unit}"


def fmt_bytes(n: Any) -> str:
    """Bytes with decimal (SI) prefixes: ``1234567`` -> ``"1.23 MB"``; missing -> "–"."""
    if missing(n):
        return DASH
    n = float(n)
    if abs(n) < 1000:
        return f"{int(round(n))}{_NBSP}B"
    units = [(1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")]
    return _scaled(n, units)


def fmt_seconds(s: Any) -> str:
    """A duration to three significant digits in s, ms, µs or ns; missing -> "–"."""
    if missing(s):
        return DASH
    s = float(s)
    if s == 0:
        return f"0{_NBSP}s"
    return _scaled(s, [(1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")])


def fmt_percent(x: Any) -> str:
    """A fraction as a percentage to three significant digits: ``0.8532`` -> ``"85.3 %"``."""
    if missing(x):
        return DASH
    return f"{sig(float(x) * 100)}{_NBSP}%"


def fmt_bandwidth(gbps: Any) -> str:
    """A link rate given in Gbit/s: ``0.1`` -> ``"100 Mbit/s"``."""
    if missing(gbps):
        return DASH
    return _scaled(float(gbps), [(1.0, "Gbit/s"), (1e-3, "Mbit/s"), (1e-6, "kbit/s")])


def fmt_value(v: Any, key: str = "") -> str:
    """Any config or statistics value as a short string; keys naming bytes get byte units."""
    if missing(v):
        return DASH
    if isinstance(v, np.generic):  # numpy scalars from pandas behave like Python's
        v = v.item()
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return fmt_bytes(v) if "bytes" in key else f"{v:,}"
    if isinstance(v, float):
        if "bytes" in key:
            return fmt_bytes(v)
        if v.is_integer() and abs(v) < 1e15:
            return f"{int(v):,}"
        # Config values are shown as written (0.1, not 0.100); measurements use fmt_stat.
        return f"{v:.6g}" if 1e-3 <= abs(v) < 1e4 else f"{v:.4g}"
    if isinstance(v, Mapping):
        inner = "; ".join(f"{k}={fmt_value(v[k], str(k))}" for k in sorted(v))
        return inner or DASH
    if isinstance(v, list | tuple):
        return _fmt_list(v, key)
    text = str(v).strip()
    return text or DASH


def fmt_stat(v: Any) -> str:
    """A measured statistic to three significant digits (exponent form below 0.001)."""
    if missing(v):
        return DASH
    if isinstance(v, bool) or not isinstance(v, int | float):
        return fmt_value(v)
    v = float(v)
    if v.is_integer() and abs(v) < 1e15:
        return f"{int(v):,}"
    if v != 0 and abs(v) < 1e-3:
        return f"{v:.3g}"
    return f"{v:,.0f}" if abs(v) >= 1e4 else sig(v, 3)


def _fmt_list(values: Sequence[Any], key: str, limit: int = 8) -> str:
    if not values:
        return DASH
    shown = ", ".join(fmt_value(x, key) for x in values[:limit])
    more = len(values) - limit
    return f"{shown}, … ({len(values)} values)" if more > 0 else shown


CENSORED = "not held (censored)"
"""A time to target that no run measured: the target was never held to the end of the run."""


def fmt_time_to_target(mean: Any, held: int, n: int) -> str:
    """Time to target over ``n`` runs, ``held`` of which held their target, censored ones shown.

    The mean is over the runs that held it; the censored runs are counted, never dropped:
    ``"1.23 s"`` (every run held it), ``"1.23 s; censored 1/3"``, or
    ``"not held (censored), 3/3"``.
    """
    if n <= 0:
        return DASH
    if held <= 0 or missing(mean):
        return f"{CENSORED}, {n}/{n}"
    if held >= n:
        return fmt_seconds(mean)
    return f"{fmt_seconds(mean)}; censored{_NBSP}{n - held}/{n}"


def time_to_target_cell(values: Iterable[Any]) -> str:
    """:func:`fmt_time_to_target` of a run-level series (NaN: censored)."""
    v = pd.to_numeric(pd.Series(list(values), dtype=object), errors="coerce").astype(float)
    held = int(v.notna().sum())
    return fmt_time_to_target(float(v.mean()) if held else math.nan, held, len(v))


def clock_phrase(clocks: Iterable[str]) -> str:
    """The clock(s) in words for captions: "simulated", "wall-clock" or both."""
    uniq = sorted({str(c) for c in clocks})
    return " and ".join(uniq) if uniq else "unknown"


def variant_meanings(experiment: Mapping[str, Any]) -> dict[str, str]:
    """What each swept name of the tier means: ``base__label`` -> ``base, param = value``.

    A sweep (``experiments.<name>.sweep``) names each recipe it makes ``<method>__<label>`` and a
    scenario sweep each scenario ``<base>__<label>`` (``r0p001``, ``t0p6``): a reader needs the
    setting, not the label.
    """
    out: dict[str, str] = {}
    for ex in (experiment.get("experiments") or {}).values():
        for key, base in (("sweep", "method"), ("scenario_sweep", "base")):
            sweep = (ex or {}).get(key)
            if not isinstance(sweep, Mapping) or not sweep.get(base):
                continue
            params = [str(p).rsplit(".", 1)[-1] for p in sweep.get("params") or []]
            for label, value in zip(sweep.get("labels") or [], sweep.get("values") or [],
                                    strict=False):  # fmt: skip
                values = value if isinstance(value, list) and len(params) > 1 else [value]
                setting = ", ".join(
                    f"{p} = {fmt_value(v)}" for p, v in zip(params, values, strict=False)
                )
                out[f"{sweep[base]}__{label}"] = f"{sweep[base]}, {setting}"
    return out


def decoded(name: str, meanings: Mapping[str, str]) -> str:
    """``name`` followed by its meaning in brackets where it is a swept name, else as it is."""
    return f"{name} ({meanings[name]})" if name in meanings else name
