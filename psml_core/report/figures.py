"""The report's figures: seaborn/matplotlib, saved as deterministic SVG.

Each public function draws one kind of figure, split over as many SVG files as it takes to fit
the pages, and returns their captions. Axis labels name the clock
of the runs ("simulated time (s)" or "wall-clock time (s)"), read from the metrics' ``clock``
column, so a simulated curve can never pass for a measured one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from psml_core.report.format import clock_phrase, fmt_bytes
from psml_core.report.style import HALF_WIDTH_IN, TEXT_WIDTH_IN, palette, report_style, save_svg

__all__ = [
    "log_locator",
    "part_caption",
    "scale_sentence",
    "tick_text",
    "HALF_LABEL_CHARS",
    "MAX_FIGURE_HEIGHT_IN",
    "FigureSpec",
    "bytes_figure",
    "curves",
    "short_settings",
]

# Values spanning more than this factor get a logarithmic axis.
LOG_SPAN = 30.0
# Tallest figure (inches) that still leaves room for its caption on an A4 page; taller content
# is split over several figures.
MAX_FIGURE_HEIGHT_IN = 8.5
LEGEND_IN = 0.5  # room for the legend below the panels
BAR_PANEL_IN = 0.6  # a bar panel's title and x axis
_BYTES_ROW_IN = 0.27  # one method · scenario (two bars)
_LINESTYLES = ("-", "--", ":", "-.")


@dataclass(frozen=True)
class FigureSpec:
    """A figure written to ``file`` (relative to the work directory), with its caption.

    ``width`` is the share of the text width it is drawn for: 0.5 for a figure that the
    template sets beside another one, at 100 % of its drawn size either way.
    """

    file: str
    caption: str
    label: str
    width: float = 1.0


# --------------------------------------------------------------------------- data


def _train_curve(m: pd.DataFrame) -> pd.DataFrame:
    # Mean mini-batch loss over workers; the iteration ends when its last worker finishes.
    g = m.groupby("iteration", sort=True).agg(time_s=("time_s", "max"), value=("loss", "mean"))
    return g.reset_index().assign(kind="train_loss")


def _eval_curves(m: pd.DataFrame) -> pd.DataFrame:
    # Evaluations of the global model: one per evaluated iteration, the lowest rank's row.
    ev = m[m["test_loss"].notna() | m["test_accuracy"].notna()]
    ev = ev.sort_values(["iteration", "worker"]).drop_duplicates("iteration")
    parts = [
        ev[["iteration", "time_s"]].assign(value=ev[col].to_numpy(), kind=col)
        for col in ("test_loss", "test_accuracy")
    ]
    return pd.concat(parts, ignore_index=True).dropna(subset=["value"])


def curves(runs: pd.DataFrame, metrics: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Per-iteration curves aggregated over seeds.

    Args:
        runs: The runs table (one row per run).
        metrics: Run id -> its metrics table.

    Returns:
        Columns workload, method, scenario, kind (train_loss, test_loss, test_accuracy),
        iteration, time_s (mean over seeds), mean, lo, hi (min and max over seeds), n, clock;
        sorted.
    """
    parts = []
    for r in runs.sort_values(["workload", "method", "scenario", "seed"]).itertuples():
        m = metrics[str(r.run_id)]
        c = pd.concat([_train_curve(m), _eval_curves(m)], ignore_index=True)
        clocks = clock_phrase(m["clock"])
        parts.append(
            c.assign(
                workload=r.workload, method=r.method, scenario=r.scenario, seed=r.seed, clock=clocks
            )
        )
    cols = [
        "workload",
        "method",
        "scenario",
        "kind",
        "iteration",
        "time_s",
        "mean",
        "lo",
        "hi",
        "n",
        "clock",
    ]
    if not parts:
        return pd.DataFrame(columns=cols)
    data = pd.concat(parts, ignore_index=True)
    keys = ["workload", "method", "scenario", "kind", "iteration"]
    out = data.groupby(keys, sort=True).agg(
        time_s=("time_s", "mean"),
        mean=("value", "mean"),
        lo=("value", "min"),
        hi=("value", "max"),
        n=("value", "size"),
        clock=("clock", lambda s: clock_phrase(s)),
    )
    return out.reset_index()[cols]


