"""psml's Snakemake logger: a compact terminal by default, Snakemake's full output on request.

The workflow profile (``profiles/default/config.yaml``) selects it with ``logger: [psml]``.
By default it prints one line per finished step with wall-clock elapsed time and an ETA, the
job counts on one line, warnings and errors; while a long step runs it says what runs (in place
on a terminal, every 30 s in a log). ``--logger-psml-full`` (or ``--verbose``) prints Snakemake's
own output instead: every job's input and output lists, reason and shell command, and so does a
dry run (``-n``), whose point is that list. Snakemake's complete log under ``.snakemake/log/``
always has the full output.

A record carrying ``psml_last=True`` (the Snakefile's ``onsuccess`` hook: the report's path) is
printed after Snakemake's closing lines, so the run ends with it.
"""

# No `from __future__ import annotations`: Snakemake reads the settings' field types at run time.
import logging
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TextIO

from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent
from snakemake_interface_logger_plugins.settings import LogHandlerSettingsBase

from snakemake_logger_plugin_psml.progress import Progress

__all__ = ["LogHandler", "LogHandlerSettings"]

HEARTBEAT_S = 30.0
"""In a log file (not a terminal): say what runs when nothing was printed for this long."""


@dataclass
class LogHandlerSettings(LogHandlerSettingsBase):
    """``--logger-psml-full``: Snakemake's full output (every job's files, reason, command)."""

    full: bool = field(
        default=False,
        metadata={
            "help": "Print Snakemake's full output: every job's input and output lists, reason "
            "and shell command (the default prints one progress line per finished step)."
        },
    )


class LogHandler(LogHandlerBase):
    """Writes the compact (or, asked, the full) output to Snakemake's stream."""

    def __post_init__(self) -> None:
        self.stream: TextIO = sys.stdout if self.common_settings.stdout else sys.stderr
        # A dry run's point is the list of jobs: Snakemake's own output, as --verbose.
        cs = self.common_settings
        self.full = bool(getattr(self.settings, "full", False) or cs.verbose or cs.dryrun)
        self.progress = Progress(show_failed_logs=bool(self.common_settings.show_failed_logs))
        self.last: list[str] = []  # psml_last lines, printed after Snakemake's closing lines
        self.out_lock = threading.Lock()
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.status_shown = False  # a terminal's in-place status line is on screen
        self.last_output = time.time()
        self.stop = threading.Event()
        self.ticker: threading.Thread | None = None
        self.classic: logging.Handler | None = None
        if self.full:
            self.classic = _classic_handler(self.common_settings, self.stream)

    def emit(self, record: logging.LogRecord) -> None:
        """Print what ``record`` calls for (see the module's docstring)."""
        try:
            with self.out_lock:
                self._emit(record)
        except Exception:  # noqa: BLE001 - a logger must not stop the workflow
            self.handleError(record)

    def _emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "psml_last", False):
            self.last.append(record.getMessage())
            return
        event = getattr(record, "event", None)
        if self.classic is not None:
            # Rules without a shell command (run: blocks, the target rule) print "None": skip
            # it, keeping the blank line Snakemake's handler puts before the next job.
            if event == LogEvent.SHELLCMD and not getattr(record, "shellcmd", "x"):
                self.classic.last_msg_was_job_info = False  # type: ignore[attr-defined]
            else:
                self.classic.handle(record)
        else:
            if event == LogEvent.JOB_INFO and self.ticker is None:
                self._start_ticker()
            self._write(self.progress.lines(record))
        if record.getMessage().startswith("Elapsed time:"):
            self._write_last()

    def _write(self, lines: list[str]) -> None:
        if not lines:
            return
        if self.status_shown:
            self.stream.write("\r\033[K")
            self.status_shown = False
        self.stream.write("".join(f"{line}\n" for line in lines))
        self.stream.flush()
        self.last_output = time.time()

    def _write_last(self) -> None:
        lines, self.last = self.last, []
        if self.classic is not None:
            for line in lines:
                self.classic.handle(logging.makeLogRecord({"msg": line, "levelno": 20}))
        else:
            self._write(lines)

    def _start_ticker(self) -> None:
        self.ticker = threading.Thread(target=self._tick, name="psml-logger-ticker", daemon=True)
        self.ticker.start()

    def _tick(self) -> None:
        """On a terminal, a status line updated every second; in a log, a line every 30 s."""
        while not self.stop.wait(1.0 if self.tty else HEARTBEAT_S):
            with self.out_lock:
                now = time.time()
                line = self.progress.still_running(now)
                if line is None:
                    continue
                if self.tty:
                    self.stream.write("\r\033[K" + line[: _width()])
                    self.stream.flush()
                    self.status_shown = True
                elif now - self.last_output >= HEARTBEAT_S:
                    self._write([line])

    def close(self) -> None:
        """Stop the status line and print what was held for the end."""
        self.stop.set()
        with self.out_lock:
            self._write_last()
            if self.status_shown:
                self.stream.write("\r\033[K")
                self.stream.flush()
                self.status_shown = False
        super().close()

    @property
    def writes_to_stream(self) -> bool:
        """It replaces Snakemake's own stream handler."""
        return True

    @property
    def writes_to_file(self) -> bool:
        """Snakemake's complete log file is written by Snakemake itself."""
        return False

    @property
    def has_filter(self) -> bool:
        """It chooses its records itself."""
        return True

    @property
    def has_formatter(self) -> bool:
        """It formats its records itself."""
        return True

    @property
    def needs_rulegraph(self) -> bool:
        """No rule graph needed."""
        return False


def _classic_handler(settings: object, stream: TextIO) -> logging.Handler:
    """Snakemake's own stream handler, filter and formatter: its full output."""
    from snakemake.logging import ColorizingTextHandler, DefaultFilter, DefaultFormatter

    s = settings
    handler = ColorizingTextHandler(
        nocolor=s.nocolor,  # type: ignore[attr-defined]
        stream=stream,
        formatter=DefaultFormatter(s.quiet, s.show_failed_logs),  # type: ignore[attr-defined]
        filter=DefaultFilter(  # type: ignore[arg-type]
            s.quiet,
            s.debug_dag,
            s.verbose,
            s.dryrun,
            s.printshellcmds,  # type: ignore[attr-defined]
        ),
    )
    return handler


def _width() -> int:
    import shutil

    return max(shutil.get_terminal_size((100, 24)).columns - 1, 20)
