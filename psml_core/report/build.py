"""Build the PDF report from run results, with Typst.

:func:`build_report` reads only the files it is given. It writes the figures (``fig_*.svg``),
the tables (``table_*.csv``), ``report_data.json`` and ``report.typ`` into a work directory,
compiles them with the ``typst`` wheel (:mod:`psml_core.report.typeset`: fixed fonts, no date)
and moves the PDF into place atomically. Identical inputs give a byte-identical PDF.

The report: a title page with the verdicts of every claim; the setup; one section per paper
(its claims, our setup and deviations, the figures of its experiment and the trade-off of each
parameter sweep, the paper's reported tables beside ours, reported versus reproduced); the
head-to-head; the results over all runs; appendices with every recipe in use (our design
choices marked) and the provenance. Every number in it is read from the input
files; the template holds none.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from psml_core.analysis.aggregate import RUN_KEYS, read_aggregate_csv, read_runs_csv
from psml_core.analysis.claims import load_papers
from psml_core.analysis.experiments import ALL_RUNS, experiment_grid
from psml_core.analysis.regime_map import map_summaries
from psml_core.atomic import write_json, write_text
from psml_core.errors import DataError
from psml_core.report import attachments as at
from psml_core.report import reported_vs_ours as vd
from psml_core.report import tables as tb
from psml_core.report import tables_points as tpts
from psml_core.report import tables_provenance as tp
from psml_core.report import tables_setup as ts
from psml_core.report.claim_regimes import regimes_frame
from psml_core.report.figure_layout import report_methods
from psml_core.report.figures import FigureSpec
from psml_core.report.figures_breakdown import breakdown_figure
from psml_core.report.format import clock_phrase, fmt_value
from psml_core.report.glossary import glossary_section
from psml_core.report.inputs import (
    load_metrics,
    named_json,
    partition_entry,
    partition_files,
    read_regime_map,
    require_files,
)
from psml_core.report.regime_maps import regime_map_section
from psml_core.report.sections import experiment_aggregate, head_to_head_section, paper_sections
from psml_core.report.typeset import compile_pdf
from psml_core.report.validation import validation_block
from psml_core.validate.table import read_table

__all__ = ["DEFAULT_TITLE", "TEMPLATE", "ReportInputs", "build_report"]

DEFAULT_TITLE = "psml: reproducing parameter-server communication methods"
TEMPLATE = Path(__file__).resolve().parent / "templates" / "report.typ"

_CLOCK_NOTE = {
    "simulated": "virtual time from the sim backend's network and compute models, not the time "
    "the runs took to compute",
    "wall-clock": "real elapsed time of the worker processes",
}


def _stage(text: str) -> None:
    """One plain line on stderr: the stage the build is in (a report takes minutes)."""
    print(f"report: {text}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- inputs


def _figures(runs: pd.DataFrame, workdir: Path) -> list[FigureSpec]:
    # Accuracy curves and bytes are drawn per experiment in the papers' sections (a handful of
    # series per panel); here only where the workers' time went, which no section shows.
    return breakdown_figure(runs, workdir)


def _results_intro(runs: pd.DataFrame) -> str:
    clocks = sorted(set(runs["clock"].astype(str)))
    notes = "; ".join(f"{c}: {_CLOCK_NOTE.get(c, c)}" for c in clocks)
    counts = ", ".join(
        _count(runs[col].nunique(), word)
        for col, word in (
            ("workload", "workload"),
            ("method", "method"),
            ("scenario", "network scenario"),
            ("seed", "seed"),
        )
    )
    status = runs["status"] if "status" in runs else pd.Series("ok", index=runs.index)
    bad = int((status == "diverged").sum())
    fate = (
        "No run diverged (a loss that became non-finite, or a final test loss back at chance "
        "with the accuracy's gain lost)."
        if bad == 0
        else f"{_count(bad, 'run')} diverged (a loss that became non-finite, or a final test "
        "loss back at chance with the accuracy's gain lost): the table of diverged runs below "
        "lists them with the reason; no claim uses a diverged run as its baseline."
    )
    return (
        f"{_count(len(runs), 'run')}: {counts}. All times in this section are on the "
        f"{clock_phrase(clocks)} clock ({notes}). {fate}"
    )


def _diverged_table(runs: pd.DataFrame) -> tb.Table | None:
    """Every run marked DIVERGED, with why (None when no run diverged)."""
    if "status" not in runs:
        return None
    bad = runs[runs["status"] == "diverged"]
    if bad.empty:
        return None
    return tb.Table(
        "diverged",
        "Runs marked DIVERGED: the test (psml_core/metrics/divergence.py) and its reason. Their "
        "numbers stay in the attached runs table, marked; no claim uses them as a baseline.",
        ["Run", "Why"],
        [[str(r.run_id), str(r.status_reason)] for r in bad.itertuples(index=False)],
        widths=["auto", 1],
    )


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _subtitle(experiment: Mapping[str, Any], runs: pd.DataFrame) -> str:
    tier = experiment.get("tier") or ", ".join(sorted(set(runs["tier"].astype(str))))
    backend = ", ".join(sorted(set(runs["backend"].astype(str))))
    return f"Tier: {tier} · backend: {backend} · {clock_phrase(runs['clock'])} clock"


def _sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _inputs(experiment: Mapping[str, Any], papers: Sequence[Path], *tables: Path) -> dict[str, str]:
    """SHA-256 of the configuration and tables, named by file name (not by path: portable)."""
    canonical = json.dumps(experiment, sort_keys=True, separators=(",", ":"), default=str)
    out = {
        "effective configuration (canonical JSON)": hashlib.sha256(canonical.encode()).hexdigest(),
        **{Path(t).name: _sha256_file(t) for t in tables},
    }
    for p in papers:
        out[f"{p.parent.name}/{p.name}"] = _sha256_file(p)
    return out


def _setup_section(
    experiment: Mapping[str, Any],
    sparsity: Mapping[str, Mapping[str, Any]],
    workdir: Path,
    validation: dict[str, Any],
) -> dict[str, Any]:
    """The setup: the tier, its data sets, workloads, scenarios, compute model, validation."""

    def w(table: tb.Table) -> dict[str, Any]:
        return table.write(workdir)

    dataset_tables = [w(ts.datasets_table(experiment))]
    if sparsity:
        dataset_tables.append(w(ts.sparsity_table(sparsity)))
    return {
        "intro": fmt_value(experiment.get("description")),
        "blocks": [
            {"heading": "Experiment", "tables": [w(ts.general_table(experiment))]},
            {"heading": "Datasets", "tables": dataset_tables},
            {"heading": "Workloads", "tables": [w(ts.workloads_table(experiment))]},
            {"heading": "Network scenarios", "tables": [w(ts.scenarios_table(experiment))]},
            {"heading": "Compute model", "tables": [w(ts.compute_table(experiment))]},
            {**validation, "tables": [w(t) for t in validation["tables"]]},
        ],
    }


def _attachments(
    runs: pd.DataFrame,
    aggregate: pd.DataFrame,
    claims: pd.DataFrame,
    experiment: Mapping[str, Any],
    partition: Mapping[str, Mapping[str, Any]],
    workdir: Path,
) -> list[dict[str, Any]]:
    """The long tables, as CSV files (numbers, not formatted text) attached to the PDF."""
    return [
        a.write(workdir)
        for a in [
            at.runs_attachment(runs),
            at.aggregate_attachment(aggregate),
            at.claims_attachment(claims),
            at.regimes_attachment(regimes_frame(claims)),
            at.methods_attachment(experiment),
            *([at.partition_attachment(partition)] if partition else []),
            *filter(None, [tpts.points_attachment(experiment)]),
        ]
    ]


def _report_data(
    *,
    runs: pd.DataFrame,
    aggregate: pd.DataFrame,
    frames: Mapping[str, pd.DataFrame],
    experiment: Mapping[str, Any],
    claims: pd.DataFrame,
    papers: Mapping[str, Mapping[str, Any]],
    papers_dir: Path,
    inputs: Mapping[str, str],
    sparsity: Mapping[str, Mapping[str, Any]],
    partition: Mapping[str, Mapping[str, Any]],
    workdir: Path,
    validation: dict[str, Any],
    map_axes: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Write every figure and table; return the template's model (``map_axes``: the maps')."""

    def w(table: tb.Table) -> dict[str, Any]:
        return table.write(workdir)

    _stage("tables: setup")
    setup = _setup_section(experiment, sparsity, workdir, validation)
    title = (experiment.get("report") or {}).get("title") or DEFAULT_TITLE
    tier = fmt_value(experiment.get("tier") or ", ".join(sorted(set(runs["tier"].astype(str)))))
    total = len(papers) + 2
    papers_data = paper_sections(
        papers=papers,
        claims=claims,
        runs=runs,
        frames=frames,
        experiment=experiment,
        sparsity=sparsity,
        partitions={
            (name.split(" · ")[0], name.split(" · ")[1]): obj
            for name, obj in partition.items()
            if len(name.split(" · ")) == 2
        },
        papers_dir=papers_dir,
        workdir=workdir,
        map_axes=map_axes,
        on_paper=lambda i, pid: _stage(f"figures ({i}/{total}): paper {pid}"),
    )
    _stage(f"figures ({total - 1}/{total}): head-to-head")
    h2h = head_to_head_section(
        runs=runs, aggregate=aggregate, frames=frames, experiment=experiment, workdir=workdir
    )
    _stage(f"figures ({total}/{total}): where the time went")
    figures = _figures(runs, workdir)
    _stage("tables: summary, attachments, methods, provenance")
    return {
        "title": str(title),
        "subtitle": _subtitle(experiment, runs),
        "summary": _summary(claims, papers, tier, workdir),
        "setup": setup,
        "papers": papers_data,
        "head_to_head": h2h,
        "results": {
            "intro": _results_intro(runs),
            "tables": [w(t) for t in [_diverged_table(runs)] if t is not None],
            "figures": [
                {"file": f.file, "caption": f.caption, "label": f.label, "width": f.width}
                for f in figures
            ],
        },
        "attachments": _attachments(runs, aggregate, claims, experiment, partition, workdir),
        "methods": [w(ts.methods_table(experiment))],
        "operating_points": {
            "intro": tpts.points_intro(experiment),
            "tables": [w(t) for t in tpts.points_tables(experiment)],
        },
        "versions": tp.versions_text(runs),
        "provenance": [
            w(tp.overview_table(runs, experiment)),
            w(tp.inputs_table(inputs)),
            w(tp.data_files_table(runs)),
        ],
    }


