"""Where the workflow keeps a tier's data and results: every path pattern, written once.

Each pattern is a :meth:`str.format` string relative to the working directory. The workflow's
rules (``workflow/rules/*.smk``) fill in the tier and leave the other fields as Snakemake
wildcards (:func:`wildcards`); the rules' input functions, ``psml train`` by name, ``psml
runs`` and ``psml show`` fill in every field (:func:`path`). A settings-level module: it
imports nothing of psml_core, so that any layer can read it.
"""

from __future__ import annotations

import string

__all__ = [
    "AGGREGATE",
    "BENCH",
    "CALIBRATION",
    "CLAIMS",
    "CONFIG",
    "DATA",
    "HASHED",
    "LOG",
    "OPERATING_POINTS",
    "PARTITION",
    "REGIME_MAP",
    "REPORT_FIGURES",
    "REPORT_PDF",
    "REPORT_TABLES",
    "REPORT_WORK",
    "RUN",
    "RUNS_TABLE",
    "RUN_ID",
    "SPARSITY",
    "SPEC_CALIBRATION",
    "SPEC_LIST",
    "SPEC_PARTITION",
    "SPEC_RUN",
    "SPEC_TUNE",
    "TUNE",
    "VALIDATION",
    "fields",
    "path",
    "wildcards",
]

DATA = "data/{tier}/{dataset}"
"""A prepared data set's directory (``data.npz``, ``manifest.json``)."""
HASHED = "data/{tier}/hashed/{dataset}/{hashing}/seed{seed}"
"""A data set hashed by a recipe's hashing block (jpdc), once per seed."""
RUN_ID = "{workload}/{method}/{scenario}/seed{seed}"
"""A run's id, which names its directories (``Experiment.run_id`` builds the same)."""
RUN = "results/{tier}/runs/{run_id}"
"""A run's directory (``metrics.parquet``, ``summary.json``); as a rule's output, ``run_id``
is :data:`RUN_ID`'s wildcards."""
PARTITION = "results/{tier}/partition/{workload}/{placement}.{ext}"
"""A placement's assignment (``ext`` ``npz``) or predicted traffic (``json``), by its key."""
TUNE = "results/{tier}/tune/{workload}/{method}.json"
"""A tune job's chosen operating point, by tuning key (``<workload>/<method>``)."""
CALIBRATION = "results/{tier}/calibration/{calibration}.json"
"""A calibrated sweep's fitted factor."""
SPARSITY = "results/{tier}/sparsity/{dataset}.json"
"""A data set's sparsity statistics (``psml analyze``)."""
SPEC_RUN = "results/{tier}/specs/{kind}/{run_id}.json"
"""A run's settings file: ``kind`` ``runs`` (known when the workflow is read) or ``tuned``."""
SPEC_PARTITION = "results/{tier}/specs/partition/{workload}/{placement}.json"
"""A placement job's settings file."""
SPEC_TUNE = "results/{tier}/specs/tune/{workload}/{method}.json"
"""A tune job's settings file."""
SPEC_CALIBRATION = "results/{tier}/specs/calibration/{calibration}.json"
"""A calibration job's settings file."""
SPEC_LIST = "results/{tier}/specs/{name}.txt"
"""A list of paths (``summaries``, ``metrics``, ``partitions``), one per line."""


CONFIG = "results/{tier}/config.json"
"""The tier's effective settings, operating points included (``psml compare``, the report)."""
OPERATING_POINTS = "results/{tier}/operating_points.yaml"
"""The operating points in use, with their candidates (the report's appendix)."""
RUNS_TABLE = "results/{tier}/runs.csv"
"""Every run's summary, one row each (``psml compare``)."""
AGGREGATE = "results/{tier}/aggregate.csv"
"""Per-setting means over seeds (``psml compare``)."""
CLAIMS = "results/{tier}/claims.csv"
"""Every paper claim measured on the runs, with its verdict (``psml compare``)."""
REGIME_MAP = "results/{tier}/regime_map.parquet"
"""The regime maps' cells (``psml compare``)."""
VALIDATION = "results/{tier}/validation.json"
"""``psml validate``'s table, where the tier names none (``report.validation``)."""
REPORT_WORK = "results/{tier}/report"
"""The report's working directory (Typst sources, figures before copying)."""
REPORT_PDF = "reports/{tier}/report.pdf"
"""The report."""
REPORT_FIGURES = "reports/{tier}/figures"
"""The report's figures for ``snakemake --report`` (SVG, PNG copies)."""
REPORT_TABLES = "reports/{tier}/tables"
"""The report's tables for ``snakemake --report`` (CSV rendered as HTML)."""
LOG = "logs/{tier}/{job}.log"
"""A workflow job's log; ``job``: the rule's step and wildcards (``train/`` + :data:`RUN_ID`)."""
BENCH = "logs/{tier}/bench/{job}.tsv"
"""A workflow job's Snakemake benchmark file (its peak memory sizes the next run's request)."""


def fields(pattern: str) -> list[str]:
    """The names of a pattern's fields, in order of first appearance."""
    names = [f for _text, f, _spec, _conv in string.Formatter().parse(pattern) if f]
    return list(dict.fromkeys(names))


def path(pattern: str, **values: object) -> str:
    """The pattern with every field filled in.

    Raises:
        KeyError: a field of the pattern was not given (a caller's mistake, not the user's).
    """
    missing = [f for f in fields(pattern) if f not in values]
    if missing:
        raise KeyError(f"layout pattern {pattern!r}: no value for {', '.join(missing)}")
    return pattern.format(**values)


def wildcards(pattern: str, **values: object) -> str:
    """The pattern with the given fields filled in, the others left as ``{name}`` wildcards.

    ``wildcards(RUN, tier="smoke", run_id=RUN_ID)`` is the train rule's output directory,
    ``results/smoke/runs/{workload}/{method}/{scenario}/seed{seed}``.
    """
    return pattern.format(**{f: values.get(f, f"{{{f}}}") for f in fields(pattern)})
