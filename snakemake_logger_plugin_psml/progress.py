"""What the compact output prints for each Snakemake log record: a pure function of the records.

One line per finished step (how many of how many, what finished, wall-clock elapsed and an ETA),
the job counts on one line, warnings and errors in full; the per-job input/output lists, reasons
and shell commands are left to the full output (``--logger-psml-full``) and to the complete log
file Snakemake writes under ``.snakemake/log/``.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

from snakemake_interface_logger_plugins.common import LogEvent

# Snakemake's scheduler chatter: said once per scheduling round, it is most of the default output.
_CHATTER = re.compile(
    r"^(Select jobs to execute\.\.\.|Execute \d+ jobs?\.\.\.|Using shell: |Provided (cores|"
    r"resources)|Rules claiming more threads|Conda environments: ignored|Singularity containers: "
    r"ignored|Assuming unrestricted shared filesystem|Job stats:)"
)
LABEL_WIDTH = 64
"""The longest job label printed (rule and wildcard values), so a progress line fits a terminal."""


def clock(seconds: float) -> str:
    """``h:mm:ss`` (or ``m:ss`` under an hour) of a number of seconds."""
    s = max(0, round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def job_label(rule: str, wildcards: dict[str, Any] | None) -> str:
    """``rule a/b/c``: the rule and its wildcard values, shortened to ``LABEL_WIDTH``."""
    values = "/".join(str(v) for v in (wildcards or {}).values())
    text = f"{rule} {values}".strip()
    return text if len(text) <= LABEL_WIDTH else text[: LABEL_WIDTH - 1] + "…"


@dataclass
class _Job:
    rule: str
    label: str
    started: float


@dataclass
class Progress:
    """The compact output's state: the jobs, when each started, and what each rule's jobs took.

    Times are the records' own (``record.created``, wall-clock), so the lines are a function of
    the records alone (tests feed records with chosen times).
    """

    total: int = 0
    done: int = 0
    started_at: float | None = None
    per_rule: dict[str, int] = field(default_factory=dict)
    running: dict[Any, _Job] = field(default_factory=dict)
    durations: dict[str, list[float]] = field(default_factory=dict)
    finished: list[str] = field(default_factory=list)
    busy_s: float = 0.0
    show_failed_logs: bool = False

    def lines(self, record: logging.LogRecord) -> list[str]:
        """The lines to print for one record (often none)."""
        event = getattr(record, "event", None)
        if record.levelno >= logging.WARNING and event not in (LogEvent.JOB_ERROR,):
            return [record.getMessage()] if record.msg else []
        handler = {
            LogEvent.RUN_INFO: self._run_info,
            LogEvent.JOB_INFO: self._job_info,
            LogEvent.JOB_FINISHED: self._job_finished,
            LogEvent.PROGRESS: self._progress,
            LogEvent.WORKFLOW_STARTED: _workflow_started,
            LogEvent.JOB_ERROR: self._job_error,
        }.get(event)
        if handler is not None:
            return handler(record)
        if event is not None or record.levelno < logging.INFO or not record.msg:
            return []  # shell commands, resources, DAG debugging: the full output has them
        text = record.getMessage()
        return [] if _CHATTER.match(text) else [text]

    def _run_info(self, record: logging.LogRecord) -> list[str]:
        stats = dict(getattr(record, "stats", {}) or {})
        total = int(stats.pop("total", 0))
        if self.total:  # said again (checkpoints, the end of a dry run): counts only
            self.total = max(self.total, total)
            return []
        self.total, self.per_rule = total, stats
        counts = ", ".join(
            f"{rule} {n}" for rule, n in sorted(stats.items(), key=lambda kv: -kv[1])
        )
        return [f"{total} steps to run: {counts}"]

    def _job_info(self, record: logging.LogRecord) -> list[str]:
        if self.started_at is None:
            self.started_at = record.created
        rule = str(getattr(record, "rule_name", "?"))
        label = job_label(rule, getattr(record, "wildcards", None))
        self.running[getattr(record, "jobid", None)] = _Job(rule, label, record.created)
        return []

    def _job_finished(self, record: logging.LogRecord) -> list[str]:
        job = self.running.pop(getattr(record, "job_id", None), None)
        if job is not None:
            took = record.created - job.started
            self.durations.setdefault(job.rule, []).append(took)
            self.busy_s += took
            self.finished.append(f"{job.label} ({clock(took)})")
        return []

    def _progress(self, record: logging.LogRecord) -> list[str]:
        self.done = int(getattr(record, "done", self.done))
        self.total = int(getattr(record, "total", self.total)) or self.total
        what = "; ".join(self.finished) or "a step"
        self.finished = []
        pct = 100 * self.done // max(self.total, 1)
        head = f"[{self.done:>{len(str(self.total))}}/{self.total} {pct:>3}%]"
        elapsed = record.created - (record.created if self.started_at is None else self.started_at)
        eta = self.eta_s(record.created)
        tail = f"elapsed {clock(elapsed)}" + (f", ETA {clock(eta)}" if eta is not None else "")
        return [f"{head} done: {what} | wall-clock {tail}"]

    def eta_s(self, now: float) -> float | None:
        """Seconds left: each rule's remaining jobs at that rule's mean time, over the parallelism.

        A rule none of whose jobs has finished counts at the mean of all finished jobs. The
        parallelism is what the run has shown so far (job-seconds per wall-clock second).
        None until a job has finished, and 0 once every step is done.
        """
        if self.done >= self.total > 0:
            return 0.0
        finished = [t for ts in self.durations.values() for t in ts]
        elapsed = now - (now if self.started_at is None else self.started_at)
        if not finished or elapsed <= 0:
            return None
        overall = sum(finished) / len(finished)
        left = 0.0
        for rule, count in self.per_rule.items():
            ts = self.durations.get(rule, [])
            mean = sum(ts) / len(ts) if ts else overall
            left += max(count - len(ts), 0) * mean
        # Running jobs have done part of their share already.
        left -= sum(
            min(now - j.started, _mean(self.durations, j.rule, overall))
            for j in self.running.values()
        )
        parallel = max(self.busy_s / elapsed, 1.0)
        return max(left, 0.0) / parallel

    def _job_error(self, record: logging.LogRecord) -> list[str]:
        """The failed job in a few lines (its log, its command), its log's text if asked."""
        job = self.running.pop(getattr(record, "jobid", None), None)
        rule = getattr(record, "rule_name", "?")
        out = [f"error in rule {rule} (jobid {getattr(record, 'jobid', '?')})"]
        if job is not None:
            out[0] += f": {job.label}"
        if getattr(record, "rule_msg", None):
            out.append(f"    message: {record.rule_msg}")
        logs = list(getattr(record, "log", None) or [])
        if logs:
            out.append(f"    log: {', '.join(logs)}")
        if getattr(record, "shellcmd", None):
            out.append(f"    shell: {' '.join(str(record.shellcmd).split())}")
        if self.show_failed_logs and logs:
            from snakemake.logging import show_logs  # Snakemake's own log excerpt

            out += list(show_logs(logs))
        return out

    def still_running(self, now: float) -> str | None:
        """A heartbeat line while no step has finished for a while: what runs, for how long."""
        if not self.running:
            return None
        jobs = sorted(self.running.values(), key=lambda j: j.started)
        names = "; ".join(f"{j.label} ({clock(now - j.started)})" for j in jobs[:3])
        more = f" and {len(jobs) - 3} more" if len(jobs) > 3 else ""
        return f"  running: {names}{more}"


def _mean(durations: dict[str, list[float]], rule: str, default: float) -> float:
    ts = durations.get(rule)
    return sum(ts) / len(ts) if ts else default


def _workflow_started(record: logging.LogRecord) -> list[str]:
    version = getattr(record, "snakemake_version", "?")
    where = getattr(record, "cwd", "?")
    return [f"Snakemake {version} in {where} (full output: --logger-psml-full)"]
