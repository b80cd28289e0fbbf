"""The validation table: real against simulated time per iteration, per link and method.

``psml validate`` writes it as JSON (atomically); the report reads it (``report.validation`` in
the config) and states which of the tier's scenarios its links match. This module reads and
writes the file and imports nothing of the engine, so the report can use it.

Layout (``format`` 1): ``date``, ``commit``, ``dirty``, ``machine`` (host, CPU, cores, kernel,
load), ``command``, ``settings`` (tier, workload, workers, shards, iterations, repeats,
``max_error``), ``testbed`` (how links were built, the calibration), ``links`` (label, rate,
delay, scenario, the delay line's lateness line) and ``rows``: link, method, the real seconds
per iteration of each repeat, their median, lowest and highest, the simulated seconds per
iteration and the error ``sim / real median - 1``; the same method on the calibration link
(no delay, no shaping), whose real-minus-sim difference is the overhead of the real processes'
software and the testbed's stack, and the sim run again charging that overhead per message,
with its error (the link model's, the one held to ``max_error``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from psml_core.atomic import write_json
from psml_core.config.reading import parse_json, read_text
from psml_core.errors import ConfigError, DataError

__all__ = [
    "FORMAT",
    "MESSAGES_PER_ITERATION",
    "Row",
    "ValidationTable",
    "covering_link",
    "read_table",
]

FORMAT = 1


def _median(xs: list[float]) -> float:
    ys = sorted(xs)
    mid = len(ys) // 2
    return ys[mid] if len(ys) % 2 else (ys[mid - 1] + ys[mid]) / 2


MESSAGES_PER_ITERATION = 3
"""Messages on a worker's critical path per iteration: pull request, answer, push."""


@dataclass
class Row:
    """One (link, method): real seconds per iteration per repeat, and the sim's.

    ``zero_real_s`` and ``zero_sim_s`` are the same method on the calibration link (no delay,
    no shaping): their difference, :attr:`overhead_s`, is what the real processes' software
    and the testbed's stack cost per iteration beyond what the simulator charges (compute from
    the device profile, codec costs, 10 us per message). ``calibrated_s`` is the sim run again
    with that overhead spread over the iteration's messages as the scenario's per-message
    overhead (:attr:`message_overhead_us`), where it overlaps other transfers as it does in
    the real processes. ``real_bytes`` (per repeat) and ``sim_bytes`` are the bytes a worker
    moved per iteration, up and down: equal for a method whose bytes do not depend on time, and
    apart where an adaptive method (DC2) chose other ratios on the two clocks.
    """

    link: str
    method: str
    real_s: list[float]
    sim_s: float
    zero_real_s: list[float] = field(default_factory=list)
    zero_sim_s: float = 0.0
    calibrated_sim_s: float | None = None
    real_bytes: list[float] = field(default_factory=list)
    sim_bytes: float | None = None

    @property
    def real_median_s(self) -> float:
        """The median over repeats."""
        return _median(self.real_s)

    @property
    def error(self) -> float:
        """The simulator's relative error, sim / real median - 1 (negative: optimistic)."""
        return self.sim_s / self.real_median_s - 1.0

    @property
    def overhead_s(self) -> float:
        """Real minus sim seconds per iteration on the calibration link (0 without one)."""
        return max(0.0, _median(self.zero_real_s) - self.zero_sim_s) if self.zero_real_s else 0.0

    @property
    def message_overhead_us(self) -> float:
        """The overhead per message the calibrated sim adds to the scenario's."""
        return 1e6 * self.overhead_s / MESSAGES_PER_ITERATION

    @property
    def calibrated_s(self) -> float:
        """The calibrated sim's seconds per iteration (the sim's, without a calibration)."""
        return self.sim_s if self.calibrated_sim_s is None else self.calibrated_sim_s

    @property
    def calibrated_error(self) -> float:
        """The calibrated sim's error, calibrated / real median - 1: the link model's."""
        return self.calibrated_s / self.real_median_s - 1.0

    def as_dict(self) -> dict[str, Any]:
        """The row as stored (the derived figures too, for readers without this module)."""
        return {
            "link": self.link,
            "method": self.method,
            "real_s": self.real_s,
            "real_median_s": self.real_median_s,
            "real_min_s": min(self.real_s),
            "real_max_s": max(self.real_s),
            "sim_s": self.sim_s,
            "error": self.error,
            "zero_real_s": self.zero_real_s,
            "zero_sim_s": self.zero_sim_s,
            "overhead_s": self.overhead_s,
            "message_overhead_us": self.message_overhead_us,
            "calibrated_sim_s": self.calibrated_sim_s,
            "calibrated_error": self.calibrated_error,
            "real_bytes": self.real_bytes,
            "sim_bytes": self.sim_bytes,
        }


