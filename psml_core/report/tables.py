"""The report's tables, written as CSV for the Typst template, and the experiments' tables.

:class:`Table` is what every table module builds (:mod:`.tables_setup`,
:mod:`.tables_provenance`, :mod:`.trade_offs`, :mod:`.reported_vs_ours`); the tables here
belong to the experiments' sections (hashing, reassignments, the head-to-head). Cells come
formatted from :mod:`psml_core.report.format`; a cell is never empty ("–" where a value does
not apply, as each caption says).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from psml_core.atomic import write_text
from psml_core.report.format import (
    CENSORED,
    DASH,
    clock_phrase,
    fmt_bytes,
    fmt_percent,
    fmt_seconds,
    fmt_stat,
    fmt_time_to_target,
    fmt_value,
)

__all__ = [
    "Table",
    "kv_table",
    "hashing_table",
    "head_to_head_table",
    "oracle_table",
    "reassignment_table",
]


@dataclass
class Table:
    """A table for the template: header, string cells, column alignment and widths.

    Attributes:
        name: File stem; the CSV is written to ``table_<name>.csv``.
        caption: Caption printed above the table.
        header: Column titles.
        rows: Cells, already formatted; never empty.
        align: Per column "left", "right" or "center".
        widths: Per column "auto" or a number of fractions (``1`` = ``1fr`` in Typst).
        group: Show the first column as a heading row whenever its value changes, instead of
            as a column (saves width; the CSV keeps the column).
        verdict: Index of a column of verdicts (REPRODUCED / PARTIAL / NOT REPRODUCED), which
            the template colours; -1 for none.
        breakable: Let the table break across pages even when short (long cells).
    """

    name: str
    caption: str
    header: list[str]
    rows: list[list[str]]
    align: list[str] = field(default_factory=list)
    widths: list[str | float] = field(default_factory=list)
    group: bool = False
    verdict: int = -1
    breakable: bool = False

    def __post_init__(self) -> None:
        n = len(self.header)
        self.align = self.align or ["left"] * n
        self.widths = self.widths or ["auto"] * n
        self.rows = [[c if c.strip() else DASH for c in row] for row in self.rows]
        bad = [r for r in self.rows if len(r) != n]
        if bad or len(self.align) != n or len(self.widths) != n:
            raise ValueError(f"table {self.name!r}: every row needs {n} cells")

    @property
    def file(self) -> str:
        """The CSV file name, relative to the work directory."""
        return f"table_{self.name}.csv"

    def write(self, workdir: Path) -> dict[str, Any]:
        """Write the CSV into ``workdir``; return the table's entry for ``report_data.json``."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(self.header)
        writer.writerows(self.rows)
        write_text(workdir / self.file, buf.getvalue())
        return {
            "file": self.file,
            "caption": self.caption,
            "align": self.align,
            "widths": self.widths,
            "label": f"tab-{self.name}",
            "group": self.group,
            "verdict": self.verdict,
            "breakable": self.breakable,
        }


def kv_table(name: str, caption: str, pairs: Iterable[tuple[str, str]], header: list[str]) -> Table:
    """A two-column table of (key, value) pairs."""
    return Table(name, caption, header, [[k, v] for k, v in pairs], widths=["auto", 1])


def hashing_table(name: str, stats: Mapping[str, Mapping[str, Any]]) -> Table | None:
    """Sparsity before and after feature hashing, per data set and hashing block.

    Returns None when no statistics file holds a ``hashed`` entry.
    """
    rows = []
    for dataset in sorted(stats):
        for entry in stats[dataset].get("hashed") or []:
            h = entry.get("hashing") or {}
            head = [dataset, fmt_value(h.get("buckets")), fmt_stat(h.get("compression"))]
            if "skipped" in entry:
                rows.append([*head, str(entry["skipped"]), DASH, DASH])
                continue
            vs = entry.get("vs_raw") or {}
            cells = []
            for key in ("nnz_per_row_mean", "replication_factor", "mean_pairwise_jaccard"):
                pair = vs.get(key) or {}
                cells.append(f"{fmt_stat(pair.get('raw'))} → {fmt_stat(pair.get('hashed'))}")
            rows.append([*head, *cells])
    if not rows:
        return None
    return Table(
        name,
        "Sparsity before → after feature hashing (from the sparsity analysis of the training "
        "rows): buckets m, compression d / m, mean non-zeros per row (collisions merge "
        "features), replication factor (sum of the workers' feature-set sizes over their union) "
        "and mean pairwise Jaccard overlap of the workers' feature sets, rows dealt at random.",
        ["Dataset", "Buckets", "d / m", "nnz/row", "Replication", "Jaccard"],
        rows,
        align=["left", "right", "right", "right", "right", "right"],
    )


