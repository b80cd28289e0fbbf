"""psml's Snakemake logger: the compact lines, the ETA, the full output on request."""

from __future__ import annotations

import io
import logging
from types import SimpleNamespace
from typing import Any

from snakemake_interface_logger_plugins.common import LogEvent

from snakemake_logger_plugin_psml import LogHandler, LogHandlerSettings
from snakemake_logger_plugin_psml.progress import Progress, clock, job_label


def _rec(t: float, msg: str | None = None, level: int = logging.INFO, **extra: Any):
    return logging.makeLogRecord(
        {"msg": msg, "levelno": level, "levelname": logging.getLevelName(level), "created": t}
        | extra
    )


def _run(p: Progress) -> list[str]:
    """Three steps: two trains (10 s, then 20 s, one at a time), a report; lines printed."""
    out = p.lines(
        _rec(0, "Job stats", event=LogEvent.RUN_INFO, stats={"train": 2, "report": 1, "total": 3})
    )
    out += p.lines(
        _rec(
            0,
            event=LogEvent.JOB_INFO,
            jobid=1,
            rule_name="train",
            wildcards={"workload": "w", "method": "m"},
        )
    )
    out += p.lines(_rec(10, event=LogEvent.JOB_FINISHED, job_id=1))
    out += p.lines(_rec(10, event=LogEvent.PROGRESS, done=1, total=3))
    return out


def test_one_line_per_finished_step_with_what_finished_and_an_eta():
    p = Progress()
    lines = _run(p)
    assert lines[0] == "3 steps to run: train 2, report 1"
    # Left: one train at the train mean (10 s) and the report at the mean of all (10 s), one
    # job at a time (10 job-seconds in 10 s): 20 s.
    assert lines[1] == "[1/3  33%] done: train w/m (0:10) | wall-clock elapsed 0:10, ETA 0:20"
    assert len(lines) == 2


def test_the_eta_uses_each_rules_own_mean_and_the_parallelism_seen():
    p = Progress()
    _run(p)
    p.lines(_rec(10, event=LogEvent.JOB_INFO, jobid=2, rule_name="train", wildcards={}))
    p.lines(_rec(10, event=LogEvent.JOB_INFO, jobid=3, rule_name="report", wildcards={}))
    p.lines(_rec(40, event=LogEvent.JOB_FINISHED, job_id=2))  # train mean now 20 s
    line = p.lines(_rec(40, event=LogEvent.PROGRESS, done=2, total=3))[0]
    # The report (at the 20 s mean of all) has run 30 s already; 40 job-s in 40 s.
    assert line.endswith("elapsed 0:40, ETA 0:00") and "done: train (0:30) |" in line
    assert p.still_running(45) == "  running: report (0:35)"
    assert p.eta_s(45) == 0.0


def test_no_eta_before_a_step_has_finished_and_zero_when_all_are_done():
    p = Progress()
    p.lines(_rec(0, event=LogEvent.RUN_INFO, stats={"a": 1, "total": 1}))
    assert p.eta_s(5) is None
    p.lines(_rec(1, event=LogEvent.JOB_INFO, jobid=1, rule_name="a", wildcards={}))
    p.lines(_rec(3, event=LogEvent.JOB_FINISHED, job_id=1))
    assert p.lines(_rec(3, event=LogEvent.PROGRESS, done=1, total=1))[0].endswith("ETA 0:00")


def test_scheduler_chatter_and_shell_commands_are_left_to_the_full_output():
    p = Progress()
    for msg in ("Select jobs to execute...", "Execute 2 jobs...", "Using shell: /bin/bash"):
        assert p.lines(_rec(0, msg)) == []
    assert p.lines(_rec(0, "Shell command: psml x", event=LogEvent.SHELLCMD)) == []
    assert p.lines(_rec(0, "Building DAG of jobs...")) == ["Building DAG of jobs..."]
    assert p.lines(_rec(0, "careful", logging.WARNING)) == ["careful"]


