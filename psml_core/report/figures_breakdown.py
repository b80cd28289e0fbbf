"""The breakdown figure: where each worker's time goes (compute, codec, communication, wait)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.patches import Patch

from psml_core.report.figures import (
    BAR_PANEL_IN,
    FigureSpec,
    bar_axes,
    bar_panels,
    pack_panels,
    part_caption,
)
from psml_core.report.format import clock_phrase, fmt_seconds
from psml_core.report.style import HALF_WIDTH_IN, TEXT_WIDTH_IN, palette, report_style, save_svg

__all__ = [
    "breakdown_figure",
]

_BREAKDOWN_ROW_IN = 0.135  # one method · scenario
_BREAKDOWN_HALF_CHARS = 40  # longest "method · scenario" label that fits a half-width panel


_PARTS = (
    ("compute_s", "compute"),
    ("codec_s", "codec"),
    ("comm_s", "communication"),
    ("wait_s", "wait"),
)


def breakdown_figure(runs: pd.DataFrame, workdir: Path) -> list[FigureSpec]:
    """Share of worker time in compute / codec / communication / wait, per method · scenario.

    One bar per method · scenario: each part's mean over seeds. Written to
    ``fig_breakdown_<k>.svg``, as many as needed to fit the pages.
    """
    keys = ["workload", "method", "scenario"]
    means = runs.groupby(keys, as_index=False, sort=True)[[c for c, _ in _PARTS]].mean()
    items = [(str(r.workload), r) for r in means.itertuples(index=False)]
    # Half-width panels, one per figure, go side by side where the labels are short enough.
    half = max(len(f"{r.method} · {r.scenario}") for _, r in items) <= _BREAKDOWN_HALF_CHARS
    packed = bar_panels(items, _BREAKDOWN_ROW_IN)
    figures = _columns([p for group in packed for p in group]) if half else packed
    specs = []
    for k, panels in enumerate(figures, start=1):
        path = workdir / f"fig_breakdown_{k}.svg"
        _draw_breakdown(panels, path, half)
        specs.append(
            FigureSpec(
                path.name,
                "Where the workers' time went: shares of compute, codec (encoding and decoding "
                "on the worker's device), communication and wait (blocked by the sync policy), "
                "summed over workers, mean over seeds; after each bar that sum in "
                f"{clock_phrase(runs['clock'])} time."
                + part_caption(k, len(figures), [w for w, _ in panels]),
                f"fig-breakdown-{k}",
                0.5 if half else 1.0,
            )
        )
    return specs


def _columns(panels: list[tuple[str, list]]) -> list[list[tuple[str, list]]]:
    """Half-width panels stacked into columns no taller than the tallest panel, in order."""
    sizes = [BAR_PANEL_IN + _BREAKDOWN_ROW_IN * len(rows) for _, rows in panels]
    return [[panels[i] for i in group] for group in pack_panels(sizes, max(sizes, default=0.0))]


def _draw_breakdown(panels: Sequence[tuple[str, list]], path: Path, half: bool = False) -> None:
    colours = palette(len(_PARTS))
    with report_style():
        fig, axes = bar_axes(panels, _BREAKDOWN_ROW_IN, HALF_WIDTH_IN if half else TEXT_WIDTH_IN)
        for ax, (w, rows) in zip(axes, panels, strict=True):
            _stacked(ax, pd.DataFrame(rows), colours)
            ax.set_title(w)
            if half:
                ax.tick_params(axis="y", labelsize=6)
        handles = [Patch(color=c, label=n) for c, (_, n) in zip(colours, _PARTS, strict=True)]
        fig.legend(
            handles=handles,
            loc="outside lower center",
            ncol=2 if half else len(_PARTS),
            frameon=False,
        )
        save_svg(fig, path)


def _stacked(ax: Axes, sub: pd.DataFrame, colours: Sequence) -> None:
    labels = [f"{r.method} · {r.scenario}" for r in sub.itertuples()]
    parts = sub[[c for c, _ in _PARTS]].to_numpy(dtype=float)
    totals = parts.sum(axis=1)
    shares = np.divide(
        parts * 100, totals[:, None], out=np.zeros_like(parts), where=totals[:, None] > 0
    )
    y = np.arange(len(sub))
    left = np.zeros(len(sub))
    for k, colour in enumerate(colours):
        ax.barh(y, shares[:, k], left=left, color=colour, height=0.7)
        left += shares[:, k]
    for yi, total in zip(y, totals, strict=True):
        ax.text(101, yi, fmt_seconds(total), va="center", ha="left", fontsize=6.5)
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of worker time (%)")
    ax.grid(axis="y", visible=False)
