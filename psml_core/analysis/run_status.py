"""Runs that diverged, as claims see them: never a baseline, and named where left out."""

from __future__ import annotations

from typing import Any

import pandas as pd

__all__ = ["as_list", "diverged_note", "diverged_runs", "usable_baselines"]


def as_list(value: Any) -> list[str]:
    """A claim's recipe field (a name, a list, or None) as a list of names."""
    return [value] if isinstance(value, str) else [v for v in (value or []) if v]


def diverged_runs(runs: pd.DataFrame, method: str, scenarios: list[str]) -> pd.DataFrame:
    """The runs of ``method`` under ``scenarios`` marked DIVERGED (``status`` of runs.csv)."""
    if "status" not in runs:
        return runs.iloc[0:0]
    sel = runs[(runs["method"] == method) & runs["scenario"].isin(scenarios)]
    return sel[sel["status"] == "diverged"]


def diverged_note(rows: pd.DataFrame, who: str) -> str:
    """The note "<who> diverged in seeds 0, 2 (<the first run's reason>)"."""
    seeds = sorted({int(s) for s in rows["seed"]})
    reason = str(rows["status_reason"].iloc[0]) if "status_reason" in rows else ""
    text = f"{who} diverged in seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"
    return f"{text} ({reason})" if reason else text


def usable_baselines(
    runs: pd.DataFrame, baselines: list[str], scenarios: list[str]
) -> tuple[list[str], list[str]]:
    """``(the baselines with no diverged run, a note per diverged one)``."""
    keep, notes = [], []
    for b in baselines:
        bad = diverged_runs(runs, b, scenarios)
        if bad.empty:
            keep.append(b)
        else:
            notes.append(diverged_note(bad, f"baseline {b}"))
    return keep, notes
