"""The synchronization figure: where each method's time goes (compute, communication, waiting)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.ticker import FuncFormatter

from psml_core.analysis.gains import metric_values
from psml_core.report.figure_layout import (
    BAR_IN,
    LINE_ROW_IN,
    PANEL_IN,
    method_styles,
    per_iteration,
    present_methods,
    seed_means,
)
from psml_core.report.figures import (
    FigureSpec,
)
from psml_core.report.format import fmt_percent, sig
from psml_core.report.style import TEXT_WIDTH_IN, report_style, save_svg

__all__ = [
    "sync_figure",
]


def _sync_stats(runs: pd.DataFrame, metrics: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    rows = []
    wait = metric_values(runs, "wait_fraction").to_numpy(dtype=float)
    for r, wf in zip(runs.itertuples(index=False), wait, strict=True):
        m = metrics[str(r.run_id)]
        rows.append(
            {
                "workload": r.workload,
                "method": r.method,
                "scenario": r.scenario,
                "wait_fraction": wf,
                "staleness_mean": float(m["staleness"].mean()),
                "staleness_max": float(m["staleness"].max()),
            }
        )
    return pd.DataFrame(rows)


def sync_figure(
    runs: pd.DataFrame,
    metrics: Mapping[str, pd.DataFrame],
    methods: Sequence[str],
    round_methods: Sequence[str],
    workdir: Path,
    stem: str,
) -> list[FigureSpec]:
    """Wait-time fraction and staleness per method, and local steps per round.

    Args:
        runs: The experiment's runs.
        metrics: Run id -> metrics.
        methods: The experiment's methods, in order.
        round_methods: Methods whose records are rounds of several local steps (PCP): their
            local steps per round get a panel of their own.
        workdir: Directory of the SVG files.
        stem: File stem.
    """
    methods = present_methods(methods, runs)
    styles = method_styles(methods)
    stats = _sync_stats(runs, metrics)
    means = seed_means(
        stats,
        ["workload", "method", "scenario"],
        ["wait_fraction", "staleness_mean", "staleness_max"],
    )
    means["label"] = [
        f"{m} · {s}" if len(set(means["scenario"])) > 1 else m
        for m, s in zip(means["method"], means["scenario"], strict=True)
    ]
    rank = {m: i for i, m in enumerate(methods)}
    means["rank"] = [rank.get(str(m), len(rank)) for m in means["method"]]
    means = means.sort_values(["workload", "rank", "scenario"], kind="stable")
    rounds = [m for m in methods if m in set(round_methods)]
    steps = per_iteration(runs[runs["method"].isin(rounds)], metrics, "local_steps")
    specs = []
    for k, w in enumerate(sorted(set(means["workload"].astype(str))), start=1):
        sub = means[means["workload"] == w]
        order = list(dict.fromkeys(sub["label"]))
        colours = [styles[str(m)]["color"] for m in sub["method"]]  # one per bar (row)
        bar_h = PANEL_IN + BAR_IN * 1.4 * len(order)
        line_h = LINE_ROW_IN if rounds else 0.0
        path = workdir / f"fig_{stem}_{k}.svg"
        with report_style():
            fig = plt.figure(layout="constrained", figsize=(TEXT_WIDTH_IN, bar_h + line_h + 0.2))
            grid = fig.add_gridspec(
                2 if rounds else 1, 2, height_ratios=[bar_h, line_h] if rounds else [bar_h]
            )
            _wait_and_staleness(fig, grid, w, sub, order, colours)
            if rounds:
                _local_steps(fig.add_subplot(grid[1, :]), w, rounds, steps, styles)
            save_svg(fig, path)
        specs.append(
            FigureSpec(
                path.name,
                f"Synchronization cost on {w}, per method (mean over seeds; bars in the order of "
                "the experiment's methods). Left: share of the workers' time blocked by the sync "
                "policy. Right: staleness, the clock distance to the slowest worker when a worker "
                "proceeded, mean over iterations and workers (bar) and maximum (tick), printed as "
                "“mean (max m)”."
                + (
                    " Below: local steps a round policy granted per round, mean over workers "
                    "and seeds, against the round index."
                    if rounds
                    else ""
                ),
                f"fig-{stem.replace('_', '-')}-{k}",
            )
        )
    return specs


def _wait_and_staleness(
    fig: Any, grid: Any, w: str, sub: pd.DataFrame, order: list[str], colours: list[Any]
) -> None:
    """The top row: time blocked by the sync policy (left), staleness (right)."""
    ax_wait, ax_stale = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
    _sync_bars(ax_wait, sub, order, colours, "wait_fraction", fmt_percent)
    ax_wait.set(
        title=f"{w}: time blocked by the sync policy",
        xlabel="wait / (compute + codec + comm + wait)",
    )
    ax_wait.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0%}"))
    _sync_bars(ax_stale, sub, order, colours, "staleness_mean", None)
    _staleness_max(ax_stale, sub, order)
    ax_stale.set(title=f"{w}: staleness (iterations)", xlabel="mean (bar), maximum (|)")
    ax_stale.set_yticklabels([])


def _staleness_max(ax: Axes, sub: pd.DataFrame, order: Sequence[str]) -> None:
    """The maximum as a tick joined to its mean's bar; the label "mean (max m)" after the tick.

    The label sits right of the tick, so neither is drawn over the other, however close the
    mean and the maximum are.
    """
    by = sub.set_index("label").loc[list(order)]
    mean = by["staleness_mean"].to_numpy(dtype=float)
    most = by["staleness_max"].to_numpy(dtype=float)
    y = np.arange(len(order))
    ax.hlines(y, np.nan_to_num(mean), np.nan_to_num(most), color="0.2", linewidth=0.6)
    ax.scatter(most, y, marker="|", s=60, color="0.2", zorder=3, label="maximum")
    for yi, m, top in zip(y, mean, most, strict=True):
        text = f"{sig(m, 2)} (max {sig(top, 2)})" if math.isfinite(m) else "–"
        at = top if math.isfinite(top) else 0.0
        ax.annotate(text, (at, yi), xytext=(6, 0), textcoords="offset points", va="center",
                    fontsize=6.5)  # fmt: skip
    top = float(np.nanmax(np.r_[most, mean, 1.0]))
    # Room for the longest label ("8.4 (max 35)") right of the largest maximum.
    ax.set_xlim(0, top * 1.6)


def _local_steps(
    ax: Any, w: str, rounds: list[str], steps: pd.DataFrame, styles: Mapping[str, Any]
) -> None:
    """The bottom row: local steps a round policy granted per round."""
    for m in rounds:
        d = steps[(steps["workload"] == w) & (steps["method"] == m)]
        for s, ds in d.groupby("scenario", sort=True):
            label = m if len(set(d["scenario"])) == 1 else f"{m} · {s}"
            ax.plot(ds["iteration"], ds["mean"], linewidth=1.2, label=label, **styles[m])
    ax.set(
        title=f"{w}: local steps granted per round (mean over workers and seeds)",
        xlabel="round",
        ylabel="local steps",
    )
    ax.legend(frameon=False, fontsize=7)


def _sync_bars(
    ax: Axes,
    sub: pd.DataFrame,
    order: Sequence[str],
    colours: Sequence[Any],
    column: str,
    fmt: Callable[[float], str] | None,
) -> None:
    """Bars of ``column`` per label, each labelled with ``fmt`` of its value (None: unlabelled)."""
    y = np.arange(len(order))
    values = sub.set_index("label").loc[list(order), column].to_numpy(dtype=float)
    bars = ax.barh(y, np.nan_to_num(values), color=list(colours), height=0.7)
    if fmt is not None:
        labels = [fmt(v) if math.isfinite(v) else "–" for v in values]
        ax.bar_label(bars, labels=labels, padding=2, fontsize=6.5)
    ax.set_yticks(y, list(order))
    ax.invert_yaxis()
    top = float(np.nanmax(values)) if np.isfinite(values).any() else 1.0
    ax.set_xlim(0, max(top, 1e-12) * 1.3)
    ax.grid(axis="y", visible=False)


# --------------------------------------------------------------------------- placement (jpdc)
