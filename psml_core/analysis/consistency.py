"""Bounds that a paper's own numbers put on its claims.

Where a claim's reported regime fixes an upper bound on its effect, the bound is computed
from the paper's numbers alone and printed beside the claim, with the arithmetic. A claim
that exceeds it is **INCONSISTENT (paper)**: no reproduction, however faithful, can reach a
number the paper's own setup rules out, so a miss there says nothing against our run.

**Amdahl's bound on a speed-up from sending fewer bytes.** A dense step takes compute ``C``
plus communication ``c C`` (``c``: the dense comm/compute ratio). A method that sends a
fraction ``rho`` of the dense bytes (its density) shortens at best the communication, to
``rho c C``, and leaves compute as it is, so a step is at most ``(1 + c) / (1 + rho c)``
times shorter. Over a run the bound holds as long as the method needs no fewer steps than the
baseline, which a lossy compressor does not; it is generous, since it also assumes that the
method's own encoding costs nothing and that latency shrinks with the bytes. The bound
applies to speed-ups and time reductions (``speedup``, or ``reduction`` of a time metric)
whose regime gives both ``comm_compute`` and ``density`` as reported or derived numbers.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["INCONSISTENT", "TIME_METRICS", "amdahl_bound", "consistency_bound"]

INCONSISTENT = "INCONSISTENT (paper)"
TIME_METRICS = frozenset({"time_to_target_s", "total_time_s"})


def amdahl_bound(comm_compute: float, density: float) -> float:
    """The largest step speed-up from sending ``density`` of the dense bytes (module doc)."""
    if comm_compute < 0 or not 0 <= density <= 1:
        raise ValueError(
            f"need comm/compute >= 0 and density in [0, 1], got {comm_compute}, {density}"
        )
    return (1.0 + comm_compute) / (1.0 + comm_compute * density)


def _known(field: dict[str, Any] | None) -> float | None:
    if not field or field.get("status") not in ("reported", "derived"):
        return None
    value = field.get("value")
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def consistency_bound(
    claim: dict[str, Any], regime: dict[str, dict[str, Any]]
) -> tuple[float, str] | None:
    """``(bound in the claim's own unit, the arithmetic)``, or None where none applies.

    Args:
        claim: The claim (its ``reported`` kind and first metric).
        regime: The claim's paper regime (:func:`psml_core.analysis.regime.paper_regime`).
    """
    kind = claim["reported"]["kind"]
    metric = claim["measure"]["metrics"][0]
    if metric not in TIME_METRICS or kind not in ("speedup", "reduction"):
        return None
    cc = _known(regime.get("comm_compute"))
    rho = _known(regime.get("density"))
    if cc is None or rho is None or not 0 <= rho <= 1 or cc < 0:
        return None
    speedup = amdahl_bound(cc, rho)
    sources = "; ".join(
        f"{key} {regime[key]['status']}: {regime[key].get('source') or regime[key].get('how')}"
        for key in ("comm_compute", "density")
    )
    text = (
        f"Amdahl from the paper's own numbers: a dense step is compute plus {cc:g}x compute "
        f"of communication; sending {rho:g} of the bytes shortens it at most "
        f"(1 + {cc:g}) / (1 + {cc:g} x {rho:g}) = {speedup:.3g}x, with compute and the number "
        f"of steps unchanged and encoding free ({sources})"
    )
    if kind == "speedup":
        return speedup, text
    reduction = 100.0 * (1.0 - 1.0 / speedup)
    return reduction, f"{text}; as a time reduction, at most {reduction:.3g}%"