def _label(setting: tuple[str, str]) -> str:
    return f"{setting[0]} · {setting[1]}"


def spans_decades(values: pd.Series | np.ndarray) -> bool:
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    return v.size > 1 and float(v.max() / v.min()) > LOG_SPAN


# --------------------------------------------------------------------------- line figures


def log_locator(lo: float, hi: float) -> LogLocator:
    """Ticks at round values of ``[lo, hi]``.

    Every decade where two or more fall inside, else 1, 2 and 5 x 10^k (a span under two
    decades would otherwise show one tick or none).
    """
    lo, hi = max(min(lo, hi), 1e-300), max(lo, hi, 1e-300)
    decades = math.floor(math.log10(hi)) - math.ceil(math.log10(lo)) + 1
    return LogLocator(base=10, subs=(1.0,) if decades >= 2 else (1.0, 2.0, 5.0))


def tick_text(fmt: Callable[[float], str]) -> Callable[[float, object], str]:
    """A tick formatter from a value formatter, without its trailing zeros.

    ``1 MB``, not ``1.00 MB``: a tick is a round value, and its label says so.
    """

    def label(value: float, _pos: object = None) -> str:
        if value <= 0:
            return "0"
        return re.sub(r"\.(\d*?)0+(?=\D|$)", lambda m: f".{m[1]}" if m[1] else "", fmt(value))

    return label


def log_axis(
    axis: Axis,
    set_scale: Callable[[str], object],
    values: pd.Series,
    fmt: Callable[[float], str] | None = None,
) -> None:
    """Log scale with ticks at round values (:func:`log_locator`) and plain labels."""
    set_scale("log")
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    lo, hi = (float(v.min()), float(v.max())) if v.size else (1.0, 10.0)
    axis.set_major_locator(log_locator(lo, hi))
    axis.set_major_formatter(FuncFormatter(tick_text(fmt or (lambda x: f"{x:g}"))))
    axis.set_minor_formatter(NullFormatter())


def _panel_title(axis: Axis) -> str:
    ax = axis.axes
    return ax.get_title() or ax.get_title(loc="left") or ax.get_title(loc="right")


def scale_sentence(parts: Mapping[str, Sequence[Axis]]) -> str:
    """The caption's words on the axes' scales, read from the axes as drawn.

    Args:
        parts: A noun ("time", "byte") -> the axes it names (``ax.xaxis``, ...); the axes of
            a hidden panel are skipped.

    Returns:
        "" where every axis is linear; "Logarithmic <noun> axis." (or "Logarithmic <a> and <b>
        axes.") for the nouns whose axes are all logarithmic; where only some of a noun's are,
        a sentence that names their panels.
    """
    whole, some = [], []
    for noun, axes in parts.items():
        shown = [a for a in axes if a.axes.get_visible()]
        log = [a for a in shown if a.get_scale() == "log"]
        if log and len(log) == len(shown):
            whole.append((noun, len(log)))
        elif log:
            names = ", ".join(dict.fromkeys(_panel_title(a) for a in log))
            some.append(f"Logarithmic {noun} axis in {names}; linear in the other panels.")
    out = []
    if whole:
        nouns = [n for n, _ in whole]
        many = len(whole) > 1 or whole[0][1] > 1
        listed = nouns[0] if len(nouns) == 1 else f"{', '.join(nouns[:-1])} and {nouns[-1]}"
        out.append(f"Logarithmic {listed} ax{'es' if many else 'is'}.")
    out += some
    return " ".join(out)