def _summary(
    claims: pd.DataFrame, papers: Mapping[str, Any], tier: str, workdir: Path
) -> dict[str, Any]:
    """The summary page: a few lines, the verdicts' counts and Table 1 (every claim)."""
    return {
        "intro": vd.summary_intro(claims, papers, tier),
        "counts": vd.summary_counts(claims),
        "tables": [vd.verdict_table(claims).write(workdir)],
    }


def _ordered_claims(claims: pd.DataFrame, papers: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """Claims in paper-id order, then in each paper file's order."""
    order = {
        (pid, c["id"]): (pid, i)
        for pid, paper in papers.items()
        for i, c in enumerate(paper["claims"])
    }
    keys = [order[(p, c)] for p, c in zip(claims["paper"], claims["claim"], strict=True)]
    idx = sorted(range(len(claims)), key=lambda i: keys[i])
    return claims.iloc[idx].reset_index(drop=True)


# --------------------------------------------------------------------------- compile


def _remove_stale(workdir: Path) -> None:
    """Delete figures and tables of an earlier build, which this build may not rewrite."""
    for pattern in ("fig_*.svg", "table_*.csv", "data_*.csv"):
        for old in sorted(workdir.glob(pattern)):
            old.unlink()


def _read_runs(runs_csv: Path) -> pd.DataFrame:
    """The runs table in (workload, method, scenario, seed) order; refused when empty."""
    runs = read_runs_csv(runs_csv)
    if runs.empty:
        raise DataError(f"runs table {str(runs_csv)!r} holds no runs; nothing to report")
    return runs.sort_values(list(RUN_KEYS), kind="stable", ignore_index=True)


def _read_claims(claims_csv: Path, papers: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """The claims file, checked against the paper files, in the papers' order."""
    claims = vd.read_claims(claims_csv)
    vd.check_claims(claims, papers, claims_csv)
    return _ordered_claims(claims, papers)


@dataclass(frozen=True)
class ReportInputs:
    """The files a report is built from; :func:`build_report` reads nothing else.

    Attributes:
        runs_csv: The runs table (:func:`psml_core.analysis.write_runs_csv`).
        aggregate_csv: The means over seeds ``psml compare`` computed
            (:func:`psml_core.analysis.aggregate.aggregate_experiments`).
        metrics: Run id -> that run's ``metrics.parquet``; one entry per run of ``runs_csv``.
        sparsity: Sparsity statistics files, ``<dataset>.json``.
        partition: Placement traffic files, ``<workload>/<method>.json`` or ``<workload>.json``
            (may be empty).
        experiment: The effective configuration as a plain dict (tier, description, backend,
            seeds, workers, shards, colocated, methods, experiments, datasets, workloads,
            scenarios, compute, recipes, optional report.title).
        claims_csv: Every claim measured with its verdict (``psml compare --claims``).
        papers_dir: The paper files (``config/papers``) the claims were measured against.
        regime_map: The regime maps' points (``psml compare --regime-map``), if the tier runs
            any.
        validation: The validation table ``report.validation`` names (``psml validate``), if
            any; without one the report says the simulator is unvalidated for the tier's links.
        extra_papers: Paper files beyond ``papers_dir`` (plugins').
    """

    runs_csv: Path
    aggregate_csv: Path
    metrics: dict[str, Path]
    sparsity: list[Path]
    partition: list[Path]
    experiment: dict[str, Any]
    claims_csv: Path
    papers_dir: Path
    regime_map: Path | None = None
    validation: Path | None = None
    extra_papers: Sequence[Path] = ()


def _method_order(experiment: Mapping[str, Any], runs: pd.DataFrame) -> list[str]:
    """Every method in the report once: each experiment's in its order, then any other run's."""
    order = [
        str(m)
        for ex in (experiment.get("experiments") or {}).values()
        for m in experiment_grid(experiment, ex or {})["methods"]
    ]
    return list(dict.fromkeys([*order, *sorted(set(map(str, runs["method"])))]))


def build_report(*, out_pdf: Path, workdir: Path, **inputs: Any) -> None:
    """Build the PDF report.

    Args:
        out_pdf: Where to write the PDF.
        workdir: Where the figures, tables, ``report_data.json`` and ``report.typ`` go.
        **inputs: The fields of :class:`ReportInputs` (an unknown name is a ``TypeError``).

    Raises:
        DataError: An input file is missing or malformed (the message names it), the metrics
            files do not match the runs, or the claims file does not match the paper files.
        ConfigError: A paper file fails its schema.
    """
    given = ReportInputs(**inputs)
    t0 = time.perf_counter()
    _stage(f"loading runs, metrics and claims ({len(given.metrics)} runs)")
    got = _load_inputs(given)
    rmap = got.pop("rmap")
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    _remove_stale(workdir)
    with report_methods(_method_order(given.experiment, got["runs"])):
        data = _report_data(
            **got,
            experiment=given.experiment,
            papers_dir=Path(given.papers_dir),
            workdir=workdir,
            map_axes=frozenset(map(str, rmap["axis"])) if "axis" in rmap else frozenset(),
        )
    data["regime_map"] = regime_map_section(rmap, workdir)
    if not rmap.empty:
        data["attachments"].append(at.regime_map_attachment(rmap).write(workdir))
    data["glossary"] = glossary_section(_texts(data, workdir))
    write_json(workdir / "report_data.json", data)
    write_text(workdir / "report.typ", TEMPLATE.read_text(encoding="utf-8"))
    _stage("typst compile")
    compile_pdf(workdir, Path(out_pdf))
    _stage(f"wrote {out_pdf} ({time.perf_counter() - t0:.1f} s)")


def _texts(data: Mapping[str, Any], workdir: Path) -> list[str]:
    """Every text the PDF prints: the document model, its tables and the template's own words."""
    tables = [p.read_text(encoding="utf-8") for p in sorted(workdir.glob("*.csv"))]
    return [json.dumps(data, ensure_ascii=False), *tables, TEMPLATE.read_text(encoding="utf-8")]


def _load_inputs(given: ReportInputs) -> dict[str, Any]:
    """Every input read and checked before anything is written.

    Returns:
        ``_report_data``'s inputs, plus ``rmap``: the regime maps' points.
    """
    runs_csv, aggregate_csv, claims_csv = given.runs_csv, given.aggregate_csv, given.claims_csv
    metrics, papers_dir, validation = given.metrics, given.papers_dir, given.validation
    experiment = given.experiment
    require_files(
        [
            Path(runs_csv),
            Path(aggregate_csv),
            Path(claims_csv),
            *map(Path, metrics.values()),
            *given.sparsity,
            *(partition_entry(p)[1] for p in given.partition),
        ]
    )
    if not Path(papers_dir).is_dir():
        raise DataError(f"papers directory {str(papers_dir)!r} does not exist")
    # Every input is read (and checked) before anything is written.
    runs = _read_runs(runs_csv)
    aggregate = read_aggregate_csv(aggregate_csv)
    experiment_aggregate(aggregate, ALL_RUNS, runs)  # refuses an aggregate older than the runs
    frames = load_metrics(runs, {str(k): Path(v) for k, v in metrics.items()})
    papers = load_papers(papers_dir, given.extra_papers)
    claims = _read_claims(claims_csv, papers)
    sparsity_stats = named_json(given.sparsity, "sparsity", "dataset")
    placements = partition_files(given.partition)
    checked = read_table(validation) if validation is not None else None
    named = [runs_csv, aggregate_csv, claims_csv, *([validation] if validation else [])]
    paper_files = [*sorted(Path(papers_dir).glob("*.yaml")), *map(Path, given.extra_papers)]
    inputs = _inputs(experiment, paper_files, *map(Path, named))
    rmap = read_regime_map(given.regime_map)
    short = map_summaries(rmap)
    claims["regime_map_short"] = [short.get(c, "") for c in claims["claim"]]
    return {
        "runs": runs,
        "aggregate": aggregate,
        "frames": frames,
        "claims": claims,
        "papers": papers,
        "inputs": inputs,
        "sparsity": sparsity_stats,
        "partition": placements,
        "validation": validation_block(checked, validation, experiment),
        "rmap": rmap,
    }
