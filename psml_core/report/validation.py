"""The setup's "Simulator validation" block: the last validation table the config points to.

``report.validation`` names a table written by ``psml validate`` (real dist runs between
network namespaces joined by a shaped link, against the same runs on the simulator). The block
gives its date, commit and machine, its rows, and which of the tier's scenarios its links match;
without a table it says plainly that the simulator is unvalidated for the tier's links.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from psml_core.report.format import fmt_bandwidth, fmt_seconds
from psml_core.report.tables import Table
from psml_core.validate.table import ValidationTable, covering_link

__all__ = ["validation_block"]

HEADING = "Simulator validation"


def _pct(x: float) -> str:
    return f"{100 * x:+.1f} %"


def _coverage(table: ValidationTable | None, experiment: Mapping[str, Any]) -> list[str]:
    """Per tier scenario: the table's link that matches it, or that none does."""
    lines = []
    for name, sc in sorted((experiment.get("scenarios") or {}).items()):
        link = covering_link(table, sc or {}) if table is not None else None
        rate = fmt_bandwidth((sc or {}).get("bandwidth_gbps"))
        lat = fmt_seconds(float((sc or {}).get("latency_us", 0)) * 1e-6)
        extras = [k for k in ("delay", "cross_traffic", "bandwidth_steps", "nics") if sc.get(k)]
        if link is None:
            lines.append(f"{name} ({rate}, {lat}): unvalidated")
        else:
            more = f"; its {', '.join(extras)} unvalidated" if extras else ""
            lines.append(f"{name} ({rate}, {lat}): validated by link {link['label']}{more}")
    return lines


def _rows_table(table: ValidationTable) -> Table:
    rows = []
    for r in table.rows:
        rows.append(
            [
                r.link,
                r.method,
                fmt_seconds(r.real_median_s),
                f"{fmt_seconds(min(r.real_s))} – {fmt_seconds(max(r.real_s))}",
                fmt_seconds(r.sim_s),
                _pct(r.error),
                fmt_seconds(r.overhead_s),
                fmt_seconds(r.calibrated_s),
                _pct(r.calibrated_error),
            ]
        )
    s = table.settings
    hidden = f" with hidden widths {s['hidden']}" if s.get("hidden") else ""
    return Table(
        "validation",
        f"Wall-clock against simulated seconds per iteration: {s.get('workload')}{hidden}, "
        f"{s.get('workers')} worker(s) and {s.get('shards')} shard(s) as processes in network "
        f"namespaces of their own, {s.get('iterations')} iterations, median and range of "
        f"{s.get('repeats')} repeats. Error: sim / real - 1 (negative: the simulator is "
        "optimistic). Overhead: real minus sim per iteration on an unshaped link without "
        "delay, what the Python processes and the testbed's network stack cost beyond what the "
        "simulator charges. Calibrated: the sim again, with that overhead spread over the "
        "iteration's three messages as per-message overhead; its error is the link model's, "
        f"held to ±{100 * table.max_error:g} %.",
        [
            "Link",
            "Method",
            "Real",
            "Real range",
            "Sim",
            "Error",
            "Overhead",
            "Calibrated",
            "Error",
        ],
        rows,
        align=["left", "left", "right", "right", "right", "right", "right", "right", "right"],
    )


def validation_block(
    table: ValidationTable | None, source: str | Path | None, experiment: Mapping[str, Any]
) -> dict[str, Any]:
    """The block for the setup section: heading, text and tables (written by the caller)."""
    cover = _coverage(table, experiment)
    if table is None:
        text = (
            "The simulator is unvalidated for this tier's links: the configuration names no "
            "validation table (report.validation). `psml validate`, run as root, measures one: "
            "the dist backend's processes on links shaped like a scenario's, against the same "
            "runs on the simulator. Scenarios: " + "; ".join(cover) + "."
        )
        return {"heading": HEADING, "text": text, "tables": []}
    inside = sum(table.within(r) for r in table.rows)
    m = table.machine
    load = m.get("load_before") or [float("nan")]
    tb = table.testbed
    text = (
        f"The last validation, {Path(str(source)).name}: {table.date}, commit "
        f"{table.commit[:12]}{' (uncommitted changes)' if table.dirty else ''}, on {m.get('host')} "
        f"({m.get('cpu')}, {m.get('cores')} cores, kernel {m.get('kernel')}, load "
        f"{load[0]:.1f}). Each rank ran in a network namespace of its own; the links were "
        f"shaped with {tb.get('shaping')}, delayed by {tb.get('delay')}, TCP congestion control "
        f"{tb.get('congestion_control')}, ranks scheduled {tb.get('rank_scheduling')}. "
        f"{inside} of {len(table.rows)} rows are within ±{100 * table.max_error:g} % once the "
        f"sim is calibrated with the measured overhead. Command: {table.command}. "
        "Scenarios of this tier: " + "; ".join(cover) + "."
    )
    return {"heading": HEADING, "text": text, "tables": [_rows_table(table)]}