def reassignment_table(name: str, runs: pd.DataFrame, methods: Sequence[str]) -> Table | None:
    """The dynamic placement's decisions per method and scenario, with remote traffic.

    Returns None when no run evaluated a reassignment.
    """
    dyn = runs[pd.to_numeric(runs["placement_evaluated"]) > 0]
    if dyn.empty:
        return None
    rank = {m: i for i, m in enumerate(methods)}
    rows = []
    groups = dyn.groupby(["method", "scenario"], sort=False)
    for (method, scenario), g in sorted(groups, key=lambda kv: (rank.get(kv[0][0], 0), kv[0])):
        per_step = pd.to_numeric(g["remote_bytes_up"]) + pd.to_numeric(g["remote_bytes_down"])
        per_step = per_step / pd.to_numeric(g["iterations"])
        rows.append(
            [
                f"{method} · {scenario}",
                f"{int(g['placement_accepted'].sum())} of {int(g['placement_evaluated'].sum())}",
                fmt_percent(float(pd.to_numeric(g["placement_best_saving"]).max())),
                fmt_bytes(float(pd.to_numeric(g["migration_bytes"]).mean())),
                fmt_bytes(float(per_step.mean())),
                str(len(g)),
            ]
        )
    return Table(
        name,
        "Dynamic partition decisions: reassignments accepted of those evaluated (all seeds); the "
        "largest cut of remote bytes per step any evaluated reassignment was estimated to give "
        "(from the chunk traffic statistics, accepted or not); bytes migrated per run (mean); "
        "measured remote bytes per step, all workers (mean over seeds). A reassignment is "
        "accepted only when its estimated saving over the horizon exceeds its migration bytes.",
        ["Method · scenario", "Accepted", "Best est. cut", "Migrated / run", "Remote / step",
         "Seeds"],
        rows,
        align=["left", "right", "right", "right", "right", "right"],
    )  # fmt: skip


def counted_every_key(part: Mapping[str, Any]) -> bool:
    """Whether a partition file's prediction counted every key, not the ones samples touch.

    A placement that does not read the sample-key incidence (the dynamic one) is predicted over
    all keys, which says nothing about a run that pulls only the touched ones.
    """
    return str(part.get("incidence", "")).startswith("not built")


MIN_ORACLE_CUT = 0.01
"""Below this bound (1% of the random placement's remote bytes) the oracle table gives no share."""


