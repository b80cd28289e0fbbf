"""Figures of how a method learns: test accuracy against time per scenario, and the ratio.

Each function draws one kind of figure over the runs of one experiment and returns its
:class:`~psml_core.report.figures.FigureSpec` list. Time axes name their clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from psml_core.report.figure_layout import (
    line_figures,
    method_handles,
    method_styles,
    panel_labels,
    per_group,
    per_iteration,
    present_methods,
    run_panels,
    seeds_phrase,
)
from psml_core.report.figures import (
    LOG_SPAN,
    FigureSpec,
    log_axis,
    part_caption,
    spans_decades,
)
from psml_core.report.format import clock_phrase

__all__ = [
    "accuracy_by_scenario_figure",
    "ratio_figure",
]


_TARGET_STYLE: dict[str, Any] = {"color": "0.35", "linestyle": (0, (4, 2)), "linewidth": 0.9}


def accuracy_by_scenario_figure(
    curve: pd.DataFrame, runs: pd.DataFrame, methods: Sequence[str], workdir: Path, stem: str
) -> list[FigureSpec]:
    """Test accuracy against time, a panel per workload · scenario, a line per method.

    More than :data:`MAX_SERIES` methods are split into groups, one set of figures each
    (:func:`method_groups`), so that no panel has more lines than a reader can tell apart.

    Args:
        curve: :func:`psml_core.report.figures.curves` of exactly these runs.
        runs: The experiment's runs.
        methods: The experiment's methods, in order (their colours).
        workdir: Directory of the SVG files.
        stem: File stem: ``fig_<stem>_<k>.svg`` (``fig_<stem>_g<i>_<k>.svg`` per group).
    """
    return per_group(
        present_methods(methods, runs),
        stem,
        lambda group, name, part: _accuracy_group(curve, runs, group, workdir, name, part),
    )


def _accuracy_group(
    curve: pd.DataFrame,
    runs: pd.DataFrame,
    methods: Sequence[str],
    workdir: Path,
    stem: str,
    part: str,
) -> list[FigureSpec]:
    styles = method_styles(methods)
    acc = curve[curve["kind"] == "test_accuracy"]
    targets = {
        str(w): float(t) for w, t in runs.groupby("workload")["target_accuracy"].first().items()
    }
    clock = clock_phrase(acc["clock"]) if len(acc) else clock_phrase(runs["clock"])

    def draw(ax: Axes, w: str, s: str) -> None:
        panel = acc[(acc["workload"] == w) & (acc["scenario"] == s)]
        for m in methods:
            d = panel[panel["method"] == m].sort_values("iteration")
            if d.empty:
                continue
            ax.plot(d["time_s"], d["mean"], label=m, linewidth=1.2, **styles[m])
            if (d["n"] > 1).any():
                ax.fill_between(
                    d["time_s"], d["lo"], d["hi"], color=styles[m]["color"], alpha=0.15, linewidth=0
                )
        ax.axhline(targets[w], **_TARGET_STYLE)
        if spans_decades(panel["time_s"]):
            log_axis(ax.xaxis, ax.set_xscale, panel["time_s"])
        ax.set_xlabel(f"{clock_phrase(panel['clock']) if len(panel) else clock} time (s)")
        ax.set_ylabel("test accuracy")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0%}"))

    legend = [
        *method_handles(styles, methods),
        Line2D([], [], label="target accuracy", **_TARGET_STYLE),
    ]

    def caption(k: int, n: int, chunk: Sequence[tuple[str, str]]) -> str:
        return (
            f"Test accuracy of the global model against {clock} time, one line per method "
            f"({seeds_phrase(runs)}); dashed: the target accuracy, which defines time to "
            f"target. Logarithmic time axis where times span over {LOG_SPAN:g}x."
            f"{part}{part_caption(k, n, [f'{w} · {s}' for w, s in chunk])}"
        )

    return line_figures(run_panels(runs), stem, workdir, draw, legend, caption)


# --------------------------------------------------------------------------- ratio (DC2)


def ratio_figure(
    runs: pd.DataFrame,
    metrics: Mapping[str, pd.DataFrame],
    methods: Sequence[str],
    workdir: Path,
    stem: str,
) -> list[FigureSpec]:
    """Compression ratio in force per iteration (mean over workers and seeds), per method.

    More than :data:`MAX_SERIES` methods are split into groups (:func:`method_groups`).
    """
    data = per_iteration(runs, metrics, "ratio")
    return per_group(
        present_methods(methods, runs),
        stem,
        lambda group, name, part: _ratio_group(runs, data, group, workdir, name, part),
    )


def _ratio_group(
    runs: pd.DataFrame,
    data: pd.DataFrame,
    methods: Sequence[str],
    workdir: Path,
    stem: str,
    part: str,
) -> list[FigureSpec]:
    styles = method_styles(methods)
    log = spans_decades(data["mean"])

    def draw(ax: Axes, w: str, s: str) -> None:
        panel = data[(data["workload"] == w) & (data["scenario"] == s)]
        for m in methods:
            d = panel[panel["method"] == m]
            if not d.empty:
                ax.plot(d["iteration"], d["mean"], linewidth=1.2, **styles[m])
        if log:
            log_axis(ax.yaxis, ax.set_yscale, panel["mean"])
        ax.set_xlabel("iteration")
        ax.set_ylabel("compression ratio (1 = dense)")

    def caption(k: int, n: int, chunk: Sequence[tuple[str, str]]) -> str:
        return (
            "Compression ratio in force at each iteration (the share of the update sent; 1 is "
            "dense), mean over workers and seeds, one panel per workload · scenario: an adaptive "
            "controller moves it with the measured delay, a fixed ratio stays flat."
            + (" Logarithmic axis." if log else "")
            + part
            + part_caption(k, n, panel_labels(chunk))
        )

    return line_figures(
        run_panels(runs), stem, workdir, draw, method_handles(styles, methods), caption
    )


# --------------------------------------------------------------------------- horizontal bars