def test_a_failed_job_names_its_log_and_command(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("psml train: error: the data are gone\n")
    p = Progress(show_failed_logs=True)
    p.lines(_rec(0, event=LogEvent.JOB_INFO, jobid=7, rule_name="train", wildcards={"s": "x"}))
    out = p.lines(
        _rec(
            1,
            "Error in rule train",
            logging.ERROR,
            event=LogEvent.JOB_ERROR,
            jobid=7,
            rule_name="train",
            log=[str(log)],
            shellcmd="psml  train\n --x",
        )
    )
    assert out[:3] == [
        "error in rule train (jobid 7): train x",
        f"    log: {log}",
        "    shell: psml train --x",
    ]
    assert "psml train: error: the data are gone" in out


def test_labels_and_clocks_stay_short():
    assert clock(59.6) == "1:00" and clock(3725) == "1:02:05"
    label = job_label("train", {"w": "x" * 100})
    assert len(label) == 64 and label.endswith("…")


def _handler(**settings: Any) -> tuple[LogHandler, io.StringIO]:
    common = SimpleNamespace(
        printshellcmds=True,
        nocolor=True,
        quiet=None,
        debug_dag=False,
        verbose=False,
        show_failed_logs=False,
        stdout=False,
        dryrun=False,
    )
    vars(common).update(settings)
    handler = LogHandler(common, LogHandlerSettings())
    handler.stream = io.StringIO()
    if handler.classic is not None:
        handler.classic.stream = handler.stream
    return handler, handler.stream


def test_the_reports_path_comes_after_snakemakes_closing_lines():
    handler, out = _handler()
    handler.handle(_rec(0, "The report: /x/report.pdf", psml_last=True))
    handler.handle(_rec(0, "Complete log(s): /x/log"))
    handler.handle(_rec(0, "Elapsed time: 0:01:00"))
    handler.close()
    assert out.getvalue().splitlines() == [
        "Complete log(s): /x/log",
        "Elapsed time: 0:01:00",
        "The report: /x/report.pdf",
    ]


def test_a_dry_run_gets_snakemakes_full_output_without_shell_command_none():
    handler, out = _handler(dryrun=True)
    handler.handle(_rec(0, "Shell command: None", event=LogEvent.SHELLCMD, shellcmd=None))
    handler.handle(_rec(0, "Shell command: psml x", event=LogEvent.SHELLCMD, shellcmd="psml x"))
    handler.handle(_rec(0, "Select jobs to execute..."))
    handler.close()
    assert out.getvalue().splitlines() == [
        "Shell command: psml x",
        "Select jobs to execute...",
    ]


def _job_info(jobid: int, rule: str):
    fields = {
        "rule_msg": None,
        "local": True,
        "is_checkpoint": False,
        "input": ["a"],
        "output": [f"out{jobid}"],
        "log": [],
        "benchmark": None,
        "reason": "missing",
        "wildcards": {},
        "priority": 0,
        "threads": 1,
        "resources": {},
        "indent": False,
    }
    return _rec(0, "job", event=LogEvent.JOB_INFO, jobid=jobid, rule_name=rule, **fields)


def test_a_rule_without_shell_command_keeps_the_blank_line_between_jobs():
    """Tests (and people) split a dry run's jobs at blank lines, as Snakemake prints them."""
    handler, out = _handler(dryrun=True)
    handler.handle(_job_info(1, "all_specs"))
    handler.handle(_rec(0, "Shell command: None", event=LogEvent.SHELLCMD, shellcmd=None))
    handler.handle(_job_info(2, "train"))
    handler.close()
    jobs = out.getvalue().strip().split("\n\n")
    assert len(jobs) == 2 and "rule all_specs:" in jobs[0] and "rule train:" in jobs[1]
    assert "None" not in out.getvalue()


def test_snakemake_finds_the_plugin_the_workflow_profile_selects():
    from pathlib import Path

    import yaml
    from snakemake_interface_logger_plugins.registry import LoggerPluginRegistry

    profile = Path(__file__).resolve().parents[2] / "profiles" / "default" / "config.yaml"
    assert yaml.safe_load(profile.read_text())["logger"] == ["psml"]
    plugin = LoggerPluginRegistry().get_plugin("psml")
    assert plugin.log_handler is LogHandler