def oracle_table(
    name: str,
    runs: pd.DataFrame,
    partitions: Mapping[tuple[str, str], Mapping[str, Any]],
    methods: Sequence[str],
    placements: Mapping[str, str] | None = None,
) -> Table | None:
    """Each placement against the oracle bound of its data (placement/oracle.py).

    Args:
        name: The table's file stem.
        runs: The experiment's runs.
        partitions: Partition files by (workload, method), each with its ``oracle`` bound.
        methods: The experiment's methods, in order (others are left out).
        placements: Method -> the placement's label (default: the partition file's name).

    Returns None when no partition file holds a bound (no planted groups, or shards not one
    per worker's machine).
    """
    rank = {m: i for i, m in enumerate(methods)}
    rows = []
    for (workload, method), part in sorted(
        partitions.items(), key=lambda kv: (kv[0][0], rank.get(kv[0][1], len(rank)))
    ):
        bound = part.get("oracle") or {}
        if "bound" not in bound or method not in rank:
            continue
        mine = runs[(runs["workload"] == workload) & (runs["method"] == method)]
        measured = math.nan
        if not mine.empty:
            remote = pd.to_numeric(mine["remote_bytes_up"]) + pd.to_numeric(
                mine["remote_bytes_down"]
            )
            measured = float((remote / pd.to_numeric(mine["iterations"])).mean())
        possible = float(bound["random_remote_bytes"]) - float(bound["oracle_remote_bytes"])
        share = (float(bound["random_remote_bytes"]) - measured) / possible
        predicted = float(bound["share"])
        if float(bound["bound"]) < MIN_ORACLE_CUT:  # a share of almost nothing: ill-conditioned
            share = predicted = math.nan
        if counted_every_key(part):
            predicted = math.nan
        rows.append(
            [
                f"{workload} · {method} "
                f"({(placements or {}).get(method) or part.get('placement', DASH)})",
                fmt_bytes(float(bound["random_remote_bytes"])),
                fmt_bytes(float(bound["oracle_remote_bytes"])),
                fmt_percent(float(bound["bound"])),
                fmt_percent(predicted) if math.isfinite(predicted) else DASH,
                fmt_percent(share) if math.isfinite(share) else DASH,
            ]
        )
    if not rows:
        return None
    return Table(
        name,
        "Each placement against the best its data allow (the oracle bound, ours): samples "
        "split by their true community, each key on the shard of the worker that touches it "
        "most, no balance limit. Random: remote bytes per step (all workers, expected over the "
        "batch draw) of a random balanced placement of the same data; Oracle: the same for the "
        "oracle; Bound: the largest cut of remote traffic, 1 − oracle / random; Share: the part "
        "of that cut a placement reaches, (random − its remote bytes) / (random − oracle), "
        "predicted before training from its partition and measured (the runs' remote bytes per "
        "iteration, mean over seeds and scenarios; the measured bytes include the runs' "
        "headers and checksums, as the prediction does). – where the bound is under 1% (a share "
        "of almost nothing says nothing), or where the prediction counted every key because "
        "the placement does not read which keys a sample touches.",
        ["Workload · method (placement)", "Random", "Oracle", "Bound", "Share, predicted",
         "Share, measured"],
        rows,
        align=["left", "right", "right", "right", "right", "right"],
    )  # fmt: skip


def head_to_head_table(name: str, agg: pd.DataFrame, methods: Sequence[str]) -> Table:
    """Every method of the head-to-head per workload · scenario: time to target, accuracy, bytes.

    Args:
        name: The table's file stem.
        agg: :func:`~psml_core.analysis.aggregate.aggregate_runs` of the experiment's runs.
        methods: The experiment's methods, in order.
    """
    rank = {m: i for i, m in enumerate(methods)}
    agg = agg.assign(_rank=[rank.get(str(m), len(rank)) for m in agg["method"]])
    agg = agg.sort_values(["workload", "scenario", "_rank"], kind="stable")
    rows = []
    for r in agg.itertuples(index=False):
        ttt = fmt_time_to_target(r.time_to_target_s_mean, int(r.time_to_target_reached), int(r.n))
        rows.append(
            [
                f"{r.workload} · {r.scenario}",
                str(r.method),
                str(int(r.n)),
                ttt,
                fmt_percent(r.final_test_accuracy_mean),
                fmt_seconds(r.total_time_s_mean),
                fmt_bytes(r.bytes_up_mean),
                fmt_bytes(r.bytes_down_mean),
                fmt_bytes(r.bytes_total_mean),
            ]
        )
    clock = clock_phrase(agg["clock"])
    return Table(
        name,
        f"Head-to-head, grouped by workload · scenario: means over seeds ({clock} clock). Time "
        "to target is averaged over the seeds that held the target to the end of the run; the "
        f"others are counted as censored (“{CENSORED}” if none held it); bytes are exact wire "
        "bytes over all workers and iterations.",
        [
            "Setting",
            "Method",
            "Seeds",
            "Time to target",
            "Final acc.",
            "Total time",
            "Bytes up",
            "Bytes down",
            "Bytes total",
        ],  # fmt: skip
        rows or [[DASH] * 9],
        align=["left", "left", *(["right"] * 7)],
        group=True,
    )
