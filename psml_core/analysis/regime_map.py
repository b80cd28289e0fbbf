"""Regime maps: each claim's effect along the axis that decides it, and where the claim holds.

Where a paper does not say its regime, a single fixed scenario cannot tell whether a miss is
the method's or the setup's. A *regime map* is an experiment (``regime_map:`` in the tier) that
sweeps the deciding axis, usually with one seed:

* ``comm_compute``: the link's bandwidth (a ``scenario_sweep``); the x value of a point is the
  reference dense method's measured communication-to-computation ratio there;
* ``workers``: the number of workers (a ``workload_sweep`` of ``workers``);
* ``locality``: the data's locality (a ``workload_sweep`` of ``dataset`` over data sets that
  differ in their planted communities' share ``lambda``): the data set's ``locality``;
* anything else, e.g. ``delay_variation``: the swept value itself (the largest entry of a
  list, such as a Markov chain's competing flows).

At every point each listed claim is measured as its verdict is (:mod:`.claims`): its own
method against those of its named comparator's recipes the map runs, on its first metric,
paired by seed, against the strongest of them, censoring included; a baseline that diverged
at the point is left out. Each point is classed on the claim's mean log gain ``g``:
*reproduced* (``|g - g_rep| <= log(1 + tolerance)``), *exceeded* (above that band), *partial*
(at least the partial floor), *miss* (below it, or the method never held its target, or
diverged). A qualitative claim is mapped on its first metric only (``g > 0``; its verdict
needs every listed metric). A point **holds** (any class but miss) only with at least
:data:`MIN_MAP_SEEDS` seeds, each of which clears the partial floor on its own (is better, for
a qualitative claim); a point with fewer seeds is an *indication* only, whatever its mean.
:func:`map_statements` turns the classes into the range in which the claim holds ("reaches
the reported effect for comm/compute 11-120; partial at 3.7; missed at 0.14-1.2"), which the
claims table prints beside the fixed-scenario verdict.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from psml_core.analysis.gains import effect_to_gain, metric_values, pair_gains
from psml_core.analysis.run_status import as_list, diverged_runs, usable_baselines

__all__ = [
    "MAP_COLUMNS",
    "MIN_GAIN",
    "MIN_MAP_SEEDS",
    "fmt_x",
    "holds_anywhere",
    "map_rows",
    "map_statements",
    "map_summaries",
]

MAP_COLUMNS = [
    "experiment", "axis", "axis_label", "point", "x", "paper", "claim", "kind", "method",
    "baseline", "metric", "seeds", "gain", "factor", "reported_factor", "bound", "cls",
]  # fmt: skip
"""Columns of ``regime_map.parquet``: one row per (map, point, claim), against the strongest."""

_AXIS_LABELS = {
    "comm_compute": "dense comm / compute",
    "workers": "workers",
    "locality": "locality lambda",
}
_TIERS = ("reproduced", "exceeded", "partial", "miss", "better", "not better", "indication")
MIN_MAP_SEEDS = 2
"""Seeds a map point needs before it can hold (one seed has no spread to trust)."""
MIN_GAIN = math.log(1.01)
"""A qualitative claim's point counts as better only by more than 1% (one seed has no spread)."""