@dataclass
class ValidationTable:
    """A validation run's table and where, when and how it was measured."""

    date: str
    commit: str
    dirty: bool | None
    machine: dict[str, Any]
    command: str
    settings: dict[str, Any]
    testbed: dict[str, Any]
    links: list[dict[str, Any]]
    rows: list[Row]

    @property
    def max_error(self) -> float:
        """The bound each row's |error| is held to."""
        return float(self.settings.get("max_error", 0.1))

    def within(self, row: Row) -> bool:
        """Whether ``row``'s calibrated error (the link model's) is within the bound."""
        return abs(row.calibrated_error) <= self.max_error

    def write(self, path: str | Path) -> None:
        """Write the table as JSON, atomically."""
        obj = {
            "format": FORMAT,
            "date": self.date,
            "commit": self.commit,
            "dirty": self.dirty,
            "machine": self.machine,
            "command": self.command,
            "settings": self.settings,
            "testbed": self.testbed,
            "links": self.links,
            "rows": [r.as_dict() for r in self.rows],
        }
        write_json(path, obj)

    def markdown(self) -> str:
        """The table as Markdown, one row per (link, method)."""
        lines = [
            "| link | method | real s/iter (median) | real range | sim s/iter | error | "
            "overhead s/iter | sim, calibrated | error | kB/iter real / sim |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in self.rows:
            mark = "" if self.within(r) else " (outside)"
            kb = "–"
            if r.real_bytes and r.sim_bytes is not None:
                kb = f"{_median(r.real_bytes) / 1e3:.1f} / {r.sim_bytes / 1e3:.1f}"
            lines.append(
                f"| {r.link} | {r.method} | {r.real_median_s:.4f} | "
                f"{min(r.real_s):.4f}–{max(r.real_s):.4f} | {r.sim_s:.4f} | "
                f"{100 * r.error:+.1f}% | {r.overhead_s:.4f} | {r.calibrated_s:.4f} | "
                f"{100 * r.calibrated_error:+.1f}%{mark} | {kb} |"
            )
        for link in self.links:
            if link.get("goodput_mbit") is None or link.get("rate_mbit") is None:
                continue
            model = link["rate_mbit"] * float(link.get("wire_efficiency") or 1.0)
            lines.append(
                f"\n{link['label']}: shaped to {link['rate_mbit']:g} Mbit/s; one TCP flow got "
                f"{link['goodput_mbit']:g} Mbit/s of goodput (the sim's model: {model:.0f})"
            )
        return "\n".join(lines)


def read_table(path: str | Path) -> ValidationTable:
    """Read a validation table.

    Raises:
        DataError: the file is missing, not JSON, or not a validation table (names the file).
    """
    p = Path(path)
    if not p.exists():
        raise DataError(f"validation table {str(p)!r} does not exist")
    try:
        obj = parse_json(read_text(p, "the file"), "the text")
    except ConfigError as exc:
        raise DataError(f"validation table {str(p)!r} is not readable JSON: {exc}") from None
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise DataError(f"validation table {str(p)!r}: not a `psml validate` table (format 1)")
    try:
        rows = [
            Row(
                r["link"],
                r["method"],
                [float(x) for x in r["real_s"]],
                float(r["sim_s"]),
                [float(x) for x in r.get("zero_real_s", [])],
                float(r.get("zero_sim_s", 0.0)),
                None if r.get("calibrated_sim_s") is None else float(r["calibrated_sim_s"]),
                [float(x) for x in r.get("real_bytes", [])],
                None if r.get("sim_bytes") is None else float(r["sim_bytes"]),
            )
            for r in obj["rows"]
        ]
        for r in rows:
            if not r.real_s or not all(math.isfinite(x) and x > 0 for x in [*r.real_s, r.sim_s]):
                raise ValueError(f"row {r.link}/{r.method} has no positive times")
        return ValidationTable(
            date=str(obj["date"]),
            commit=str(obj["commit"]),
            dirty=obj.get("dirty"),
            machine=dict(obj["machine"]),
            command=str(obj["command"]),
            settings=dict(obj["settings"]),
            testbed=dict(obj["testbed"]),
            links=[dict(x) for x in obj["links"]],
            rows=rows,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"validation table {str(p)!r} is malformed: {exc}") from None


def covering_link(table: ValidationTable, scenario: Mapping[str, Any]) -> dict[str, Any] | None:
    """The table's link that matches a scenario's bandwidth and latency (within 1%), or None."""
    gbps, lat = scenario.get("bandwidth_gbps"), scenario.get("latency_us")
    if gbps is None or lat is None:
        return None
    for link in table.links:
        rate, delay = link.get("rate_mbit"), link.get("delay_us")
        if rate is None or delay is None:
            continue
        if math.isclose(rate, 1000 * float(gbps), rel_tol=0.01) and math.isclose(
            delay, float(lat), rel_tol=0.01, abs_tol=1.0
        ):
            return link
    return None
