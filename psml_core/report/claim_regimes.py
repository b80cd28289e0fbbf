"""The claims' regimes in the report: each paper's regime table, the regime cell, every field."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from psml_core.report.format import DASH, fmt_seconds, sig
from psml_core.report.tables import Table

__all__ = [
    "paper_regime_table",
    "regime_cell",
    "regimes_frame",
]


def regime_cell(row: Any) -> str:
    """The claim's regime in a few words, and the regime map's range where one answers it.

    Matched, off (which field, how far) or not given by the paper; then the map's one-line
    range (``regime_map_short``, set by the report).
    """
    status = getattr(row, "regime_status", "") or ""
    said = getattr(row, "regime_map_short", "") or ""
    if not status:
        text = "not measured" if row.verdict == "NOT RUN" else DASH
    elif status == "matched":
        text = "matched"
    elif status == "off":
        text = f"off: {getattr(row, 'regime_notes', '') or ''}"
    else:
        text = "not given by the paper"
    return f"{text}; map: {said}" if said else text


_BOUNDED = ("comm_compute", "bandwidth_share", "density", "workers")


def _fields(row: Any) -> dict[str, dict[str, Any]]:
    raw = getattr(row, "regime", "") or ""
    return {f["field"]: f for f in json.loads(raw)} if raw else {}


def _pair(f: Mapping[str, Any] | None) -> tuple[str, str]:
    if f is None:
        return DASH, DASH
    unit = f.get("unit", "")
    theirs = DASH if f.get("theirs") is None else _val(f["theirs"], unit)
    if f.get("theirs") is not None and f.get("status") == "derived":
        theirs += " (derived)"
    ours = DASH if f.get("ours") is None else _val(f["ours"], unit)
    if f.get("ratio") is not None:
        ours += f" ({sig(float(f['ratio']))}x)"
    return theirs, ours


def paper_regime_table(claims: pd.DataFrame, paper: str) -> Table | None:
    """A paper's claims' regimes: the four bounded fields, the paper's beside ours, per claim.

    The other fields (model, batch, link, compute per step, ...) of every claim are in the
    attached ``regimes`` table (:func:`regimes_frame`); the caption names those the paper gives.
    """
    rows, given = [], set()
    for r in claims.itertuples(index=False):
        fields = _fields(r)
        if not fields:
            continue
        cells = [r.claim]
        for name in _BOUNDED:
            cells += list(_pair(fields.get(name)))
        rows.append(cells)
        given |= {
            f"{f['label']} {_val(f['theirs'], f.get('unit', ''))}"
            + (f" {f['unit']}" if f.get("unit") and f.get("unit") != "s" else "")
            for f in fields.values()
            if f.get("theirs") is not None and f["field"] not in _BOUNDED
        }
    if not rows:
        return None
    extra = (
        f" Other fields the paper gives: {'; '.join(sorted(given))}."
        if given
        else " The paper gives no other field (model, batch, link, compute per step)."
    )
    return Table(
        f"regime_{paper}",
        "Regimes: the paper's (– where it gives none) beside ours, measured on each claim's own "
        "runs in its fixed scenario, with ours over the paper's in brackets (fields and bounds "
        "as defined on the summary page; whether they match, in Table 1's Regime column)."
        + extra
        + " Every field of every claim, with its source, is in the attached regimes table.",
        [
            "Claim",
            "Comm/compute: paper",
            "ours",
            "Bandwidth share: paper",
            "ours",
            "Density: paper",
            "ours",
            "Workers: paper",
            "ours",
        ],  # fmt: skip
        rows,
        widths=["auto"] + [1] * 8,
        align=["left"] + ["right"] * 8,
        breakable=True,
    )


def regimes_frame(claims: pd.DataFrame) -> pd.DataFrame:
    """Every claim's regime, field by field, as numbers: the attached ``regimes`` table."""
    rows = []
    for r in claims.itertuples(index=False):
        for f in _fields(r).values():
            rows.append(
                {
                    "paper": r.paper,
                    "claim": r.claim,
                    "field": f["field"],
                    "unit": f.get("unit", ""),
                    "paper_value": f.get("theirs"),
                    "paper_status": f.get("status", "unknown"),
                    "paper_source": f.get("note") or "",
                    "ours": f.get("ours"),
                    "ours_over_paper": f.get("ratio"),
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "paper", "claim", "field", "unit", "paper_value", "paper_status", "paper_source",
            "ours", "ours_over_paper",
        ],
    )  # fmt: skip


def _val(v: Any, unit: str = "") -> str:
    if isinstance(v, list):  # several values: the paper does not pin which one applies
        return " or ".join(f"{x:g}" if isinstance(x, int | float) else str(x) for x in v)
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if unit == "s":
        return fmt_seconds(float(v))
    if float(v).is_integer() and abs(v) >= 1:
        return f"{int(v):,}"
    return sig(float(v))
