"""The report's figures: seaborn/matplotlib, saved as deterministic SVG.

Each function draws one figure into a file and returns its caption. Axis labels name the clock
of the runs ("simulated time (s)" or "wall-clock time (s)"), read from the metrics' ``clock``
column, so a simulated curve can never pass for a measured one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator

from psml_core.report.style import TEXT_WIDTH_IN, palette, report_style, save_svg
from psml_core.report.tables import clock_phrase, fmt_bytes, fmt_seconds

__all__ = [
    "FigureSpec",
    "accuracy_figure",
    "breakdown_figure",
    "bytes_figure",
    "curves",
    "loss_figure",
]

# Values spanning more than this factor get a logarithmic axis.
_LOG_SPAN = 30.0
_LINESTYLES = ("-", "--", ":", "-.")
_SETTING = ("method", "scenario")


@dataclass(frozen=True)
class FigureSpec:
    """A figure written to ``file`` (relative to the work directory), with its caption."""

    file: str
    caption: str
    label: str


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


def _settings(runs: pd.DataFrame) -> list[tuple[str, str]]:
    return sorted({(str(a), str(b)) for a, b in runs[list(_SETTING)].itertuples(index=False)})


def _style_map(settings: Sequence[tuple[str, str]]) -> dict[tuple[str, str], dict[str, object]]:
    """One colour per (method, scenario), a line style per scenario to help in grey print."""
    colours = palette(len(settings))
    scenarios = sorted({s for _, s in settings})
    return {
        st: {"color": colours[i], "linestyle": _LINESTYLES[scenarios.index(st[1]) % 4]}
        for i, st in enumerate(settings)
    }


def _label(setting: tuple[str, str]) -> str:
    return f"{setting[0]} · {setting[1]}"


def _spans(values: pd.Series | np.ndarray) -> bool:
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    return v.size > 1 and float(v.max() / v.min()) > _LOG_SPAN


def _time_label(clock: str) -> str:
    return f"{clock} time (s)"


# --------------------------------------------------------------------------- line figures


def _draw_lines(ax: Axes, panel: pd.DataFrame, styles: Mapping, band: bool) -> None:
    for setting, style in styles.items():
        d = panel[(panel["method"] == setting[0]) & (panel["scenario"] == setting[1])]
        if d.empty:
            continue
        d = d.sort_values("iteration")
        ax.plot(d["time_s"], d["mean"], label=_label(setting), linewidth=1.2, **style)
        if band and (d["n"] > 1).any():
            ax.fill_between(
                d["time_s"], d["lo"], d["hi"], color=style["color"], alpha=0.2, linewidth=0
            )


def _finish_axes(ax: Axes, panel: pd.DataFrame, title: str, ylabel: str, log_y: bool) -> None:
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.set_xlabel(_time_label(clock_phrase(panel["clock"])))
    if _spans(panel["time_s"]):
        ax.set_xscale("log")
    if log_y and _spans(pd.concat([panel["lo"], panel["hi"]])):
        ax.set_yscale("log")


def _legend(fig: plt.Figure, styles: Mapping, extra: Sequence[Line2D] = ()) -> None:
    handles = [Line2D([], [], label=_label(s), linewidth=1.4, **st) for s, st in styles.items()]
    handles += list(extra)
    fig.legend(
        handles=handles, loc="outside lower center", ncol=min(3, len(handles)), frameon=False
    )


def loss_figure(curve: pd.DataFrame, runs: pd.DataFrame, path: Path) -> FigureSpec:
    """Training and test loss against time: one row of panels per workload.

    Args:
        curve: Output of :func:`curves`.
        runs: The runs table.
        path: Destination SVG.
    """
    workloads = sorted(runs["workload"].astype(str).unique())
    styles = _style_map(_settings(runs))
    band = int(runs.groupby(["workload", *_SETTING]).size().max()) > 1
    kinds = (("train_loss", "training loss"), ("test_loss", "test loss"))
    with report_style():
        fig, axes = plt.subplots(
            len(workloads),
            2,
            squeeze=False,
            layout="constrained",
            figsize=(TEXT_WIDTH_IN, 2.1 * len(workloads) + 0.5),
        )
        for i, w in enumerate(workloads):
            for j, (kind, name) in enumerate(kinds):
                panel = curve[(curve["workload"] == w) & (curve["kind"] == kind)]
                _draw_lines(axes[i, j], panel, styles, band)
                _finish_axes(axes[i, j], panel, f"{w}: {name}", name, log_y=True)
        _legend(fig, styles)
        save_svg(fig, path)
    clock = clock_phrase(curve["clock"]) if len(curve) else clock_phrase(runs["clock"])
    spread = (
        "Lines are means over seeds, bands span the minimum to the maximum."
        if band
        else "One seed per line."
    )
    return FigureSpec(
        path.name,
        f"Loss against {clock} time (s), per workload: training loss (mean mini-batch loss "
        f"over workers, at the time the last worker finished the iteration) and test loss of "
        f"the global model at each evaluation; one line per method · scenario. {spread} "
        "Logarithmic axes where values span more than a factor of 30.",
        "fig-loss",
    )


def accuracy_figure(curve: pd.DataFrame, runs: pd.DataFrame, path: Path) -> FigureSpec:
    """Test accuracy against time, one panel per workload, with the target as a dashed line."""
    workloads = sorted(runs["workload"].astype(str).unique())
    styles = _style_map(_settings(runs))
    band = int(runs.groupby(["workload", *_SETTING]).size().max()) > 1
    ncols = 1 if len(workloads) == 1 else 2
    nrows = -(-len(workloads) // ncols)
    targets = runs.groupby("workload")["target_accuracy"].first()
    with report_style():
        fig, axes = plt.subplots(
            nrows,
            ncols,
            squeeze=False,
            layout="constrained",
            figsize=(TEXT_WIDTH_IN, 2.2 * nrows + 0.5),
        )
        for i, w in enumerate(workloads):
            ax = axes[i // ncols, i % ncols]
            panel = curve[(curve["workload"] == w) & (curve["kind"] == "test_accuracy")]
            _draw_lines(ax, panel, styles, band)
            ax.axhline(float(targets[w]), color="0.35", linestyle=(0, (4, 2)), linewidth=0.9)
            _finish_axes(ax, panel, w, "test accuracy", log_y=False)
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0%}"))
        for k in range(len(workloads), nrows * ncols):
            axes[k // ncols, k % ncols].set_visible(False)
        target = Line2D([], [], color="0.35", linestyle=(0, (4, 2)), label="target accuracy")
        _legend(fig, styles, [target])
        save_svg(fig, path)
    clock = clock_phrase(curve["clock"]) if len(curve) else clock_phrase(runs["clock"])
    return FigureSpec(
        path.name,
        f"Test accuracy of the global model against {clock} time (s), per workload; the dashed "
        "line is the workload's target accuracy, which defines time to target.",
        "fig-accuracy",
    )


# --------------------------------------------------------------------------- bar figures


def _bytes_axis(ax: Axes, log: bool) -> None:
    if log:
        ax.xaxis.set_major_locator(LogLocator(base=10))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt_bytes(v) if v > 0 else "0"))


def bytes_figure(runs: pd.DataFrame, path: Path) -> FigureSpec:
    """Wire bytes per direction, per method · scenario, one panel per workload (mean of seeds)."""
    workloads = sorted(runs["workload"].astype(str).unique())
    settings = _settings(runs)
    long = runs.melt(
        id_vars=["workload", "method", "scenario", "seed"],
        value_vars=["bytes_up", "bytes_down"],
        var_name="direction",
        value_name="bytes",
    )
    long["direction"] = long["direction"].map({"bytes_up": "up", "bytes_down": "down"})
    long["setting"] = [
        _label((m, s)) for m, s in zip(long["method"], long["scenario"], strict=True)
    ]
    colours = palette(2)
    heights = [0.32 * len(settings) + 0.55 for _ in workloads]
    with report_style():
        fig, axes = plt.subplots(
            len(workloads),
            1,
            squeeze=False,
            layout="constrained",
            figsize=(TEXT_WIDTH_IN, sum(heights) + 0.4),
            gridspec_kw={"height_ratios": heights},
        )
        for ax, w in zip(axes[:, 0], workloads, strict=True):
            sub = long[long["workload"] == w]
            log = _spans(sub["bytes"])
            sns.barplot(
                data=sub,
                y="setting",
                x="bytes",
                hue="direction",
                orient="h",
                ax=ax,
                order=[_label(s) for s in settings],
                hue_order=["up", "down"],
                palette=colours,
                errorbar=None,
                legend=False,
                log_scale=log,
            )
            _bytes_axis(ax, log)
            for container in ax.containers:
                ax.bar_label(
                    container,
                    labels=[fmt_bytes(b.get_width()) for b in container],
                    padding=2,
                    fontsize=6.5,
                )
            ax.set_xlim(right=ax.get_xlim()[1] * (4 if log else 1.18))
            ax.set(title=w, xlabel="wire bytes (all workers, all iterations)", ylabel="")
        names = ("up (worker → server)", "down (server → worker)")
        handles = [Patch(color=c, label=n) for c, n in zip(colours, names, strict=True)]
        fig.legend(handles=handles, loc="outside lower center", ncol=2, frameon=False)
        save_svg(fig, path)
    return FigureSpec(
        path.name,
        "Wire bytes per direction, summed over workers and iterations, per method · scenario "
        "(mean over seeds; exact encoded sizes). Logarithmic axis where values span more than "
        "a factor of 30.",
        "fig-bytes",
    )


_PARTS = (("compute_s", "compute"), ("comm_s", "communication"), ("wait_s", "wait"))


def breakdown_figure(runs: pd.DataFrame, path: Path) -> FigureSpec:
    """Share of worker time in compute / communication / wait, one stacked bar per run."""
    workloads = sorted(runs["workload"].astype(str).unique())
    colours = palette(len(_PARTS))
    counts = [int((runs["workload"] == w).sum()) for w in workloads]
    heights = [0.3 * c + 0.55 for c in counts]
    with report_style():
        fig, axes = plt.subplots(
            len(workloads),
            1,
            squeeze=False,
            layout="constrained",
            figsize=(TEXT_WIDTH_IN, sum(heights) + 0.4),
            gridspec_kw={"height_ratios": heights},
        )
        for ax, w in zip(axes[:, 0], workloads, strict=True):
            sub = runs[runs["workload"] == w].sort_values(["method", "scenario", "seed"])
            _stacked(ax, sub, colours)
            ax.set_title(w)
        handles = [Patch(color=c, label=n) for c, (_, n) in zip(colours, _PARTS, strict=True)]
        fig.legend(handles=handles, loc="outside lower center", ncol=3, frameon=False)
        save_svg(fig, path)
    return FigureSpec(
        path.name,
        f"Where the workers' time went, per run: shares of compute, communication and wait "
        f"(blocked by the sync policy), summed over workers; the number after each bar is that "
        f"sum in {clock_phrase(runs['clock'])} seconds. Shares rather than seconds because the "
        "scenarios' totals differ by orders of magnitude.",
        "fig-breakdown",
    )


def _stacked(ax: Axes, sub: pd.DataFrame, colours: Sequence) -> None:
    labels = [f"{r.method} · {r.scenario} · seed {int(r.seed)}" for r in sub.itertuples()]
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
