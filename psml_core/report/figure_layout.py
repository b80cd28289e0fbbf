"""What every experiment figure shares: one style per method, panels, line and bar layouts.

One colour and line style per method, the same in every figure of the report (the dense
baseline always dark and solid); a figure too tall for a page is split over several files
(``fig_<stem>_<k>.svg``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator, NullFormatter

from psml_core.report.figures import (
    LEGEND_IN,
    MAX_FIGURE_HEIGHT_IN,
    FigureSpec,
    log_locator,
    pack_panels,
    scale_sentence,
    stacked_axes,
)
from psml_core.report.style import HALF_WIDTH_IN, TEXT_WIDTH_IN, palette, report_style, save_svg

__all__ = [
    "BAR_IN",
    "LINESTYLES",
    "LINE_ROW_IN",
    "MAX_SERIES",
    "PANEL_IN",
    "REFERENCE",
    "SAME_MARKER",
    "bar_figures",
    "coinciding",
    "legend_columns",
    "hbars",
    "line_figures",
    "method_groups",
    "method_handles",
    "method_styles",
    "panel_labels",
    "per_group",
    "per_iteration",
    "present_methods",
    "report_methods",
    "run_panels",
    "seed_means",
    "seeds_phrase",
]


LINE_ROW_IN = 1.75  # one row of line panels
BAR_IN = 0.2  # one bar group (a method) in a horizontal bar panel
PANEL_IN = 0.65  # a bar panel's title and x axis
LINESTYLES = ("-", "--", ":", "-.")


_REPORT_ORDER: ContextVar[tuple[str, ...]] = ContextVar("report_method_order", default=())
REFERENCE = "dense_bsp"
"""The dense baseline: one dark solid line in every figure (the claims are read against it)."""
_REFERENCE_STYLE: dict[str, Any] = {"color": (0.15, 0.15, 0.15), "linestyle": "-"}


@contextlib.contextmanager
def report_methods(order: Sequence[str]) -> Iterator[None]:
    """Give every method one style for the whole report, from its place in ``order``.

    Inside the block :func:`method_styles` draws a method in the same colour and line style in
    every figure (a reader follows it from one experiment to the next); outside it, styles
    follow each figure's own method list.
    """
    token = _REPORT_ORDER.set(tuple(dict.fromkeys(order)))
    try:
        yield
    finally:
        _REPORT_ORDER.reset(token)


def method_styles(methods: Sequence[str]) -> dict[str, dict[str, Any]]:
    """A colour and line style per method: the report-wide one where it is set, else by order.

    The dense baseline (:data:`REFERENCE`) is always dark and solid. Others take the colour-blind
    palette's colours, line styles cycling; under :func:`report_methods` each keeps its
    report-wide style unless another method of the same figure already has it (10 colours x 4
    styles are fewer than a tier's recipes), in which case it takes the next free one.
    """
    colours = palette(10)
    # Slot k: colour k mod 10 and a style that also changes from one slot to the next, so
    # neighbours differ in both (a bijection onto the 40 pairs, as 3 is prime to 4).
    combos = [(k % 10, LINESTYLES[(k + k // 10) % 4]) for k in range(40)]
    # A method's report-wide slot; one outside the order (or no order set) follows the figure's.
    slots = {m: i for i, m in enumerate(m for m in _REPORT_ORDER.get() if m != REFERENCE)}
    local = [m for m in methods if m != REFERENCE]
    taken: set[int] = set()
    out: dict[str, dict[str, Any]] = {}
    for i, m in enumerate(local):
        want = slots.get(m, len(slots) + i) % len(combos)
        while want in taken and len(taken) < len(combos):
            want = (want + 1) % len(combos)
        taken.add(want)
        c, ls = combos[want]
        out[m] = {"color": colours[c], "linestyle": ls}
    if REFERENCE in methods:
        out[REFERENCE] = dict(_REFERENCE_STYLE)
    return {m: out[m] for m in methods}


SAME_MARKER: dict[str, Any] = {
    "marker": "o",
    "markersize": 3.5,
    "markerfacecolor": "none",
    "markeredgewidth": 0.9,
    "zorder": 3,
}
"""A line drawn over another with the same points: hollow circles, on top, so both show."""


def coinciding(lines: Mapping[str, tuple[Any, Any]]) -> dict[str, str]:
    """Which lines repeat an earlier one's points exactly: name -> the first such earlier name.

    ``lines`` maps a name to its (x, y) values, in drawing order. A line drawn on top of an
    identical one hides it whatever its style; the caller marks the repeat (:data:`SAME_MARKER`)
    and says so in the legend.
    """
    seen: list[tuple[str, np.ndarray, np.ndarray]] = []
    out: dict[str, str] = {}
    for name, (x, y) in lines.items():
        xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        for other, ox, oy in seen:
            if (
                xs.shape == ox.shape
                and np.allclose(xs, ox, rtol=1e-9, equal_nan=True)
                and (np.allclose(ys, oy, rtol=1e-9, equal_nan=True))
            ):
                out[name] = other
                break
        else:
            seen.append((name, xs, ys))
    return out


def same_handles(
    styles: Mapping[str, Mapping[str, Any]],
    methods: Sequence[str],
    same: Mapping[str, Mapping[str, str]],
) -> list:
    """Legend handles; a method that repeats another's line in some panel carries the marker.

    ``same`` maps a panel to its :func:`coinciding` result.
    """
    handles = []
    for m in methods:
        if m not in styles:
            continue
        refs = sorted({p[m] for p in same.values() if m in p})
        panels = sum(m in p for p in same.values())
        label, extra = m, {}
        if refs:
            where = "" if panels == len(same) else ", marked ○"
            label = f"{m} (identical to {' / '.join(refs)}{where})"
            extra = {k: v for k, v in SAME_MARKER.items() if k != "zorder"}
        handles.append(Line2D([], [], label=label, linewidth=1.4, **styles[m], **extra))
    return handles


_CHAR_IN = 0.062  # a legend character's mean width at 7.5 pt (DejaVu Sans)
_ENTRY_IN = 0.55  # a legend entry's handle and the padding around it


def legend_columns(handles: Sequence[Any], width_in: float, most: int) -> int:
    """Legend columns that fit ``width_in``: at most ``most``, fewer for long labels.

    A legend wider than its figure widens the saved (tight) figure, and the page then scales
    the whole figure, fonts included, down to the column.
    """
    longest = max((len(str(h.get_label())) for h in handles), default=0)
    fit = int(width_in // (_ENTRY_IN + _CHAR_IN * longest))
    return max(1, min(most, fit, len(handles)))


def run_panels(runs: pd.DataFrame) -> list[tuple[str, str]]:
    """The (workload, scenario) pairs of the runs, sorted."""
    return sorted(
        {(str(w), str(s)) for w, s in zip(runs["workload"], runs["scenario"], strict=True)}
    )


def seeds_phrase(runs: pd.DataFrame) -> str:
    """The caption phrase saying what a line is: one seed, or the mean and band over seeds."""
    n = runs.groupby(["workload", "method", "scenario"]).size()
    lo, hi = int(n.min()), int(n.max())
    if hi == 1:
        return "one seed per line"
    count = f"{lo}" if lo == hi else f"{lo} to {hi}"
    return f"mean over {count} seeds, band from the minimum to the maximum"


def line_figures(
    panels: Sequence[tuple[str, str]],
    stem: str,
    workdir: Path,
    draw: Callable[[Axes, str, str], None],
    legend: Sequence[Any],
    caption: Callable[[int, int, Sequence[tuple[str, str]], str], str],
    nouns: Mapping[str, str],
) -> list[FigureSpec]:
    """Panels two per row, rows packed into figures that fit a page.

    ``caption(k, n, panels, scale)`` gets the sentence on the axes' scales as drawn
    (:func:`scale_sentence`), for the axes ``nouns`` names ("x" or "y" -> "time", ...).
    """
    rows_per_fig = max(1, int((MAX_FIGURE_HEIGHT_IN - LEGEND_IN) // LINE_ROW_IN))
    per_fig = 2 * rows_per_fig
    chunks = [list(panels[i : i + per_fig]) for i in range(0, len(panels), per_fig)]
    specs = []
    for k, chunk in enumerate(chunks, start=1):
        # One panel is drawn for half the text width, to sit beside another figure.
        ncols = 1 if len(chunk) == 1 else 2
        nrows = -(-len(chunk) // ncols)
        width = HALF_WIDTH_IN if ncols == 1 else TEXT_WIDTH_IN
        legend_cols = legend_columns(legend, width, 2 if ncols == 1 else 4)
        legend_rows = -(-len(legend) // legend_cols)
        path = workdir / f"fig_{stem}_{k}.svg"
        with report_style():
            fig, axes = plt.subplots(
                nrows,
                ncols,
                squeeze=False,
                layout="constrained",
                figsize=(width, LINE_ROW_IN * nrows + 0.2 + 0.16 * legend_rows),
            )
            for i, (w, s) in enumerate(chunk):
                ax = axes[i // ncols, i % ncols]
                draw(ax, w, s)
                ax.set_title(f"{w} · {s}")
            for i in range(len(chunk), nrows * ncols):
                axes[i // ncols, i % ncols].set_visible(False)
            fig.legend(
                handles=list(legend),
                loc="outside lower center",
                ncol=legend_cols,
                frameon=False,
            )
            drawn = [ax for ax in axes.flat if ax.get_visible()]
            scale = scale_sentence(
                {noun: [getattr(ax, f"{d}axis") for ax in drawn] for d, noun in nouns.items()}
            )
            save_svg(fig, path)
        specs.append(
            FigureSpec(
                path.name,
                caption(k, len(chunks), chunk, scale),
                f"fig-{stem.replace('_', '-')}-{k}",
                0.5 if ncols == 1 else 1.0,
            )
        )
    return specs


def panel_labels(panels: Sequence[tuple[str, str]]) -> list[str]:
    """One title per (workload, scenario) panel."""
    return [f"{w} · {s}" for w, s in panels]


def method_handles(styles: Mapping[str, Mapping[str, Any]], methods: Sequence[str]) -> list:
    """Legend handles of ``methods`` in their styles."""
    return [Line2D([], [], label=m, linewidth=1.4, **styles[m]) for m in methods if m in styles]


def present_methods(methods: Sequence[str], runs: pd.DataFrame) -> list[str]:
    """The ``methods`` that have runs, in their order."""
    have = set(runs["method"].astype(str))
    return [m for m in methods if m in have]


# --------------------------------------------------------------------------- accuracy


MAX_SERIES = 8
"""At most this many methods share a panel; more are split into groups (figures)."""


def method_groups(methods: Sequence[str], limit: int = MAX_SERIES) -> list[list[str]]:
    """Split ``methods`` into groups of at most ``limit``, in order, each as large as the others.

    The dense reference (``dense_bsp``), when present, is drawn in every group so that each
    panel keeps the same yardstick.
    """
    methods = list(methods)
    if len(methods) <= limit:
        return [methods]
    ref = [m for m in methods if m == REFERENCE]
    rest = [m for m in methods if m != REFERENCE]
    room = limit - len(ref)
    n = -(-len(rest) // room)
    size = -(-len(rest) // n)
    return [ref + rest[i : i + size] for i in range(0, len(rest), size)]


def per_group(
    methods: Sequence[str],
    stem: str,
    draw: Callable[[Sequence[str], str, str], list[FigureSpec]],
) -> list[FigureSpec]:
    """``draw(group, stem, caption part)`` once per :func:`method_groups` group."""
    groups = method_groups(methods)
    if len(groups) == 1:
        return draw(groups[0], stem, "")
    specs: list[FigureSpec] = []
    for i, group in enumerate(groups, start=1):
        part = (
            f" Methods {i} of {len(groups)} groups (at most {MAX_SERIES} lines a panel"
            + (f", {REFERENCE} in each" if REFERENCE in group else "")
            + ")."
        )
        specs += draw(group, f"{stem}_g{i}", part)
    return specs


def per_iteration(
    runs: pd.DataFrame, metrics: Mapping[str, pd.DataFrame], column: str
) -> pd.DataFrame:
    """``column`` per iteration (mean over workers), then mean/min/max over seeds."""
    parts = []
    for r in runs.itertuples(index=False):
        m = metrics[str(r.run_id)]
        g = m.groupby("iteration", sort=True)[column].mean().reset_index(name="value")
        parts.append(g.assign(workload=r.workload, method=r.method, scenario=r.scenario))
    if not parts:
        return pd.DataFrame(
            columns=["workload", "method", "scenario", "iteration", "mean", "lo", "hi", "n"]
        )
    data = pd.concat(parts, ignore_index=True)
    out = data.groupby(["workload", "method", "scenario", "iteration"], sort=True)["value"].agg(
        mean="mean", lo="min", hi="max", n="size"
    )
    return out.reset_index()


def hbars(
    ax: Axes,
    data: pd.DataFrame,
    order: Sequence[str],
    series: Sequence[str],
    colours: Sequence[Any],
    *,
    log: bool,
    fmt: Callable[[float], str],
    hatched: Sequence[str] = (),
) -> None:
    """Grouped horizontal bars: ``data`` has columns label, series, value (NaN: no bar).

    Drawn with matplotlib directly so that a series without any value keeps its slot.
    """
    values = data.pivot_table(
        index="label", columns="series", values="value", aggfunc="mean", dropna=False
    )
    values = values.reindex(index=list(order), columns=list(series))
    positive = values.to_numpy(dtype=float)
    positive = positive[np.isfinite(positive) & (positive > 0)]
    # matplotlib cannot draw a bar from 0 on a log axis: every bar starts below the smallest.
    left = float(positive.min()) / 3 if log and positive.size else 0.0
    height = 0.8 / len(series)
    y0 = np.arange(len(order))
    for j, (name, colour) in enumerate(zip(series, colours, strict=True)):
        v = values[name].to_numpy(dtype=float)
        ok = np.isfinite(v) & (v > 0)
        y = y0 - 0.4 + height * (j + 0.5)
        style = {"hatch": "////", "edgecolor": "white"} if name in hatched else {}
        ax.barh(y[ok], v[ok] - left, left=left, height=height, color=colour, linewidth=0, **style)
        for yi, vi in zip(y[ok], v[ok], strict=True):
            ax.text(vi, yi, f" {fmt(vi)}", va="center", ha="left", fontsize=5.5)
    if log and positive.size:
        ax.set_xscale("log")
        ax.set_xlim(left, float(positive.max()) * 8)
        ax.xaxis.set_major_locator(log_locator(left, float(positive.max()) * 8))
        ax.xaxis.set_minor_formatter(NullFormatter())
    else:
        top = float(positive.max()) if positive.size else 1.0
        ax.set_xlim(0, top * 1.3)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=3))  # byte labels are wide
    ax.set_yticks(y0, list(order))
    ax.set_ylim(len(order) - 0.5, -0.5)  # first label on top
    ax.grid(axis="y", visible=False)
    ax.set_ylabel("")


def bar_figures(
    panels: Sequence[tuple[str, int]],
    stem: str,
    workdir: Path,
    draw: Callable[[Axes, str], None],
    legend: Sequence[Any],
    caption: Callable[[int, int, Sequence[str], str], str],
    half: bool = False,
    noun: str = "value",
) -> list[FigureSpec]:
    """One panel per (key, bars), stacked vertically, packed into figures that fit a page.

    With ``half``, drawn for half the text width (short bar labels), to sit beside another.
    ``caption(k, n, keys, scale)`` gets the sentence on the x axes' scales as drawn, naming
    them by ``noun`` (:func:`scale_sentence`).
    """
    sizes = [PANEL_IN + BAR_IN * n for _, n in panels]
    groups = pack_panels(sizes, MAX_FIGURE_HEIGHT_IN - LEGEND_IN)
    specs = []
    for k, group in enumerate(groups, start=1):
        chosen = [panels[i] for i in group]
        heights = [sizes[i] for i in group]
        path = workdir / f"fig_{stem}_{k}.svg"
        with report_style():
            fig, axes = stacked_axes(heights, HALF_WIDTH_IN if half else TEXT_WIDTH_IN)
            for ax, (key, _) in zip(axes, chosen, strict=True):
                draw(ax, key)
            fig.legend(
                handles=list(legend),
                loc="outside lower center",
                ncol=legend_columns(
                    legend, HALF_WIDTH_IN if half else TEXT_WIDTH_IN, 2 if half else 4
                ),
                frameon=False,
            )
            scale = scale_sentence({noun: [ax.xaxis for ax in axes]})
            save_svg(fig, path)
        names = [key for key, _ in chosen]
        specs.append(
            FigureSpec(
                path.name,
                caption(k, len(groups), names, scale),
                f"fig-{stem.replace('_', '-')}-{k}",
                0.5 if half else 1.0,
            )
        )
    return specs


def seed_means(df: pd.DataFrame, keys: Sequence[str], cols: Sequence[str]) -> pd.DataFrame:
    """Mean over seeds of ``cols`` per ``keys`` (NaN where every seed is NaN)."""
    return df.groupby(list(keys), sort=True)[list(cols)].mean().reset_index()


# --------------------------------------------------------------------------- sync (PCP)
