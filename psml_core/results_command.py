"""``psml compare`` and ``psml report``: from finished runs to tables, verdicts and the PDF."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from psml_core.cli_args import json_arg, paths_arg
from psml_core.errors import ConfigError, DataError

__all__ = ["cmd_compare", "cmd_report"]


def cmd_compare(args: argparse.Namespace) -> int:
    """Collect run summaries into runs.csv and aggregate.csv."""
    from psml_core.analysis.aggregate import aggregate_experiments, collect_runs, write_runs_csv

    summaries = paths_arg(args.summaries)
    runs = collect_runs(summaries)
    write_runs_csv(runs, args.out)
    print(f"psml compare: {len(runs)} runs from {len(summaries)} summaries -> {args.out}")
    config = json_arg(args.experiment, "--experiment") if args.experiment else None
    agg = aggregate_experiments(runs, config)
    write_runs_csv(agg, args.aggregate)
    print(f"psml compare: {len(agg)} aggregate rows -> {args.aggregate}")
    if args.claims:
        import pandas as pd

        from psml_core.analysis.claims import evaluate_claims, load_papers

        if not args.papers or not args.experiment:
            raise ConfigError("psml compare --claims needs --papers and --experiment")
        from psml_core.analysis.causes import defect_warnings
        from psml_core.analysis.partition_files import oracle_bounds, partition_files
        from psml_core.analysis.regime_map import map_rows, map_statements
        from psml_core.plugins import paper_files

        exp = json_arg(args.experiment, "--experiment")
        papers = load_papers(args.papers, paper_files())
        results = evaluate_claims(
            papers,
            runs,
            exp.get("experiments", {}),
            sorted(exp.get("scenarios", {})),
            config=exp,
            oracles=oracle_bounds(partition_files(paths_arg(args.partition))),
        )
        for line in defect_warnings(results):
            print(f"psml compare: {line}", file=sys.stderr)
        rmap = map_rows(papers, runs, exp)
        said = map_statements(rmap)
        for res in results:
            res.regime_map = said.get(res.claim, "")
        table = pd.DataFrame([r.row() for r in results])
        write_runs_csv(table, args.claims)
        print(f"psml compare: {_verdict_counts(results)} -> {args.claims}")
        if args.regime_map:
            from psml_core.atomic import atomic_path

            with atomic_path(args.regime_map) as tmp:
                rmap.to_parquet(tmp, index=False)
            print(f"psml compare: regime map, {len(rmap)} rows -> {args.regime_map}")
    return 0


def _verdict_counts(results: Sequence[Any]) -> str:
    """``12 claims judged: 5 REPRODUCED, 4 NOT REPRODUCED, ...``, most frequent first."""
    from collections import Counter

    counts = Counter(str(r.verdict) for r in results).most_common()
    said = ", ".join(f"{n} {verdict}" for verdict, n in counts)
    return f"{len(results)} claims judged" + (f": {said}" if said else "")


def cmd_report(args: argparse.Namespace) -> int:
    """Build the PDF report from the results."""
    from psml_core.plugins import paper_files
    from psml_core.report import build_report

    metrics = {}
    for path in paths_arg(args.metrics):
        summary = path.with_name("summary.json")
        if not summary.is_file():
            raise DataError(f"{summary}: missing next to {path}; re-run its training job")
        metrics[json.loads(summary.read_text())["run_id"]] = path
    build_report(
        runs_csv=Path(args.runs),
        aggregate_csv=Path(args.aggregate),
        metrics=metrics,
        sparsity=[Path(p) for p in args.sparsity],
        partition=paths_arg(args.partition),
        experiment=json_arg(args.experiment, "--experiment"),
        claims_csv=Path(args.claims),
        papers_dir=Path(args.papers),
        out_pdf=Path(args.out),
        workdir=Path(args.workdir),
        regime_map=Path(args.regime_map) if args.regime_map else None,
        validation=Path(args.validation) if args.validation else None,
        extra_papers=paper_files(),
    )
    if args.figures or args.tables:
        from psml_core.report.export import export_outputs

        if not (args.figures and args.tables):
            raise ConfigError("psml report: give --figures and --tables together, or neither")
        n = export_outputs(args.workdir, args.figures, args.tables)
        print(
            f"report: {n} figure and table files in {args.figures}/, {args.tables}/",
            file=sys.stderr,
        )
    return 0
