"""User-facing errors.

Every error a user can cause (bad config, missing or corrupt data, a crashed worker) is a
:class:`PsmlError`. The CLI prints its message on one line, without a traceback, and exits with
:attr:`PsmlError.exit_code`. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["ConfigError", "DataError", "Diverged", "PsmlError", "RunError", "did_you_mean"]


def did_you_mean(name: object, known: Iterable[object]) -> str:
    """``"did you mean 'topk_ef'? "`` for the closest of ``known`` to ``name``, else ``""``.

    The phrase goes in front of the list of known names in an error line, so that a misspelt
    name (``tpok_ef``) points at the one meant, not only at every valid one.
    """
    names = [str(k) for k in known]
    close = difflib.get_close_matches(str(name), names, n=1, cutoff=0.6)
    if not close:  # a case slip (DFS for dfs) is below difflib's cutoff for short names
        close = [k for k in names if k.lower() == str(name).lower()][:1]
    return f"did you mean {close[0]!r}? " if close else ""


class PsmlError(Exception):
    """Base class of errors caused by input, with a message that names the culprit and the fix."""

    exit_code = 2


class ConfigError(PsmlError):
    """A configuration value is invalid; the message names the key and the allowed values."""


class DataError(PsmlError):
    """A data file is missing, corrupt or fails its checksum; the message names the file."""

    exit_code = 3


class RunError(PsmlError):
    """A training run failed (for example a crashed worker); the message names the rank."""

    exit_code = 4


class Diverged(RunError):
    """A worker's loss or gradient became non-finite: the run cannot go on.

    The sim backend ends such a run early and marks it DIVERGED in its summary (a result,
    not a failure of the workflow); real backends stop with this message.

    Args:
        iteration: The worker's iteration whose step was non-finite.
        worker: The worker.
        loss: The mini-batch loss of that step (NaN or infinite, or finite with a non-finite
            gradient).
    """

    def __init__(self, iteration: int, worker: int, loss: float) -> None:
        # The arguments as args: SimPy re-creates a process's exception from them.
        super().__init__(iteration, worker, loss)
        self.iteration, self.worker, self.loss = int(iteration), int(worker), float(loss)

    def __str__(self) -> str:
        return (
            f"worker {self.worker}: loss {self.loss!r} or its gradient is non-finite at "
            f"iteration {self.iteration}: the run diverged (lower the learning rate, or see "
            "the tier's operating points)"
        )
