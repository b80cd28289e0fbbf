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
    "CALIBRATION",
    "DATA",
    "HASHED",
    "PARTITION",
    "RUN",
    "RUN_ID",
    "SPARSITY",
    "SPEC_CALIBRATION",
    "SPEC_LIST",
    "SPEC_PARTITION",
    "SPEC_RUN",
    "SPEC_TUNE",
    "TUNE",
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
