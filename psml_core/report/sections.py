"""The report's per-paper and head-to-head sections.

An experiment of the tier (``experiments.<name>`` in the tier file) is a grid of its own:
methods x workloads x scenarios x seeds, empty lists meaning the tier's. A paper's section
shows the runs of the experiments whose ``paper`` is that paper, and the figures that its
recipes call for, read off the recipes rather than off the paper's name:

* an adaptive controller (anything but ``static``): the compression ratio over iterations;
* a sync policy other than BSP and ASP (bounded staleness, predicted sync points): wait-time
  fraction and staleness, and the local steps per round of a round policy;
* placements that differ, or pulls of the touched keys: remote bytes per placement, measured
  and predicted, and the sparsity before and after feature hashing when a recipe hashes;
* lossless (Snappy) sizes: raw against Snappy bytes;
* a parameter sweep: the trade-off table of the swept values beside the other methods.

Every section also has the test accuracy against time and the bytes per direction, and the
paper's reported tables (``tables:`` of its paper file) beside ours.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from psml_core.analysis.experiments import experiment_grid, experiment_runs
from psml_core.errors import DataError
from psml_core.report import reported_vs_ours as vd
from psml_core.report import tables as tb
from psml_core.report import trade_offs as to
from psml_core.report.claim_notes import (
    claim_notes,
    measurement_notes,
    miss_notes,
    section_holds,
)
from psml_core.report.claim_regimes import paper_regime_table
from psml_core.report.figures import FigureSpec, bytes_figure, curves
from psml_core.report.figures_learning import accuracy_by_scenario_figure, ratio_figure
from psml_core.report.figures_sync import sync_figure
from psml_core.report.figures_traffic import (
    head_to_head_figure,
    lossless_figure,
    placement_traffic_figure,
)
from psml_core.report.format import DASH, decoded, fmt_value, variant_meanings
from psml_core.report.sweeps import sweep_table

__all__ = [
    "HEAD_TO_HEAD",
    "experiment_aggregate",
    "experiment_runs",
    "head_to_head_section",
    "paper_sections",
]

HEAD_TO_HEAD = "head_to_head"
"""The experiment the head-to-head section shows, when the tier defines it."""


# --------------------------------------------------------------------------- experiments


def experiment_aggregate(aggregate: pd.DataFrame, name: str, runs: pd.DataFrame) -> pd.DataFrame:
    """Experiment ``name``'s rows of ``aggregate.csv``, checked against its ``runs``.

    Raises:
        DataError: The rows do not cover exactly the runs' (workload, method, scenario) cells
            with their numbers of seeds: ``aggregate.csv`` is older than ``runs.csv``.
    """
    agg = aggregate[aggregate["experiment"] == name].drop(columns="experiment")
    agg = agg.reset_index(drop=True)
    have = {(str(r.workload), str(r.method), str(r.scenario)): int(r.n) for r in agg.itertuples()}
    want = {
        (str(w), str(m), str(s)): len(g)
        for (w, m, s), g in runs.groupby(["workload", "method", "scenario"], sort=True)
    }
    if have != want:
        raise DataError(
            f"aggregate.csv's rows of experiment {name!r} do not match the runs table (cells or "
            "numbers of seeds differ): it is older than runs.csv; re-run `psml compare`"
        )
    return agg


def _recipe(experiment: Mapping[str, Any], method: str) -> Mapping[str, Any]:
    return (experiment.get("recipes") or {}).get(method) or {}


def _block_name(recipe: Mapping[str, Any], block: str) -> str:
    spec = recipe.get(block)
    return str(spec.get("name", "")) if isinstance(spec, Mapping) else str(spec or "")


def _placement_label(recipe: Mapping[str, Any], iterations: int) -> str:
    """The recipe's placement as a reader would name it in this experiment.

    A dynamic placement whose decision period is beyond the run never reassigns a chunk (the
    static baseline is written that way, to share the dynamic one's chunking), so it reads
    ``static``, not ``dynamic``.
    """
    name = _block_name(recipe, "placement")
    spec = recipe.get("placement")
    params = (spec.get("params") or {}) if isinstance(spec, Mapping) else {}
    if name == "dynamic" and iterations and int(params.get("period", 0) or 0) >= iterations:
        return "static"
    return name


def _experiment_text(
    name: str, experiment: Mapping[str, Any], ex: Mapping[str, Any], runs: pd.DataFrame
) -> str:
    g = experiment_grid(experiment, ex)
    roles: dict[str, list[str]] = {}
    for m in g["methods"]:
        roles.setdefault(str(_recipe(experiment, m).get("role") or "baseline"), []).append(m)
    said = variant_meanings(experiment)  # swept names decoded where they are used
    who = "; ".join(
        f"{role}: {', '.join(decoded(m, said) for m in ms)}" for role, ms in sorted(roles.items())
    )
    desc = fmt_value(ex.get("description"))
    lead = f"Experiment {name} of tier {fmt_value(experiment.get('tier'))}"
    lead += f": {desc}" if desc != DASH else "."
    if not lead.endswith("."):
        lead += "."
    planned = len(g["methods"]) * len(g["workloads"]) * len(g["scenarios"]) * len(g["seeds"])
    if len(runs):  # the cluster as run: workers and shards read from the runs themselves
        sizes = sorted(
            {(int(w), int(s)) for w, s in zip(runs["workers"], runs["shards"], strict=True)}
        )
        cluster = ", ".join(f"{w} workers and {s} shards" for w, s in sizes)
    else:
        cluster = f"{experiment.get('workers')} workers and {experiment.get('shards')} shards"
    scenarios = ", ".join(decoded(x, said) for x in g["scenarios"])
    return (
        f"{lead} Recipes: {who}. On {cluster}, workloads {', '.join(g['workloads'])}, "
        f"scenarios {scenarios}, seeds {', '.join(map(str, g['seeds']))}: "
        f"{len(runs)} of {planned} runs in the runs table."
    )


def _figures_for(
    name: str,
    experiment: Mapping[str, Any],
    ex: Mapping[str, Any],
    runs: pd.DataFrame,
    frames: Mapping[str, pd.DataFrame],
    sparsity: Mapping[str, Mapping[str, Any]],
    partitions: Mapping[tuple[str, str], Mapping[str, Any]],
    workdir: Path,
) -> tuple[list[FigureSpec], list[tb.Table]]:
    """The figures (and extra tables) of one experiment's runs; see the module docstring."""
    methods = experiment_grid(experiment, ex)["methods"]
    recipes = {m: _recipe(experiment, m) for m in methods}
    metrics = {str(r): frames[str(r)] for r in runs["run_id"]}
    figs = accuracy_by_scenario_figure(
        curves(runs, metrics), runs, methods, workdir, f"{name}_accuracy"
    )
    figs += bytes_figure(runs, workdir, stem=f"{name}_bytes", log=True)
    extra: list[tb.Table] = []
    if any(_block_name(r, "controller") not in ("", "static") for r in recipes.values()):
        scenarios = experiment.get("scenarios") or {}
        figs += ratio_figure(runs, metrics, methods, workdir, f"{name}_ratio", scenarios)
    if any(_block_name(r, "sync") not in ("", "bsp", "asp") for r in recipes.values()):
        rounds = [
            m
            for m in methods
            if any(
                float(metrics[str(r)]["local_steps"].max()) > 1
                for r in runs.loc[runs["method"] == m, "run_id"]
            )
        ]
        figs += sync_figure(runs, metrics, methods, rounds, workdir, f"{name}_sync")
    longest = {str(m): int(pd.to_numeric(g["iterations"]).max()) for m, g in runs.groupby("method")}
    placements = {m: _placement_label(r, longest.get(m, 0)) for m, r in recipes.items()}
    touched = {m for m, r in recipes.items() if r.get("pull") == "touched"}
    if len(set(placements.values())) > 1 or touched:
        predicted = {
            (w, m): p["per_step"]
            for (w, m), p in partitions.items()
            if m in touched
            and isinstance(p.get("per_step"), Mapping)
            and not tb.counted_every_key(p)
        }
        figs += placement_traffic_figure(
            runs, predicted, methods, placements, workdir, f"{name}_traffic"
        )
        # Only this experiment's workloads, and only placements whose runs move the keys a
        # batch touches: a dense push's remote bytes do not compare with the bound's.
        here = set(runs["workload"])
        bounded = {k: p for k, p in partitions.items() if k[0] in here and k[1] in touched}
        table = tb.oracle_table(f"{name}_oracle", runs, bounded, methods, placements)
        if table is not None:
            extra.append(table)
    if "dynamic" in placements.values():
        table = tb.reassignment_table(f"{name}_reassignment", runs, methods)
        if table is not None:
            extra.append(table)
    if any(r.get("hashing") for r in recipes.values()):
        workloads = experiment.get("workloads") or {}
        used = {str((workloads.get(w) or {}).get("dataset")) for w in set(runs["workload"])}
        table = tb.hashing_table(
            f"{name}_hashing", {d: s for d, s in sparsity.items() if d in used}
        )
        if table is not None:
            extra.append(table)
    if any(str(r.get("lossless") or "none") != "none" for r in recipes.values()):
        figs += lossless_figure(runs, metrics, methods, workdir, f"{name}_lossless")
    return figs, extra


def _fig(f: FigureSpec) -> dict[str, Any]:
    return {"file": f.file, "caption": f.caption, "label": f.label, "width": f.width}


# --------------------------------------------------------------------------- papers


def _byline(paper: Mapping[str, Any]) -> str:
    parts = [str(paper["authors"]), str(paper["venue"])]
    if paper.get("doi"):
        parts.append(f"doi {paper['doi']}")
    return " · ".join(parts)


def paper_sections(
    *,
    papers: Mapping[str, Mapping[str, Any]],
    claims: pd.DataFrame,
    runs: pd.DataFrame,
    frames: Mapping[str, pd.DataFrame],
    experiment: Mapping[str, Any],
    sparsity: Mapping[str, Mapping[str, Any]],
    partitions: Mapping[tuple[str, str], Mapping[str, Any]],
    papers_dir: Path,
    workdir: Path,
    map_axes: frozenset[str] = frozenset(),
    on_paper: Callable[[int, str], None] | None = None,
) -> list[dict[str, Any]]:
    """One section per paper, in id order, for the template (tables written to ``workdir``).

    ``on_paper(i, pid)`` is called as the i-th paper (from 1) starts, for the build's log;
    ``map_axes`` are the axes of the tier's regime maps (an explanation that points at a map,
    table or figure the report lacks loses that pointer: :func:`.claim_notes.section_holds`).
    """
    experiments = experiment.get("experiments") or {}
    out = []
    for i, pid in enumerate(sorted(papers), 1):
        if on_paper is not None:
            on_paper(i, pid)
        paper = papers[pid]
        mine = claims[claims["paper"] == pid]
        named = sorted(n for n, ex in experiments.items() if (ex or {}).get("paper") == pid)
        wanted = sorted({str(c["measure"]["experiment"]) for c in paper["claims"]})
        # The claims' experiments count too, even if the tier forgot to tag them with the paper.
        names = sorted(set(named) | {n for n in wanted if n in experiments})
        paper_file = str(Path(papers_dir).name) + f"/{pid}.yaml"
        reported = [
            to.reported_table(f"{pid}_{spec['id']}", spec, runs, experiment, paper_file).write(
                workdir
            )
            for spec in paper.get("tables") or []
        ]
        texts, figures, tables = _experiments_parts(
            names, paper, experiment, runs, frames, sparsity, partitions, workdir
        )
        held = section_holds({"tables": tables, "figures": figures, "reported": reported}, map_axes)
        if not names:
            texts.append(
                f"The {fmt_value(experiment.get('tier'))} tier defines no experiment "
                f"for this paper: its claims name experiment {', '.join(wanted)}, which the tier "
                "does not run. So there are no runs, figures or measured claims here; run a tier "
                "that defines it."
            )
        out.append(
            {
                "id": pid,
                "heading": f"{pid}: {paper['title']}",
                "byline": _byline(paper),
                "evidence": fmt_value(paper.get("evidence")),
                "setup": " ".join(str(paper.get("setup") or DASH).split()),
                "deviations": [str(d) for d in paper.get("deviations") or []],
                "experiments": texts,
                "claims": claim_notes(paper),
                "figures": figures,
                "tables": tables,
                "reported": reported,
                "verdicts": [vd.paper_claims_table(mine, pid).write(workdir)],
                "regimes": [
                    t.write(workdir) for t in [paper_regime_table(mine, pid)] if t is not None
                ],
                "misses": miss_notes(mine, paper_file, held),
                "measured": measurement_notes(mine, paper),
            }
        )
    return out


def _experiments_parts(
    names: list[str],
    paper: Mapping[str, Any],
    experiment: Mapping[str, Any],
    runs: pd.DataFrame,
    frames: Mapping[str, pd.DataFrame],
    sparsity: Mapping[str, Mapping[str, Any]],
    partitions: Mapping[tuple[str, str], Mapping[str, Any]],
    workdir: Path,
) -> tuple[list[str], list[dict[str, Any]], list[dict[str, Any]]]:
    """A paper's experiments: their texts, figures and tables (a table two share: once)."""
    experiments = experiment.get("experiments") or {}
    texts: list[str] = []
    figures: list[dict[str, Any]] = []
    tables: list[dict[str, Any]] = []
    shown: set[tuple[tuple[str, ...], ...]] = set()
    for name in names:
        ex = experiments[name] or {}
        sub = experiment_runs(runs, experiment, ex)
        texts.append(_experiment_text(name, experiment, ex, sub))
        if sub.empty:
            texts.append(
                f"The runs table holds no run of experiment {name}, so there is nothing to "
                "draw; run the workflow for this tier to make them."
            )
            continue
        figs, extra = _figures_for(name, experiment, ex, sub, frames, sparsity, partitions, workdir)
        figures += [_fig(f) for f in figs]
        for t in extra:
            content = (tuple(t.header), *map(tuple, t.rows))
            if content not in shown:
                shown.add(content)
                tables.append(t.write(workdir))
        settings = {
            m: text
            for spec in paper.get("tables") or []
            if spec["experiment"] == name
            for m, text in to.paper_settings(spec).items()
        }
        sweep = sweep_table(f"{name}_sweep", name, experiment, runs, settings)
        if sweep is not None:
            tables.append(sweep.write(workdir))
    return texts, figures, tables


# --------------------------------------------------------------------------- head-to-head


def head_to_head_section(
    *,
    runs: pd.DataFrame,
    aggregate: pd.DataFrame,
    frames: Mapping[str, pd.DataFrame],
    experiment: Mapping[str, Any],
    workdir: Path,
) -> dict[str, Any]:
    """The head-to-head: every method of the experiment ``head_to_head`` across its scenarios.

    Its table prints the means ``psml compare`` wrote to ``aggregate.csv`` for the experiment
    (:func:`experiment_aggregate`), not means recomputed here.
    """
    ex = (experiment.get("experiments") or {}).get(HEAD_TO_HEAD)
    tier = fmt_value(experiment.get("tier"))
    if ex is None:
        return {
            "intro": f"The {tier} tier has no head-to-head experiment (an experiment "
            f"named {HEAD_TO_HEAD} that runs every method side by side on the same workload and "
            "scenarios), so this report has no head-to-head section; a tier that defines one "
            "gets it.",
            "tables": [],
            "figures": [],
        }
    sub = experiment_runs(runs, experiment, ex)
    intro = _experiment_text(HEAD_TO_HEAD, experiment, ex, sub)
    if sub.empty:
        return {
            "intro": intro + " The runs table holds no run of it yet.",
            "tables": [],
            "figures": [],
        }
    methods: Sequence[str] = experiment_grid(experiment, ex)["methods"]
    metrics = {str(r): frames[str(r)] for r in sub["run_id"]}
    figs = head_to_head_figure(sub, methods, workdir, f"{HEAD_TO_HEAD}_summary")
    figs += accuracy_by_scenario_figure(
        curves(sub, metrics), sub, methods, workdir, f"{HEAD_TO_HEAD}_accuracy"
    )
    agg = experiment_aggregate(aggregate, HEAD_TO_HEAD, sub)
    table = tb.head_to_head_table(f"{HEAD_TO_HEAD}", agg, methods)
    return {
        "intro": intro,
        "tables": [table.write(workdir)],
        "figures": [_fig(f) for f in figs],
    }
