"""Figures of bytes: predicted against measured placement traffic, lossless coding, head to head."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

from psml_core.report.figure_layout import (
    BAR_IN,
    PANEL_IN,
    bar_figures,
    hbars,
    method_styles,
    panel_labels,
    present_methods,
    run_panels,
    seed_means,
)
from psml_core.report.figures import (
    HALF_LABEL_CHARS,
    LEGEND_IN,
    MAX_FIGURE_HEIGHT_IN,
    FigureSpec,
    log_locator,
    pack_panels,
    part_caption,
    scale_sentence,
    short_settings,
    spans_decades,
    tick_text,
)
from psml_core.report.format import CENSORED, clock_phrase, fmt_bytes, fmt_percent, fmt_seconds
from psml_core.report.style import TEXT_WIDTH_IN, palette, report_style, save_svg

__all__ = [
    "head_to_head_figure",
    "lossless_figure",
    "placement_traffic_figure",
]


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
    methods = present_methods(methods, runs)
    per_run = runs.assign(
        up=pd.to_numeric(runs["remote_bytes_up"]) / pd.to_numeric(runs["iterations"]),
        down=pd.to_numeric(runs["remote_bytes_down"]) / pd.to_numeric(runs["iterations"]),
    )
    means = seed_means(per_run, ["workload", "scenario", "method"], ["up", "down"])
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
    methods = present_methods(methods, runs)
    series = ("raw up", "raw down", "Snappy up", "Snappy down")
    sums = seed_means(_lossless_sums(runs, metrics), ["workload", "method", "scenario"], series)
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
    log = spans_decades(data["value"])
    # A panel holds at most as many labels as fit a figure; more are split into parts.
    room = max(1, int((MAX_FIGURE_HEIGHT_IN - LEGEND_IN - PANEL_IN) // (len(series) * BAR_IN)))
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
        hbars(
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
        ax.xaxis.set_major_formatter(FuncFormatter(tick_text(fmt_bytes)))

    legend = [
        Patch(facecolor=colours[0], label=legend_labels[0]),
        Patch(facecolor=colours[1], label=legend_labels[1]),
        Patch(facecolor=colours[0], hatch="////", edgecolor="white", label=legend_labels[2]),
        Patch(facecolor=colours[1], hatch="////", edgecolor="white", label=legend_labels[3]),
    ]

    def caption(k: int, n: int, names: Sequence[str], scale: str) -> str:
        return text + (" " + scale if scale else "") + part_caption(k, n, names)

    panels = [(name, len(series) * len(labels)) for name, (_, labels) in parts.items()]
    half = max(len(str(lb)) for lb in data["label"]) <= HALF_LABEL_CHARS
    return bar_figures(panels, stem, workdir, draw, legend, caption, half, "byte")


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
        ax.xaxis.set_major_locator(log_locator(left, top * 12))
        ax.xaxis.set_minor_formatter(NullFormatter())
    else:
        ax.set_xlim(0, top * 1.5)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=3))
    ax.xaxis.set_major_formatter(FuncFormatter(tick_text(fmt)))
    ax.set_yticks(y, list(labels))
    ax.set_ylim(len(values) - 0.5, -0.5)
    ax.grid(axis="y", visible=False)


def head_to_head_figure(
    runs: pd.DataFrame, methods: Sequence[str], workdir: Path, stem: str
) -> list[FigureSpec]:
    """Time to target, final accuracy and bytes of every method, a row per workload · scenario."""
    methods = present_methods(methods, runs)
    styles = method_styles(methods)
    cols = [c for c, _ in _H2H]
    means = seed_means(
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
    log = {c: c != "final_test_accuracy" and spans_decades(means[c]) for c in cols}
    panels = run_panels(runs)
    row_h = PANEL_IN + BAR_IN * len(methods)
    groups = pack_panels([row_h] * len(panels), MAX_FIGURE_HEIGHT_IN - LEGEND_IN)
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
            scale = scale_sentence(
                {
                    "time-to-target": [ax.xaxis for ax in axes[:, 0]],
                    "byte": [ax.xaxis for ax in axes[:, 2]],
                }
            )
            save_svg(fig, path)
        specs.append(
            FigureSpec(
                path.name,
                f"Head-to-head, one row per workload · scenario, one bar per method (mean over "
                f"seeds): time to target on the {clock} clock (over the seeds that held the "
                "target to the end of the run; the others counted as censored, "
                f"“{CENSORED}” if none held it), final test accuracy, and wire bytes in both "
                "directions."
                + (" " + scale if scale else "")
                + part_caption(k, len(groups), panel_labels(chosen)),
                f"fig-{stem.replace('_', '-')}-{k}",
            )
        )
    return specs
