"""Figures of how a method learns: test accuracy against time per scenario, and the ratio.

Each function draws one kind of figure over the runs of one experiment and returns its
:class:`~psml_core.report.figures.FigureSpec` list. Time axes name their clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from psml_core.net.cross_traffic import make_cross_traffic
from psml_core.report.figure_layout import (
    REFERENCE,
    SAME_MARKER,
    coinciding,
    line_figures,
    method_styles,
    panel_labels,
    per_group,
    per_iteration,
    present_methods,
    run_panels,
    same_handles,
    seeds_phrase,
)
from psml_core.report.figures import (
    FigureSpec,
    log_axis,
    part_caption,
    spans_decades,
)
from psml_core.report.format import clock_phrase

__all__ = [
    "accuracy_by_scenario_figure",
    "high_state_spans",
    "ratio_figure",
]


def _reference_first(methods: Iterable[str]) -> list[str]:
    """The dense baseline first: a line that repeats it is the one marked, never the baseline."""
    return sorted(methods, key=lambda m: m != REFERENCE)


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
    lines = {
        (w, s): {
            m: d.sort_values("iteration")
            for m in _reference_first(methods)
            if not (
                d := acc[(acc["workload"] == w) & (acc["scenario"] == s) & (acc["method"] == m)]
            ).empty
        }
        for w, s in run_panels(runs)
    }
    same = {
        p: coinciding({m: (d["time_s"], d["mean"]) for m, d in ds.items()})
        for p, ds in lines.items()
    }

    def draw(ax: Axes, w: str, s: str) -> None:
        panel = acc[(acc["workload"] == w) & (acc["scenario"] == s)]
        for m, d in lines[(w, s)].items():
            mark = SAME_MARKER if m in same[(w, s)] else {}
            ax.plot(d["time_s"], d["mean"], label=m, linewidth=1.2, **styles[m], **mark)
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
        *same_handles(styles, methods, same),
        Line2D([], [], label="target accuracy", **_TARGET_STYLE),
    ]

    def caption(k: int, n: int, chunk: Sequence[tuple[str, str]], scale: str) -> str:
        return (
            f"Test accuracy of the global model against {clock} time, one line per method "
            f"({seeds_phrase(runs)}); dashed: the target accuracy, which defines time to "
            f"target.{' ' + scale if scale else ''}"
            f"{part}{part_caption(k, n, [f'{w} · {s}' for w, s in chunk])}"
        )

    return line_figures(run_panels(runs), stem, workdir, draw, legend, caption, {"x": "time"})


# --------------------------------------------------------------------------- ratio (DC2)


_HIGH_STYLE: dict[str, Any] = {"color": "0.88", "linewidth": 0}


def high_state_spans(
    cross_traffic: Mapping[str, Any] | None, seed: int, until: float
) -> tuple[list[tuple[float, float]], int] | None:
    """When a scenario's two-state cross-traffic is in its high state, over ``[0, until]``.

    The chain is a function of the run's seed and simulated time alone
    (:mod:`psml_core.net.cross_traffic`), so it is recomputed here, not re-simulated. Only a
    ``markov`` chain with ``scope: shared`` (one state for the whole network) has one state
    per instant; anything else gives None, as does a chain whose two states are equal.

    Returns:
        The high state's ``(start, end)`` intervals in seconds, and its competing flows.
    """
    spec = dict(cross_traffic or {})
    flows = spec.get("flows")
    if spec.get("kind") != "markov" or spec.get("scope", "shared") != "shared":
        return None
    if not isinstance(flows, list | tuple) or len(flows) != 2 or flows[0] == flows[1]:
        return None
    chain = make_cross_traffic(spec, seed, 1)
    assert chain is not None
    high, t = max(int(f) for f in flows), 0.0
    spans: list[tuple[float, float]] = []
    while t < until:
        end = min(chain.next_change(t), until)
        if chain.at(0, t)[0] == high:
            if spans and spans[-1][1] == t:
                spans[-1] = (spans[-1][0], end)
            else:
                spans.append((t, end))
        t = end
    return spans, high


def ratio_figure(
    runs: pd.DataFrame,
    metrics: Mapping[str, pd.DataFrame],
    methods: Sequence[str],
    workdir: Path,
    stem: str,
    scenarios: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[FigureSpec]:
    """Compression ratio in force per iteration (mean over workers and seeds), per method.

    A panel whose scenario switches a shared two-state cross-traffic chain (``scenarios``:
    the tier's scenario entries) shows instead the first seed's ratio against simulated time,
    with the high state shaded: the states' timing differs between seeds, so a mean over
    seeds would blur what the controller does in each. More than :data:`MAX_SERIES` methods
    are split into groups (:func:`method_groups`).
    """
    data = per_iteration(runs, metrics, "ratio")
    states = {
        str(s): (scenarios or {}).get(str(s), {}).get("cross_traffic")
        for s in runs["scenario"].unique()
    }
    return per_group(
        present_methods(methods, runs),
        stem,
        lambda group, name, part: _ratio_group(
            runs, metrics, data, states, group, workdir, name, part
        ),
    )


class _StatePanel(NamedTuple):
    """A two-state panel: its seed, each method's trace, the high state's spans and flows."""

    seed: int
    traces: dict[str, pd.DataFrame]
    spans: list[tuple[float, float]]
    flows: int


def _state_panel(
    runs: pd.DataFrame,
    metrics: Mapping[str, pd.DataFrame],
    cross_traffic: Mapping[str, Any] | None,
    panel: tuple[str, str],
    methods: Sequence[str],
) -> _StatePanel | None:
    """The first seed's ratio per iteration against the iteration's end (slowest worker)."""
    w, s = panel
    sel = runs[(runs["workload"] == w) & (runs["scenario"] == s)]
    if sel.empty or not cross_traffic:
        return None
    seed = int(sel["seed"].min())
    traces = {}
    for r in sel[sel["seed"] == seed].itertuples(index=False):
        if r.method in methods:
            g = metrics[str(r.run_id)].groupby("iteration", sort=True)
            traces[str(r.method)] = pd.DataFrame(
                {"time_s": g["time_s"].max(), "ratio": g["ratio"].mean()}
            )
    if not traces:
        return None
    until = max(float(t["time_s"].max()) for t in traces.values())
    found = high_state_spans(cross_traffic, seed, until)
    return None if found is None else _StatePanel(seed, traces, *found)


def _ratio_lines(
    panels: Sequence[tuple[str, str]],
    shaded: Mapping[tuple[str, str], _StatePanel],
    data: pd.DataFrame,
    methods: Sequence[str],
) -> dict[tuple[str, str], dict[str, tuple[pd.Series, pd.Series]]]:
    """Per panel, each method's (x, y).

    In a two-state panel its first seed against time, else the mean over seeds against the
    iteration.
    """
    out: dict[tuple[str, str], dict[str, tuple[pd.Series, pd.Series]]] = {}
    for w, s in panels:
        two = shaded.get((w, s))
        if two is not None:
            out[(w, s)] = {
                m: (two.traces[m]["time_s"], two.traces[m]["ratio"])
                for m in _reference_first(two.traces)
            }
            continue
        panel = data[(data["workload"] == w) & (data["scenario"] == s)]
        out[(w, s)] = {
            m: (d["iteration"], d["mean"])
            for m in _reference_first(methods)
            if not (d := panel[panel["method"] == m]).empty
        }
    return out


def _ratio_group(
    runs: pd.DataFrame,
    metrics: Mapping[str, pd.DataFrame],
    data: pd.DataFrame,
    states: Mapping[str, Any],
    methods: Sequence[str],
    workdir: Path,
    stem: str,
    part: str,
) -> list[FigureSpec]:
    styles = method_styles(methods)
    log = spans_decades(data["mean"])
    panels = run_panels(runs)
    shaded = {
        p: sp
        for p in panels
        if (sp := _state_panel(runs, metrics, states.get(p[1]), p, methods)) is not None
    }

    lines = _ratio_lines(panels, shaded, data, methods)
    same = {p: coinciding(ls) for p, ls in lines.items()}

    def draw(ax: Axes, w: str, s: str) -> None:
        panel = data[(data["workload"] == w) & (data["scenario"] == s)]
        two = shaded.get((w, s))
        for a, b in two.spans if two is not None else ():
            ax.axvspan(a, b, **_HIGH_STYLE)
        for m, (x, y) in lines[(w, s)].items():
            mark = SAME_MARKER if m in same[(w, s)] else {}
            # A step's ratio holds from the previous step's end to its own.
            steps = {"drawstyle": "steps-pre"} if two is not None else {}
            ax.plot(x, y, linewidth=1.2, **styles[m], **mark, **steps)
        if two is not None:
            ax.set_xlabel(f"{clock_phrase(runs['clock'])} time (s), seed {two.seed}")
        else:
            ax.set_xlabel("iteration")
        if log:
            log_axis(ax.yaxis, ax.set_yscale, panel["mean"])
        ax.set_ylabel("compression ratio (1 = dense)")

    legend: list[Any] = same_handles(styles, methods, same)
    flows = sorted({sp.flows for sp in shaded.values()})
    if flows:
        label = f"high state ({', '.join(map(str, flows))} competing flows per link)"
        legend.append(Patch(label=label, **_HIGH_STYLE))

    def caption(k: int, n: int, chunk: Sequence[tuple[str, str]], scale: str) -> str:
        two = [f"{w} · {s}" for w, s in chunk if (w, s) in shaded]
        note = (
            f" In {', '.join(two)}: each method's first seed against simulated time, with the "
            "high state of the scenario's two-state cross-traffic shaded (the states' timing "
            "differs between seeds, so a mean over seeds would blur each state's ratio)."
            if two
            else ""
        )
        return (
            "Compression ratio in force at each iteration (the share of the update sent; 1 is "
            "dense), mean over workers and seeds, one panel per workload · scenario: an adaptive "
            "controller moves it with the measured delay, a fixed ratio stays flat."
            + note
            + (" " + scale if scale else "")
            + part
            + part_caption(k, n, panel_labels(chunk))
        )

    return line_figures(panels, stem, workdir, draw, legend, caption, {"y": "ratio"})


# --------------------------------------------------------------------------- horizontal bars
