"""Figures of one experiment (a paper's comparison, or the head-to-head), as deterministic SVG.

Each function draws one kind of figure over the runs of one experiment, writes it as
``fig_<stem>_<k>.svg`` (split over several files when it would not fit a page) and returns
their :class:`~psml_core.report.figures.FigureSpec`. One colour per method, the same in every
figure of the experiment, in the experiment's method order. Time axes name their clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from psml_core.analysis.claims import metric_values
from psml_core.report.figures import (
    _LEGEND_IN,
    _LOG_SPAN,
    HALF_LABEL_CHARS,
    MAX_FIGURE_HEIGHT_IN,
    FigureSpec,
    _log_axis,
    _pack,
    _spans,
    part_caption,
    short_settings,
    stacked_axes,
)
from psml_core.report.format import CENSORED, clock_phrase, fmt_bytes, fmt_percent, fmt_seconds, sig
from psml_core.report.style import HALF_WIDTH_IN, TEXT_WIDTH_IN, palette, report_style, save_svg

__all__ = [
    "MAX_SERIES",
    "method_groups",
    "accuracy_by_scenario_figure",
    "head_to_head_figure",
    "lossless_figure",
    "method_styles",
    "placement_traffic_figure",
    "ratio_figure",
    "sync_figure",
]

_LINE_ROW_IN = 1.75  # one row of line panels
_BAR_IN = 0.2  # one bar group (a method) in a horizontal bar panel
_PANEL_IN = 0.65  # a bar panel's title and x axis
_LINESTYLES = ("-", "--", ":", "-.")
_TARGET_STYLE: dict[str, Any] = {"color": "0.35", "linestyle": (0, (4, 2)), "linewidth": 0.9}


def method_styles(methods: Sequence[str]) -> dict[str, dict[str, Any]]:
    """One colour per method (in the given order); line styles cycle to tell neighbours apart."""
    colours = palette(len(methods))
    return {
        m: {"color": colours[i], "linestyle": _LINESTYLES[i % len(_LINESTYLES)]}
        for i, m in enumerate(methods)
    }


def _panels(runs: pd.DataFrame) -> list[tuple[str, str]]:
    """The (workload, scenario) pairs of the runs, sorted."""
    return sorted(
        {(str(w), str(s)) for w, s in zip(runs["workload"], runs["scenario"], strict=True)}
    )


def _seeds_phrase(runs: pd.DataFrame) -> str:
    n = runs.groupby(["workload", "method", "scenario"]).size()
    lo, hi = int(n.min()), int(n.max())
    if hi == 1:
        return "one seed per line"
    count = f"{lo}" if lo == hi else f"{lo} to {hi}"
    return f"mean over {count} seeds, band from the minimum to the maximum"


def _line_figures(
    panels: Sequence[tuple[str, str]],
    stem: str,
    workdir: Path,
    draw: Callable[[Axes, str, str], None],
    legend: Sequence[Any],
    caption: Callable[[int, int, Sequence[tuple[str, str]]], str],
) -> list[FigureSpec]:
    """Panels two per row, rows packed into figures that fit a page."""
    rows_per_fig = max(1, int((MAX_FIGURE_HEIGHT_IN - _LEGEND_IN) // _LINE_ROW_IN))
    per_fig = 2 * rows_per_fig
    chunks = [list(panels[i : i + per_fig]) for i in range(0, len(panels), per_fig)]
    specs = []
    for k, chunk in enumerate(chunks, start=1):
        # One panel is drawn for half the text width, to sit beside another figure.
        ncols = 1 if len(chunk) == 1 else 2
        nrows = -(-len(chunk) // ncols)
        width = HALF_WIDTH_IN if ncols == 1 else TEXT_WIDTH_IN
        legend_rows = -(-len(legend) // (2 if ncols == 1 else 4))
        path = workdir / f"fig_{stem}_{k}.svg"
        with report_style():
            fig, axes = plt.subplots(
                nrows,
                ncols,
                squeeze=False,
                layout="constrained",
                figsize=(width, _LINE_ROW_IN * nrows + 0.2 + 0.16 * legend_rows),
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
                ncol=min(2 if ncols == 1 else 4, len(legend)),
                frameon=False,
            )
            save_svg(fig, path)
        specs.append(
            FigureSpec(
                path.name,
                caption(k, len(chunks), chunk),
                f"fig-{stem.replace('_', '-')}-{k}",
                0.5 if ncols == 1 else 1.0,
            )
        )
    return specs


def _panel_labels(panels: Sequence[tuple[str, str]]) -> list[str]:
    return [f"{w} · {s}" for w, s in panels]


def _method_handles(styles: Mapping[str, Mapping[str, Any]], methods: Sequence[str]) -> list:
    return [Line2D([], [], label=m, linewidth=1.4, **styles[m]) for m in methods if m in styles]


def _present(methods: Sequence[str], runs: pd.DataFrame) -> list[str]:
    have = set(runs["method"].astype(str))
    return [m for m in methods if m in have]


# --------------------------------------------------------------------------- accuracy


MAX_SERIES = 8
"""At most this many methods share a panel; more are split into groups (figures)."""
_REFERENCE = "dense_bsp"


def method_groups(methods: Sequence[str], limit: int = MAX_SERIES) -> list[list[str]]:
    """Split ``methods`` into groups of at most ``limit``, in order, each as large as the others.

    The dense reference (``dense_bsp``), when present, is drawn in every group so that each
    panel keeps the same yardstick.
    """
    methods = list(methods)
    if len(methods) <= limit:
        return [methods]
    ref = [m for m in methods if m == _REFERENCE]
    rest = [m for m in methods if m != _REFERENCE]
    room = limit - len(ref)
    n = -(-len(rest) // room)
    size = -(-len(rest) // n)
    return [ref + rest[i : i + size] for i in range(0, len(rest), size)]


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
    return _per_group(
        _present(methods, runs),
        stem,
        lambda group, name, part: _accuracy_group(curve, runs, group, workdir, name, part),
    )


def _per_group(
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
            + (f", {_REFERENCE} in each" if _REFERENCE in group else "")
            + ")."
        )
        specs += draw(group, f"{stem}_g{i}", part)
    return specs


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
        if _spans(panel["time_s"]):
            _log_axis(ax.xaxis, ax.set_xscale, panel["time_s"])
        ax.set_xlabel(f"{clock_phrase(panel['clock']) if len(panel) else clock} time (s)")
        ax.set_ylabel("test accuracy")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0%}"))

    legend = [
        *_method_handles(styles, methods),
        Line2D([], [], label="target accuracy", **_TARGET_STYLE),
    ]

    def caption(k: int, n: int, chunk: Sequence[tuple[str, str]]) -> str:
        return (
            f"Test accuracy of the global model against {clock} time, one line per method "
            f"({_seeds_phrase(runs)}); dashed: the target accuracy, which defines time to "
            f"target. Logarithmic time axis where times span over {_LOG_SPAN:g}x."
            f"{part}{part_caption(k, n, [f'{w} · {s}' for w, s in chunk])}"
        )

    return _line_figures(_panels(runs), stem, workdir, draw, legend, caption)


# --------------------------------------------------------------------------- ratio (DC2)


def _per_iteration(
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
    data = _per_iteration(runs, metrics, "ratio")
    return _per_group(
        _present(methods, runs),
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
    log = _spans(data["mean"])

    def draw(ax: Axes, w: str, s: str) -> None:
        panel = data[(data["workload"] == w) & (data["scenario"] == s)]
        for m in methods:
            d = panel[panel["method"] == m]
            if not d.empty:
                ax.plot(d["iteration"], d["mean"], linewidth=1.2, **styles[m])
        if log:
            _log_axis(ax.yaxis, ax.set_yscale, panel["mean"])
        ax.set_xlabel("iteration")
        ax.set_ylabel("compression ratio (1 = dense)")

    def caption(k: int, n: int, chunk: Sequence[tuple[str, str]]) -> str:
        return (
            "Compression ratio in force at each iteration (the share of the update sent; 1 is "
            "dense), mean over workers and seeds, one panel per workload · scenario: an adaptive "
            "controller moves it with the measured delay, a fixed ratio stays flat."
            + (" Logarithmic axis." if log else "")
            + part
            + part_caption(k, n, _panel_labels(chunk))
        )

    return _line_figures(
        _panels(runs), stem, workdir, draw, _method_handles(styles, methods), caption
    )


# --------------------------------------------------------------------------- horizontal bars


def _hbars(
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
        ax.xaxis.set_major_locator(LogLocator(base=10))
    else:
        top = float(positive.max()) if positive.size else 1.0
        ax.set_xlim(0, top * 1.3)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=3))  # byte labels are wide
    ax.set_yticks(y0, list(order))
    ax.set_ylim(len(order) - 0.5, -0.5)  # first label on top
    ax.grid(axis="y", visible=False)
    ax.set_ylabel("")


def _bar_figures(
    panels: Sequence[tuple[str, int]],
    stem: str,
    workdir: Path,
    draw: Callable[[Axes, str], None],
    legend: Sequence[Any],
    caption: Callable[[int, int, Sequence[str]], str],
    half: bool = False,
) -> list[FigureSpec]:
    """One panel per (key, bars), stacked vertically, packed into figures that fit a page.

    With ``half``, drawn for half the text width (short bar labels), to sit beside another.
    """
    sizes = [_PANEL_IN + _BAR_IN * n for _, n in panels]
    groups = _pack(sizes, MAX_FIGURE_HEIGHT_IN - _LEGEND_IN)
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
                ncol=min(2 if half else 4, len(legend)),
                frameon=False,
            )
            save_svg(fig, path)
        names = [key for key, _ in chosen]
        specs.append(
            FigureSpec(
                path.name,
                caption(k, len(groups), names),
                f"fig-{stem.replace('_', '-')}-{k}",
                0.5 if half else 1.0,
            )
        )
    return specs


def _seed_means(df: pd.DataFrame, keys: Sequence[str], cols: Sequence[str]) -> pd.DataFrame:
    """Mean over seeds of ``cols`` per ``keys`` (NaN where every seed is NaN)."""
    return df.groupby(list(keys), sort=True)[list(cols)].mean().reset_index()


# --------------------------------------------------------------------------- sync (PCP)


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
    methods = _present(methods, runs)
    styles = method_styles(methods)
    stats = _sync_stats(runs, metrics)
    means = _seed_means(
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
    steps = _per_iteration(runs[runs["method"].isin(rounds)], metrics, "local_steps")
    specs = []
    for k, w in enumerate(sorted(set(means["workload"].astype(str))), start=1):
        sub = means[means["workload"] == w]
        order = list(dict.fromkeys(sub["label"]))
        colours = [styles[str(m)]["color"] for m in sub["method"]]  # one per bar (row)
        bar_h = _PANEL_IN + _BAR_IN * 1.4 * len(order)
        line_h = _LINE_ROW_IN if rounds else 0.0
        path = workdir / f"fig_{stem}_{k}.svg"
        with report_style():
            fig = plt.figure(layout="constrained", figsize=(TEXT_WIDTH_IN, bar_h + line_h + 0.2))
            grid = fig.add_gridspec(
                2 if rounds else 1, 2, height_ratios=[bar_h, line_h] if rounds else [bar_h]
            )
            ax_wait, ax_stale = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
            _sync_bars(ax_wait, sub, order, colours, "wait_fraction", fmt_percent)
            ax_wait.set(
                title=f"{w}: time blocked by the sync policy",
                xlabel="wait / (compute + codec + comm + wait)",
            )
            ax_wait.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0%}"))
            _sync_bars(ax_stale, sub, order, colours, "staleness_mean", lambda v: sig(v, 2))
            ax_stale.scatter(
                sub["staleness_max"],
                range(len(sub)),
                marker="|",
                s=60,
                color="0.2",
                zorder=3,
                label="maximum",
            )
            ax_stale.set(title=f"{w}: staleness (iterations)", xlabel="mean (bar), maximum (|)")
            top = float(np.nanmax(sub[["staleness_mean", "staleness_max"]].to_numpy(dtype=float)))
            ax_stale.set_xlim(0, max(top, 1.0) * 1.15)
            ax_stale.set_yticklabels([])
            if rounds:
                ax = fig.add_subplot(grid[1, :])
                for m in rounds:
                    d = steps[(steps["workload"] == w) & (steps["method"] == m)]
                    for s, ds in d.groupby("scenario", sort=True):
                        label = m if len(set(d["scenario"])) == 1 else f"{m} · {s}"
                        ax.plot(
                            ds["iteration"], ds["mean"], linewidth=1.2, label=label, **styles[m]
                        )
                ax.set(
                    title=f"{w}: local steps granted per round (mean over workers and seeds)",
                    xlabel="round",
                    ylabel="local steps",
                )
                ax.legend(frameon=False, fontsize=7)
            save_svg(fig, path)
        specs.append(
            FigureSpec(
                path.name,
                f"Synchronization cost on {w}, per method (mean over seeds; bars in the order of "
                "the experiment's methods). Left: share of the workers' time blocked by the sync "
                "policy. Right: staleness, the clock distance to the slowest worker when a worker "
                "proceeded, mean over iterations and workers (bar) and maximum (tick)."
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


def _sync_bars(
    ax: Axes,
    sub: pd.DataFrame,
    order: Sequence[str],
    colours: Sequence[Any],
    column: str,
    fmt: Callable[[float], str],
) -> None:
    y = np.arange(len(order))
    values = sub.set_index("label").loc[list(order), column].to_numpy(dtype=float)
    bars = ax.barh(y, np.nan_to_num(values), color=list(colours), height=0.7)
    ax.bar_label(
        bars, labels=[fmt(v) if math.isfinite(v) else "–" for v in values], padding=2, fontsize=6.5
    )
    ax.set_yticks(y, list(order))
    ax.invert_yaxis()
    top = float(np.nanmax(values)) if np.isfinite(values).any() else 1.0
    ax.set_xlim(0, max(top, 1e-12) * 1.3)
    ax.grid(axis="y", visible=False)


# --------------------------------------------------------------------------- placement (jpdc)


def placement_traffic_figure(
    runs: pd.DataFrame,
    predicted: Mapping[tuple[str, str], Mapping[str, Any]],
    methods: Sequence[str],
    placements: Mapping[str, str],
    workdir: Path,
    stem: str,
) -> list[FigureSpec]:
    """Remote bytes per step per placement: measured (mean over seeds) and predicted.

    Args:
        runs: The experiment's runs.
        predicted: (workload, method) -> the partition file's ``per_step`` block, for the
            methods whose wire format the prediction models (touched pulls, kv entries).
        methods: The experiment's methods, in order.
        placements: Method -> its placement's name.
        workdir: Directory of the SVG files.
        stem: File stem.
    """
    methods = _present(methods, runs)
    per_run = runs.assign(
        up=pd.to_numeric(runs["remote_bytes_up"]) / pd.to_numeric(runs["iterations"]),
        down=pd.to_numeric(runs["remote_bytes_down"]) / pd.to_numeric(runs["iterations"]),
    )
    means = _seed_means(per_run, ["workload", "scenario", "method"], ["up", "down"])
    series = ("measured up", "measured down", "predicted up", "predicted down")
    rows = []
    for r in means.itertuples(index=False):
        pred = predicted.get((str(r.workload), str(r.method))) or {}
        label = f"{r.method} ({placements.get(str(r.method), '–')})"
        key = f"{r.workload} · {r.scenario}"
        vals = (
            r.up,
            r.down,
            pred.get("remote_bytes_up", math.nan),
            pred.get("remote_bytes_down", math.nan),
        )
        for name, v in zip(series, vals, strict=True):
            rows.append(
                {"key": key, "method": r.method, "label": label, "series": name, "value": float(v)}
            )
    data = pd.DataFrame(rows)
    rank = {m: i for i, m in enumerate(methods)}
    return _up_down_bars(
        data,
        "key",
        series,
        ("up, measured", "down, measured", "up, predicted", "down, predicted"),
        order=lambda lb: rank.get(lb.split(" (")[0], 0),
        xlabel="remote bytes per step (all workers)",
        text=(
            "Traffic per placement: bytes per training step that cross the network (to a shard "
            "on another machine), summed over workers; measured (solid: the run's remote bytes "
            "over its iterations, mean over seeds) and predicted before training from the data "
            "and the placement (hatched: the partition file's expected bytes of one mini-batch "
            "step; drawn only for recipes that pull the touched keys with key/value entries, the "
            "wire format the prediction models). Method (placement) on the left."
        ),
        stem=stem,
        workdir=workdir,
    )


# --------------------------------------------------------------------------- lossless (Ratatouille)


def _lossless_sums(runs: pd.DataFrame, metrics: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    rows = []
    for r in runs.itertuples(index=False):
        m = metrics[str(r.run_id)]
        row = {
            "workload": r.workload,
            "method": r.method,
            "scenario": r.scenario,
            "raw up": float(r.bytes_up),
            "raw down": float(r.bytes_down),
        }
        for d in ("up", "down"):
            col = pd.to_numeric(m[f"lossless_bytes_{d}"], errors="coerce")
            row[f"Snappy {d}"] = float(col.sum()) if col.notna().any() else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def lossless_figure(
    runs: pd.DataFrame,
    metrics: Mapping[str, pd.DataFrame],
    methods: Sequence[str],
    workdir: Path,
    stem: str,
) -> list[FigureSpec]:
    """Raw wire bytes against the same payloads Snappy-compressed, per method · scenario."""
    methods = _present(methods, runs)
    series = ("raw up", "raw down", "Snappy up", "Snappy down")
    sums = _seed_means(_lossless_sums(runs, metrics), ["workload", "method", "scenario"], series)
    long = sums.melt(
        id_vars=["workload", "method", "scenario"],
        value_vars=list(series),
        var_name="series",
        value_name="value",
    )
    labels, titles = short_settings(long["workload"], long["method"], long["scenario"])
    long["label"] = labels
    long["workload"] = long["workload"].astype(str).map(titles)
    rank = {m: i for i, m in enumerate(methods)}
    return _up_down_bars(
        long,
        "workload",
        series,
        ("up, raw (on the wire)", "down, raw (on the wire)", "up, Snappy", "down, Snappy"),
        order=lambda lb: (rank.get(lb.split(" · ")[0], 0), lb),
        xlabel="bytes (all workers, all iterations)",
        text=(
            "Raw wire bytes (the exact encoded sizes the runs count) against the same payloads "
            "Snappy-compressed, measured separately and never counted as wire bytes (mean over "
            "seeds; no Snappy bar: the recipe does not measure it)."
        ),
        stem=stem,
        workdir=workdir,
    )


def _up_down_bars(
    data: pd.DataFrame,
    key_col: str,
    series: Sequence[str],
    legend_labels: Sequence[str],
    *,
    order: Callable[[str], Any],
    xlabel: str,
    text: str,
    stem: str,
    workdir: Path,
) -> list[FigureSpec]:
    """Byte bars per label in four series: up, down, then the same two hatched.

    One panel per ``key_col`` value; ``data`` has columns ``key_col``, label, series and value.
    """
    base = palette(2)
    colours = [base[0], base[1], base[0], base[1]]
    log = _spans(data["value"])
    # A panel holds at most as many labels as fit a figure; more are split into parts.
    room = max(1, int((MAX_FIGURE_HEIGHT_IN - _LEGEND_IN - _PANEL_IN) // (len(series) * _BAR_IN)))
    parts: dict[str, tuple[str, list[str]]] = {}
    for key in sorted(set(data[key_col])):
        labels = sorted(dict.fromkeys(data.loc[data[key_col] == key, "label"]), key=order)
        chunks = [labels[i : i + room] for i in range(0, len(labels), room)]
        for i, chunk in enumerate(chunks, start=1):
            name = key if len(chunks) == 1 else f"{key} ({i}/{len(chunks)})"
            parts[name] = (key, chunk)

    def draw(ax: Axes, name: str) -> None:
        key, labels = parts[name]
        sub = data[(data[key_col] == key) & data["label"].isin(labels)]
        _hbars(
            ax,
            sub,
            labels,
            series,
            colours,
            log=log,
            fmt=fmt_bytes,
            hatched=tuple(series[2:]),
        )
        ax.set(title=name, xlabel=xlabel)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt_bytes(v) if v > 0 else "0"))

    legend = [
        Patch(facecolor=colours[0], label=legend_labels[0]),
        Patch(facecolor=colours[1], label=legend_labels[1]),
        Patch(facecolor=colours[0], hatch="////", edgecolor="white", label=legend_labels[2]),
        Patch(facecolor=colours[1], hatch="////", edgecolor="white", label=legend_labels[3]),
    ]

    def caption(k: int, n: int, names: Sequence[str]) -> str:
        return text + (" Logarithmic axis." if log else "") + part_caption(k, n, names)

    panels = [(name, len(series) * len(labels)) for name, (_, labels) in parts.items()]
    half = max(len(str(lb)) for lb in data["label"]) <= HALF_LABEL_CHARS
    return _bar_figures(panels, stem, workdir, draw, legend, caption, half)


# --------------------------------------------------------------------------- head-to-head


_H2H = (
    ("time_to_target_s", "time to target"),
    ("final_test_accuracy", "final test accuracy"),
    ("bytes_total", "wire bytes, up + down"),
)


_H2H_FMT: dict[str, Callable[[float], str]] = {
    "time_to_target_s": fmt_seconds,
    "final_test_accuracy": fmt_percent,
    "bytes_total": fmt_bytes,
}


def _value_panel(
    ax: Axes,
    labels: Sequence[str],
    values: np.ndarray,
    colours: Sequence[Any],
    fmt: Callable[[float], str],
    *,
    log: bool,
    notes: Sequence[str] | None = None,
) -> None:
    """One bar per row, its value printed after it, then its note (e.g. censored seeds).

    A missing value reads "not held (censored)": only a time to target is ever missing.
    """
    y = np.arange(len(values))
    ok = np.isfinite(values) & (values > 0)
    positive = values[ok]
    left = float(positive.min()) / 3 if log and positive.size else 0.0
    ax.barh(
        y[ok],
        values[ok] - left,
        left=left,
        height=0.7,
        color=[c for c, keep in zip(colours, ok, strict=True) if keep],
    )
    notes = list(notes) if notes is not None else [""] * len(values)
    for yi, vi, keep, note in zip(y, values, ok, notes, strict=True):
        text = fmt(vi) if keep else (CENSORED if not math.isfinite(vi) else fmt(0.0))
        text += f" ({note})" if note and keep else ""
        ax.text(vi if keep else left, yi, f" {text}", va="center", ha="left", fontsize=5.5)
    top = float(positive.max()) if positive.size else 1.0
    if log and positive.size:
        ax.set_xscale("log")
        ax.set_xlim(left, top * 12)
        ax.xaxis.set_major_locator(LogLocator(base=10, numticks=4))
        ax.xaxis.set_minor_formatter(NullFormatter())
    else:
        ax.set_xlim(0, top * 1.5)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=3))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda t, _: fmt(t) if t > 0 else "0"))
    ax.set_yticks(y, list(labels))
    ax.set_ylim(len(values) - 0.5, -0.5)
    ax.grid(axis="y", visible=False)


def head_to_head_figure(
    runs: pd.DataFrame, methods: Sequence[str], workdir: Path, stem: str
) -> list[FigureSpec]:
    """Time to target, final accuracy and bytes of every method, a row per workload · scenario."""
    methods = _present(methods, runs)
    styles = method_styles(methods)
    cols = [c for c, _ in _H2H]
    means = _seed_means(
        runs.assign(**{c: pd.to_numeric(runs[c], errors="coerce") for c in cols}),
        ["workload", "scenario", "method"],
        cols,
    )
    # Seeds that never held their target (censored), counted beside the mean of the others.
    censored = {
        key: (int(pd.to_numeric(g["time_to_target_s"], errors="coerce").isna().sum()), len(g))
        for key, g in runs.groupby(["workload", "scenario", "method"], sort=True)
    }
    clock = clock_phrase(runs["clock"])
    # One scale per column, over every row, so that rows compare; accuracy stays linear.
    log = {c: c != "final_test_accuracy" and _spans(means[c]) for c in cols}
    panels = _panels(runs)
    row_h = _PANEL_IN + _BAR_IN * len(methods)
    groups = _pack([row_h] * len(panels), MAX_FIGURE_HEIGHT_IN - _LEGEND_IN)
    specs = []
    for k, group in enumerate(groups, start=1):
        chosen = [panels[i] for i in group]
        path = workdir / f"fig_{stem}_{k}.svg"
        with report_style():
            fig, axes = plt.subplots(
                len(chosen),
                3,
                squeeze=False,
                layout="constrained",
                figsize=(TEXT_WIDTH_IN, row_h * len(chosen) + 0.2),
            )
            for i, (w, s) in enumerate(chosen):
                sub = means[(means["workload"] == w) & (means["scenario"] == s)]
                sub = sub.set_index("method").reindex(
                    [m for m in methods if m in set(sub["method"])]
                )
                colours = [styles[m]["color"] for m in sub.index]
                counts = [censored.get((w, s, m), (0, 0)) for m in sub.index]
                notes = [f"censored {c}/{n}" if c else "" for c, n in counts]
                for j, (col, name) in enumerate(_H2H):
                    ax = axes[i, j]
                    _value_panel(
                        ax,
                        list(sub.index) if j == 0 else [""] * len(sub),
                        sub[col].to_numpy(dtype=float),
                        colours,
                        _H2H_FMT[col],
                        log=log[col],
                        notes=notes if col == "time_to_target_s" else None,
                    )
                    unit = f" ({clock} s)" if col == "time_to_target_s" else ""
                    ax.set_title(f"{w} · {s}" if j == 0 else "", loc="left")
                    ax.set_xlabel(name + unit)
            save_svg(fig, path)
        specs.append(
            FigureSpec(
                path.name,
                f"Head-to-head, one row per workload · scenario, one bar per method (mean over "
                f"seeds): time to target on the {clock} clock (over the seeds that held the "
                "target to the end of the run; the others counted as censored, "
                f"“{CENSORED}” if none held it), final test accuracy, and wire bytes in both "
                "directions."
                + (
                    " Logarithmic axes for times or bytes that span more than a factor of "
                    f"{_LOG_SPAN:g}."
                    if any(log.values())
                    else ""
                )
                + part_caption(k, len(groups), _panel_labels(chosen)),
                f"fig-{stem.replace('_', '-')}-{k}",
            )
        )
    return specs
