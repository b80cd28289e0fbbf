"""Build a codec from its recipe block, with its wrapper (error feedback, momentum correction).

It sits above the codecs and their wrappers (:mod:`.base` is below both), so nothing in the
package imports back up.
"""

from __future__ import annotations

import dataclasses

from psml_core.codecs.base import CODECS, Codec
from psml_core.codecs.error_feedback import ErrorFeedback
from psml_core.codecs.momentum_correction import MomentumCorrection
from psml_core.config import BlockSpec
from psml_core.errors import ConfigError

__all__ = ["make_codec"]


def make_codec(spec: BlockSpec, momentum: float = 0.0) -> Codec:
    """Instantiate a codec from its recipe block; bad parameters are a ConfigError.

    Two wrapper switches in ``params``, at most one of them:

    * ``error_feedback: true`` wraps the codec in :class:`ErrorFeedback`;
    * ``momentum_correction: true`` wraps it in
      :class:`~psml_core.codecs.momentum_correction.MomentumCorrection` (DGC's momentum
      correction and factor masking) with ``momentum``, the workload's momentum that
      :func:`~psml_core.engine.job.build_job` moves onto the workers (0.0 elsewhere, e.g. when a
      recipe is only validated, or for the server's copy, which needs no momentum state).

    Args:
        spec: The recipe's codec block.
        momentum: ``m`` of the momentum correction, in [0, 1); ignored without it.
    """
    params = dict(spec.params)
    ef = params.pop("error_feedback", False)
    mc = params.pop("momentum_correction", False)
    for key, flag in (("error_feedback", ef), ("momentum_correction", mc)):
        if not isinstance(flag, bool):
            raise ConfigError(f"codec {spec.name!r}: {key} must be true or false, got {flag!r}")
    if ef and mc:
        raise ConfigError(
            f"codec {spec.name!r}: momentum_correction accumulates what was not sent itself "
            "(its accumulation is the error feedback); remove error_feedback: true"
        )
    try:
        codec: Codec = CODECS.build(dataclasses.replace(spec, params=params))
    except ValueError as exc:
        raise ConfigError(f"codec {spec.name!r}: {exc}") from None
    if (ef or mc) and getattr(codec, "carries_residual", False):
        key = "error_feedback" if ef else "momentum_correction"
        raise ConfigError(
            f"codec {spec.name!r} keeps its own residual; {key}: true would carry "
            "the unsent part twice — remove it"
        )
    if mc:
        try:
            return MomentumCorrection(codec, momentum)
        except ValueError as exc:
            raise ConfigError(f"codec {spec.name!r}: momentum_correction: {exc}") from None
    return ErrorFeedback(codec) if ef else codec
