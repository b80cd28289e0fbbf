"""The arguments of each ``psml`` sub-command (:mod:`psml_core.cli` runs them)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from psml_core.config.reading import parse_json, read_text
from psml_core.errors import ConfigError
from psml_core.run_resolver import DEFAULT_CONFIGFILE

__all__ = [
    "json_arg",
    "paths_arg",
    "_config_args",
    "_config_command_args",
    "_show_args",
    "_prepare_args",
    "_hash_args",
    "_analyze_args",
    "_partition_args",
    "_train_args",
    "_compare_args",
    "_report_args",
]


# --------------------------------------------------------------------------- values


def json_arg(text: str, what: str) -> Any:
    """JSON given inline or as the path of a JSON file (the workflow passes files)."""
    if not text.lstrip().startswith(("{", "[")):
        text = read_text(text, f"{what} (neither JSON nor a readable file)")
    return parse_json(text, what)


def paths_arg(paths: Sequence[str]) -> list[Path]:
    """Paths given one by one, or ``@list``: a file holding one path per line."""
    out: list[Path] = []
    for item in paths:
        if item.startswith("@"):
            try:
                lines = Path(item[1:]).read_text(encoding="utf-8").splitlines()
            except OSError as exc:
                raise ConfigError(f"{item!r}: cannot read the list of paths ({exc})") from None
            out += [Path(line) for line in lines if line.strip()]
        else:
            out.append(Path(item))
    return out


# --------------------------------------------------------------------------- arguments


def _config_args(p: argparse.ArgumentParser) -> None:
    """The arguments of ``psml config``."""
    p.add_argument(
        "--configfile",
        default=DEFAULT_CONFIGFILE,
        help="your config (its tier plus overrides; default: config/config.yaml)",
    )
    p.add_argument(
        "--config-dir",
        type=Path,
        help="directory with tiers/ and methods.yaml (default: ./config when it holds "
        "methods.yaml, else psml's own, as the workflow does)",
    )
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a key, value as YAML; repeatable (e.g. --set tier=small --set 'seeds=[0]')",
    )
    p.add_argument(
        "--config",
        dest="set",
        action="extend",
        nargs="+",
        metavar="KEY=VALUE",
        help="the same overrides as Snakemake's --config takes them (e.g. --config tier=small "
        "'seeds=[0]')",
    )
    p.add_argument("--tier", help="the tier (smoke, small, paper): same as --set tier=TIER")


def _config_command_args(p: argparse.ArgumentParser) -> None:
    """The arguments of ``psml config``."""
    _config_args(p)
    p.add_argument(
        "--readme",
        action="store_true",
        help="print config/README.md (every key, from the schema) instead",
    )


def _show_args(p: argparse.ArgumentParser) -> None:
    """The arguments of ``psml show``."""
    p.add_argument("run", metavar="RUN", help="a run id (see `psml runs`), summary.json or run dir")
    _config_args(p)


def _prepare_args(p: argparse.ArgumentParser) -> None:
    """The arguments of ``psml prepare``."""
    p.add_argument("--spec", required=True, help="the dataset's settings as JSON")
    p.add_argument("--out", required=True, help="output directory")


def _hash_args(p: argparse.ArgumentParser) -> None:
    """The arguments of ``psml hash``."""
    p.add_argument("--data", required=True, help="prepared data directory")
    p.add_argument(
        "--hashing", required=True, metavar="JSON", help="the recipe's hashing block as JSON"
    )
    p.add_argument("--seed", type=int, required=True, help="the run seed (seeds the hashes)")
    p.add_argument("--out", required=True, help="output directory (a prepared data set)")


def _analyze_args(p: argparse.ArgumentParser) -> None:
    """The arguments of ``psml analyze``."""
    p.add_argument("--data", required=True, help="prepared data directory")
    p.add_argument(
        "--workers", type=int, required=True, help="workers the rows are split over (overlaps)"
    )
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the row split and of the hashes (default 0)"
    )
    p.add_argument(
        "--hashing",
        action="append",
        metavar="JSON",
        help="a recipe's hashing block, e.g. '{\"ratio\": 0.0625}' (repeatable): adds hashed stats",
    )
    p.add_argument("--out", required=True, help="output JSON")


def _partition_args(p: argparse.ArgumentParser) -> None:
    """The arguments of ``psml partition``."""
    p.add_argument(
        "--run", required=True, help="the run's settings: JSON text or a JSON file's path"
    )
    p.add_argument("--data", required=True, help="prepared data directory")
    p.add_argument("--out", required=True, help="output assignment (.npz)")
    p.add_argument("--traffic", required=True, help="output predicted traffic (.json)")


def _train_args(p: argparse.ArgumentParser) -> None:
    """The arguments of ``psml train``."""
    p.add_argument("--run", help="the run's settings: JSON text or a JSON file's path")
    cell = p.add_argument_group("or the run by name, from the config (`psml runs` lists them)")
    for name in ("workload", "method", "scenario"):
        cell.add_argument(f"--{name}", help=f"the run's {name}")
    cell.add_argument("--seed", type=int, help="the run's seed")
    _config_args(cell)
    p.add_argument("--data", help="prepared data directory (by name: the workflow's)")
    p.add_argument(
        "--partition", help="assignment from `psml partition` (else the workflow's/computed)"
    )
    p.add_argument("--out", help="output directory (by name: the workflow's)")
    p.add_argument(
        "--calibration", help="a calibrated recipe's factor (`psml calibrate-sweep --out`)"
    )
    p.add_argument(
        "--launcher",
        choices=["local", "srun", "torchrun"],
        default="local",
        help="how a multi-process backend starts its processes (dist: P+S ranks): spawn "
        "locally, srun (SLURM), torchrun",
    )


def _compare_args(p: argparse.ArgumentParser) -> None:
    """The arguments of ``psml compare``."""
    p.add_argument(
        "--summaries", nargs="+", required=True, help="summary.json files, or @FILE listing them"
    )
    p.add_argument("--out", required=True, help="runs.csv")
    p.add_argument(
        "--aggregate",
        required=True,
        help="aggregate.csv: means over seeds, over every run and per experiment",
    )
    p.add_argument("--papers", help="directory of config/papers/*.yaml (reported results)")
    p.add_argument("--experiment", help="the effective config as JSON (its experiments)")
    p.add_argument("--claims", help="claims.csv: every claim measured, with its verdict")
    p.add_argument(
        "--regime-map", help="regime_map.parquet: each mapped claim's effect along its axis"
    )
    p.add_argument(
        "--partition",
        nargs="*",
        default=[],
        help="placement files (<workload>/<method>=<file>, or @FILE listing them): their oracle "
        "bounds set the minimum effect of a claim stated as a share of the oracle's cut",
    )


def _report_args(p: argparse.ArgumentParser) -> None:
    """The arguments of ``psml report``."""
    p.add_argument("--runs", required=True, help="runs.csv from `psml compare`")
    p.add_argument("--aggregate", required=True, help="aggregate.csv from `psml compare`")
    p.add_argument(
        "--metrics", nargs="+", required=True, help="metrics.parquet files, or @FILE listing them"
    )
    p.add_argument(
        "--sparsity", nargs="*", default=[], help="sparsity JSON files from `psml analyze`"
    )
    p.add_argument(
        "--partition", nargs="*", default=[], help="predicted-traffic JSON files, or @FILE"
    )
    p.add_argument("--experiment", required=True, help="the effective config as JSON")
    p.add_argument(
        "--claims", required=True, help="claims.csv from `psml compare --claims` (verdicts)"
    )
    p.add_argument(
        "--papers", required=True, help="directory of the paper files (config/papers/*.yaml)"
    )
    p.add_argument("--regime-map", help="regime_map.parquet from `psml compare --regime-map`")
    p.add_argument("--validation", help="a validation table from `psml validate` (JSON)")
    p.add_argument("--workdir", required=True, help="directory for figures and tables")
    p.add_argument("--out", required=True, help="output PDF")
    p.add_argument("--figures", help="also copy the figures (SVG + PNG) here, by paper")
    p.add_argument("--tables", help="also copy the tables (CSV) here, by paper")
