"""User-facing errors.

Every error a user can cause (bad config, missing or corrupt data, a crashed worker) is a
:class:`PsmlError`. The CLI prints its message on one line, without a traceback, and exits with
:attr:`PsmlError.exit_code`. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

__all__ = ["PsmlError", "ConfigError", "DataError", "RunError"]


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