def _points(ex: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """(kind, derived name, swept value) of every point of the map, in sweep order."""
    for kind, key in (("scenario", "scenario_sweep"), ("workload", "workload_sweep")):
        sweep = ex.get(key)
        if not sweep:
            continue
        values = list(sweep["values"])
        labels = list(sweep.get("labels") or [])
        if len(labels) != len(values):  # default labels, as the config derives them
            from psml_core.config import sweep_label

            labels = [sweep_label(sweep["params"][0], v) for v in values]
        return [(kind, f"{sweep['base']}__{lab}", v) for v, lab in zip(values, labels, strict=True)]
    return []


def _find_claim(papers: dict[str, dict[str, Any]], cid: str) -> tuple[str, dict[str, Any]] | None:
    for pid, paper in papers.items():
        for claim in paper["claims"]:
            if claim["id"] == cid:
                return pid, claim
    return None


def _classify(claim: dict[str, Any], metric: str, gain: float, bound: str) -> tuple[str, float]:
    rep = claim["reported"]
    if rep["kind"] == "qualitative":  # a direction only: better (by a clear margin) or not
        return ("better" if gain > MIN_GAIN else "not better"), math.nan
    tol = claim.get("tolerance", {})
    g_rep = effect_to_gain(rep["kind"], metric, float(rep["value"]))
    width = math.log(1.0 + float(tol.get("reproduced", 0.25)))
    floor = float(tol.get("partial", 0.5)) * g_rep
    if bound in ("at most", "unknown") or not math.isfinite(gain):
        return "miss", g_rep
    if abs(gain - g_rep) <= width:
        return "reproduced", g_rep
    if gain > g_rep + width:
        return "exceeded", g_rep
    if gain >= floor and g_rep > 0:
        return "partial", g_rep
    return "miss", g_rep


def _point_class(claim: dict[str, Any], metric: str, g: Any, bound: str) -> tuple[str, float]:
    """The point's class from its mean, held back to *indication* or *miss* by its seeds."""
    cls, g_rep = _classify(claim, metric, g.mean, bound)
    if cls in ("miss", "not better"):
        return cls, g_rep
    if len(g.seeds) < MIN_MAP_SEEDS:
        return "indication", g_rep
    each = [_classify(claim, metric, float(x), b)[0] for x, b in zip(g.gains, g.bound, strict=True)]
    if any(c in ("miss", "not better") for c in each):
        return ("not better" if claim["reported"]["kind"] == "qualitative" else "miss"), g_rep
    return cls, g_rep


def map_rows(
    papers: dict[str, dict[str, Any]], runs: pd.DataFrame, config: dict[str, Any]
) -> pd.DataFrame:
    """Every regime map's points, one row per (map, point, claim); empty without maps.

    Args:
        papers: :func:`psml_core.analysis.claims.load_papers`.
        runs: The runs table.
        config: The effective config (its ``experiments``, with their sweeps and ``regime_map``).
    """
    rows: list[dict[str, Any]] = []
    for name, ex in sorted((config.get("experiments") or {}).items()):
        rmap = ex.get("regime_map")
        if not rmap:
            continue
        axis = rmap["axis"]
        label = rmap.get("label") or _AXIS_LABELS.get(axis, axis.replace("_", " "))
        mine = runs[runs["method"].isin(ex["methods"])]
        for kind, point, value in _points(ex):
            col = "scenario" if kind == "scenario" else "workload"
            at = mine[mine[col] == point]
            if kind == "workload" and ex.get("scenarios"):
                at = at[at["scenario"].isin(ex["scenarios"])]
            if kind == "scenario" and ex.get("workloads"):
                at = at[at["workload"].isin(ex["workloads"])]
            if at.empty:
                continue
            if axis == "comm_compute":
                ref = at[at["method"] == rmap.get("reference", "dense_bsp")]
                x = float(metric_values(ref, "comm_compute_ratio").mean()) if len(ref) else None
            elif axis == "workers":
                x = float(pd.to_numeric(at["workers"]).iloc[0])
            elif axis == "locality":  # a workload sweep over data sets: their lambda
                ds = (config.get("datasets") or {}).get(str(value)) or {}
                x = float(ds.get("locality") or 0.0)
            else:
                x = float(max(value) if isinstance(value, list | tuple) else value)
            for cid in rmap["claims"]:
                found = _find_claim(papers, cid)
                if found is None:
                    continue
                pid, claim = found
                meas = claim["measure"]
                metric = meas["metrics"][0]
                base = [b for b in as_list(meas.get("baseline")) if b in ex["methods"]]
                sc_all = sorted(set(at["scenario"]))
                base, _ = usable_baselines(at, base, sc_all)
                options = []
                for sc in sc_all:
                    m = {**meas, "workload": None}
                    for b in base:
                        got = pair_gains(at, m, metric, b, sc)
                        if got is not None and got.gains.size:
                            options.append(got)
                if not options:
                    continue
                g = min(options, key=lambda o: o.mean if math.isfinite(o.mean) else -math.inf)
                bound = "/".join(sorted({b for b in g.bound if b}))
                cls, g_rep = _point_class(claim, metric, g, bound)
                if not diverged_runs(at, meas["method"], sc_all).empty:
                    cls = "not better" if claim["reported"]["kind"] == "qualitative" else "miss"
                    bound = "/".join(filter(None, [bound, "diverged"]))
                rows.append(
                    {
                        "experiment": name, "axis": axis, "axis_label": label, "point": point,
                        "x": x, "paper": pid, "claim": cid, "kind": claim["reported"]["kind"],
                        "method": meas["method"], "baseline": g.baseline, "metric": metric,
                        "seeds": len(g.seeds), "gain": g.mean,
                        "factor": math.exp(g.mean) if math.isfinite(g.mean) else math.nan,
                        "reported_factor": math.exp(g_rep) if math.isfinite(g_rep) else math.nan,
                        "bound": bound, "cls": cls,
                    }
                )  # fmt: skip
    return pd.DataFrame(rows, columns=MAP_COLUMNS)


def _ranges(xs: list[float]) -> str:
    return ", ".join(f"{x:.3g}" for x in xs)


def fmt_x(x: float) -> str:
    """An axis value as the report prints it (integers without a decimal point)."""
    return f"{int(x)}" if float(x).is_integer() else f"{x:.3g}"


def map_statements(rows: pd.DataFrame) -> dict[str, str]:
    """Claim id -> where it holds along each map that answers it (one sentence per map)."""
    out: dict[str, list[str]] = {}
    if rows.empty:
        return {}
    for (claim, exp), grp in rows.groupby(["claim", "experiment"], sort=True):
        grp = grp.sort_values("x")
        label = str(grp["axis_label"].iloc[0])
        seeds = int(grp["seeds"].max())
        qual = grp["kind"].iloc[0] == "qualitative"
        by = {c: [float(x) for x in grp.loc[grp["cls"] == c, "x"]] for c in _TIERS}
        lo, hi = float(grp["x"].min()), float(grp["x"].max())
        head = (
            f"On map {exp} ({label} {lo:.3g} to {hi:.3g}, {len(grp)} points, "
            f"{seeds} seed{'s' if seeds != 1 else ''}): "
        )
        if qual:
            metric = str(grp["metric"].iloc[0])
            parts = [
                f"better by more than 1% on {metric} than the strongest baseline at {label} "
                f"{_ranges(by['better'])}"
                if by["better"]
                else f"better by more than 1% on {metric} than the strongest baseline nowhere",
            ]
            if by["not better"]:
                parts.append(f"not at {_ranges(by['not better'])}")
            if by["indication"]:
                parts.append(
                    f"better in an indication only (fewer than {MIN_MAP_SEEDS} seeds) at "
                    f"{_ranges(by['indication'])}"
                )
        else:
            parts = []
            for cls, words in (
                ("reproduced", "reaches the reported effect"),
                ("exceeded", "exceeds it"),
                ("partial", "clears only the partial floor"),
                ("miss", "misses"),
                ("indication", f"holds in an indication only (fewer than {MIN_MAP_SEEDS} seeds)"),
            ):
                if by[cls]:
                    parts.append(f"{words} at {label} {_ranges(by[cls])}")
            if not by["reproduced"] and not by["exceeded"]:
                parts.insert(0, "reaches the reported effect nowhere in the range")
        censored = grp[grp["bound"].str.contains("at most", na=False)]
        if len(censored):
            parts.append(f"censored (never held the target) at {_ranges(list(censored['x']))}")
        out.setdefault(str(claim), []).append(head + "; ".join(parts))
    return {k: ". ".join(v) for k, v in out.items()}


def _short_axis(label: str) -> str:
    return {"dense comm / compute": "comm/compute"}.get(label, label)


def map_summaries(rows: pd.DataFrame) -> dict[str, str]:
    """Claim id -> one short line per map: where along its axis the claim holds.

    The summary table's form of :func:`map_statements`: "holds at comm/compute 120 of 0.143-120",
    "partial only at workers 8, 16 of 2-16", "misses at all 4 points (workers 2-16)".
    """
    out: dict[str, list[str]] = {}
    if rows.empty:
        return {}
    for (claim, _exp), grp in rows.groupby(["claim", "experiment"], sort=True):
        grp = grp.sort_values("x")
        label = _short_axis(str(grp["axis_label"].iloc[0]))
        span = f"{fmt_x(float(grp['x'].min()))}-{fmt_x(float(grp['x'].max()))}"
        by = {c: [fmt_x(float(x)) for x in grp.loc[grp["cls"] == c, "x"]] for c in _TIERS}
        held = by["reproduced"] + by["exceeded"]
        if grp["kind"].iloc[0] == "qualitative":
            text = (
                f"better at {label} {', '.join(by['better'])} of {span}"
                if by["better"]
                else f"better nowhere on {label} {span}"
            )
        elif held:
            text = f"holds at {label} {', '.join(sorted(held, key=float))} of {span}"
        elif by["partial"]:
            text = f"partial only at {label} {', '.join(by['partial'])} of {span}"
        elif by["indication"]:
            text = (
                f"indication only ({MIN_MAP_SEEDS}+ seeds needed) at {label} "
                f"{', '.join(by['indication'])} of {span}"
            )
        else:
            text = f"misses at all {len(grp)} points of {label} {span}"
        out.setdefault(str(claim), []).append(text)
    return {k: "; ".join(v) for k, v in out.items()}


def holds_anywhere(rows: pd.DataFrame, claim: str) -> bool:
    """Whether the claim reaches (or exceeds) its reported effect at any point of any map."""
    sel = rows[rows["claim"] == claim]
    return bool(np.isin(sel["cls"], ["reproduced", "exceeded", "better"]).any())
