"""The report's regime maps: each mapped claim's effect along its axis, and where it holds.

Reads ``regime_map.parquet`` (:mod:`psml_core.analysis.regime_map`): one figure per map
experiment, the factor by which the method beats its strongest fixed baseline (``exp(gain)``:
a speed-up, or bytes saved as baseline / ours) against the axis, with each claim's reported
factor dashed in the same colour; the sentence per claim saying where it holds; and the points
as a table.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import FuncFormatter, NullFormatter

from psml_core.analysis.regime_map import map_statements
from psml_core.report.figures import log_locator, scale_sentence
from psml_core.report.style import TEXT_WIDTH_IN, palette, report_style, save_svg

__all__ = ["regime_map_section"]

_MARKERS = {
    "reproduced": "o",
    "exceeded": "^",
    "partial": "s",
    "miss": "x",
    "better": "o",
    "not better": "x",
    "indication": "d",
}


def _figure(name: str, grp: pd.DataFrame, workdir: Path) -> dict[str, str]:
    path = workdir / f"fig_regime_{name}.svg"
    claims = sorted(set(grp["claim"]))
    colours = palette(max(len(claims), 2))
    axis = str(grp["axis"].iloc[0])
    label = str(grp["axis_label"].iloc[0])
    with report_style():
        fig, ax = plt.subplots(figsize=(TEXT_WIDTH_IN, 2.9))
        for colour, cid in zip(colours, claims, strict=False):
            sub = grp[grp["claim"] == cid].sort_values("x")
            ax.plot(sub["x"], sub["factor"], color=colour, lw=1.2, label=cid)
            for cls, marker in _MARKERS.items():
                pts = sub[sub["cls"] == cls]
                if len(pts):
                    ax.scatter(pts["x"], pts["factor"], color=colour, marker=marker, s=22, zorder=3)
            rep = sub["reported_factor"].dropna()
            if len(rep) and math.isfinite(float(rep.iloc[0])):
                ax.axhline(float(rep.iloc[0]), color=colour, ls="--", lw=0.8)
        ax.axhline(1.0, color="0.4", lw=0.6)
        if axis == "comm_compute":
            ax.set_xscale("log")
        elif axis == "workers":
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted(set(grp["x"])), [f"{x:g}" for x in sorted(set(grp["x"]))])
        ax.set_yscale("log")
        # Plain numbers at round values over the factors drawn.
        ax.yaxis.set_major_locator(log_locator(*ax.get_ylim()))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(label)
        ax.set_ylabel("baseline / method (x better)")
        # Beside the axes: inside, the legend would hide the dashed reported factors.
        ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        fig.tight_layout()
        scale = scale_sentence({label: [ax.xaxis], "factor": [ax.yaxis]})
        save_svg(fig, path)
        plt.close(fig)
    return {
        "file": path.name,
        "caption": (
            f"Regime map {name}: how many times better each claim's method does than the "
            "strongest of its named comparator's recipes that the map runs, on the claim's "
            f"first metric (baseline / ours, mean over seeds; above 1 is better), against "
            f"{label}. Dashed: the paper's reported effect. Markers: circle reproduced (within "
            "tolerance) or, for a claim of a direction only, better by more than 1%; triangle "
            "exceeded; square partial; cross miss or not better; diamond an indication only "
            "(fewer than 2 seeds). A point holds only with 2 or more seeds, each clearing the "
            f"partial floor on its own. Simulated time. {scale}"
        ),
        "label": f"fig-regime-{name.replace('_', '-')}",
    }


def regime_map_section(rows: pd.DataFrame, workdir: Path) -> dict[str, Any]:
    """The template's regime map section (empty lists without maps)."""
    if rows.empty:
        return {"intro": "", "figures": [], "statements": [], "tables": []}
    figures = [_figure(str(n), g, workdir) for n, g in rows.groupby("experiment", sort=True)]
    said = map_statements(rows)
    return {
        "intro": (
            "Where a paper does not give the regime its claim was made in, one fixed scenario "
            "cannot tell the method's effect from the setup's. Each map below sweeps the axis "
            "that decides a claim (the dense baseline's comm/compute through the link's "
            "bandwidth, the number of workers, or the delay variation) and measures the claim "
            "at every point as its verdict is measured (its method against its named "
            "comparator's recipes the map runs, the strongest of them, its first metric, "
            "censoring included, diverged baselines left out). A point holds only with 2 or "
            "more seeds, each of which clears the partial floor on its own; a point with one "
            "seed is an indication only. The ranges are evidence about where a claim can hold, "
            "not verdicts."
        ),
        "figures": figures,
        "statements": [{"claim": k, "text": v} for k, v in sorted(said.items())],
        # Every point, with its factor and class, is attached as data_regime_map.csv.
        "tables": [],
    }