def pack_panels(sizes: Sequence[float], limit: float) -> list[list[int]]:
    """Split items, in order, into groups whose sizes add up to at most ``limit`` (>= 1 each)."""
    groups: list[list[int]] = []
    total = limit + 1.0
    for i, size in enumerate(sizes):
        if total + size > limit:
            groups.append([])
            total = 0.0
        groups[-1].append(i)
        total += size
    return groups


def part_caption(k: int, n: int, labels: Sequence[str]) -> str:
    """The caption's tail of figure ``k`` of ``n`` split from one: what this part shows."""
    return f" Part {k} of {n}: {', '.join(dict.fromkeys(labels))}." if n > 1 else ""


def bar_panels(
    items: Sequence[tuple[str, object]], per_item_in: float
) -> list[list[tuple[str, list[object]]]]:
    """Group (workload, item) pairs into panels, then the panels into figures.

    A panel shows one workload; one with too many items is split. Figures fit a page.
    """
    limit = MAX_FIGURE_HEIGHT_IN - LEGEND_IN
    max_items = max(1, int((limit - BAR_PANEL_IN) // per_item_in))
    by_workload: dict[str, list[object]] = {}
    for w, item in items:
        by_workload.setdefault(w, []).append(item)
    panels = [
        (w, its[i : i + max_items])
        for w, its in sorted(by_workload.items())
        for i in range(0, len(its), max_items)
    ]
    sizes = [BAR_PANEL_IN + per_item_in * len(its) for _, its in panels]
    return [[panels[i] for i in group] for group in pack_panels(sizes, limit)]


def stacked_axes(heights: Sequence[float], width: float = TEXT_WIDTH_IN) -> tuple:
    """A figure of panels stacked vertically (``heights`` in inches) and a legend row."""
    fig, axes = plt.subplots(
        len(heights),
        1,
        squeeze=False,
        layout="constrained",
        figsize=(width, sum(heights) + LEGEND_IN),
        gridspec_kw={"height_ratios": list(heights)},
    )
    return fig, axes[:, 0]


def bar_axes(
    panels: Sequence[tuple[str, list[object]]], per_item_in: float, width: float = TEXT_WIDTH_IN
) -> tuple:
    return stacked_axes([BAR_PANEL_IN + per_item_in * len(its) for _, its in panels], width)


HALF_LABEL_CHARS = 26
"""Bar labels up to this long fit a half-width figure; longer ones get the text width."""


def short_settings(
    workload: pd.Series, method: pd.Series, scenario: pd.Series
) -> tuple[list[str], dict[str, str]]:
    """Bar labels and panel titles for bars per method · scenario.

    A workload whose bars share one scenario gets "method" labels under the title
    "workload · scenario"; else "method · scenario" labels under the workload's name.
    """
    frame = pd.DataFrame(
        {"w": workload.astype(str), "m": method.astype(str), "s": scenario.astype(str)}
    )
    single = frame.groupby("w")["s"].nunique() == 1
    titles = {
        w: f"{w} · {frame.loc[frame['w'] == w, 's'].iloc[0]}" if one else w
        for w, one in single.items()
    }
    labels = [
        m if single[w] else _label((m, s))
        for w, m, s in zip(frame["w"], frame["m"], frame["s"], strict=True)
    ]
    return labels, titles


def _bytes_axis(ax: Axes, log: bool) -> None:
    if log:
        ax.xaxis.set_major_locator(log_locator(*ax.get_xlim()))
        # Less than a decade of data would label the minor ticks in 10^x notation.
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_formatter(FuncFormatter(tick_text(fmt_bytes)))


def bytes_figure(
    runs: pd.DataFrame, workdir: Path, *, stem: str = "bytes", log: bool | None = None
) -> list[FigureSpec]:
    """Wire bytes per direction, per method · scenario (mean of seeds), a panel per workload.

    Written to ``fig_<stem>_<k>.svg``, as many as needed to fit the pages.

    Args:
        runs: The runs to draw.
        workdir: Directory that receives the SVG files.
        stem: File stem (and label) of the figures.
        log: Logarithmic axis always (True), never (False), or where values span more than a
            factor of 30 (None); the caption says which panels are, from the axes as drawn.
    """
    long = runs.melt(
        id_vars=["workload", "method", "scenario", "seed"],
        value_vars=["bytes_up", "bytes_down"],
        var_name="direction",
        value_name="bytes",
    )
    long["direction"] = long["direction"].map({"bytes_up": "up", "bytes_down": "down"})
    labels, titles = short_settings(long["workload"], long["method"], long["scenario"])
    long["setting"] = labels
    items = sorted({(str(w), s) for w, s in zip(long["workload"], long["setting"], strict=True)})
    half = max(len(s) for _, s in items) <= HALF_LABEL_CHARS
    figures = bar_panels(items, _BYTES_ROW_IN)
    specs = []
    for k, panels in enumerate(figures, start=1):
        path = workdir / f"fig_{stem}_{k}.svg"
        scale = _draw_bytes(long, panels, path, log=log, titles=titles, half=half)
        specs.append(
            FigureSpec(
                path.name,
                "Wire bytes per direction, summed over workers and iterations (exact encoded "
                f"sizes, mean over seeds).{' ' + scale if scale else ''}"
                + part_caption(k, len(figures), [w for w, _ in panels]),
                f"fig-{stem.replace('_', '-')}-{k}",
                0.5 if half else 1.0,
            )
        )
    return specs


def _draw_bytes(
    long: pd.DataFrame,
    panels: Sequence[tuple[str, list]],
    path: Path,
    log: bool | None = None,
    titles: Mapping[str, str] | None = None,
    half: bool = False,
) -> str:
    """Draw and save the byte bars; return the caption's sentence on the axes' scales."""
    colours = palette(2)
    with report_style():
        fig, axes = bar_axes(panels, _BYTES_ROW_IN, HALF_WIDTH_IN if half else TEXT_WIDTH_IN)
        for ax, (w, settings) in zip(axes, panels, strict=True):
            sub = long[(long["workload"] == w) & long["setting"].isin(settings)]
            # The arithmetic mean over seeds, taken here: on a log axis seaborn would average
            # the logs (a geometric mean) and the labels would disagree with the tables.
            sub = sub.groupby(["setting", "direction"], as_index=False, sort=False)["bytes"].mean()
            log_axis = spans_decades(sub["bytes"]) if log is None else log
            sns.barplot(
                data=sub,
                y="setting",
                x="bytes",
                hue="direction",
                orient="h",
                ax=ax,
                order=list(settings),
                hue_order=["up", "down"],
                palette=colours,
                errorbar=None,
                legend=False,
                log_scale=log_axis,
            )
            for container in ax.containers:
                labels = [fmt_bytes(bar.get_width()) for bar in container]
                ax.bar_label(container, labels=labels, padding=2, fontsize=6.5)
            ax.set_xlim(right=ax.get_xlim()[1] * (4 if log_axis else 1.18))
            positive = sub["bytes"][sub["bytes"] > 0]
            if log_axis and len(positive):
                # A bar from 0 cannot be drawn on a log axis (matplotlib drops it): start every
                # bar at a left edge below the smallest value instead.
                left = float(positive.min()) / 3
                for bar in ax.patches:
                    end = bar.get_x() + bar.get_width()
                    bar.set_x(left)
                    bar.set_width(max(end - left, 0.0))
                ax.set_xlim(left=left)
            # Ticks once the limits are final, fewer on a half-width panel.
            _bytes_axis(ax, log_axis)
            ax.set(
                title=(titles or {}).get(w, w),
                xlabel="wire bytes (all workers, all iterations)",
                ylabel="",
            )
        names = ("up (worker → server)", "down (server → worker)")
        handles = [Patch(color=c, label=n) for c, n in zip(colours, names, strict=True)]
        fig.legend(
            handles=handles, loc="outside lower center", ncol=1 if half else 2, frameon=False
        )
        scale = scale_sentence({"byte": [ax.xaxis for ax in axes]})
        save_svg(fig, path)
    return scale
