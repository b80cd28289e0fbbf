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

**Only where the paper's numbers pin the setting.** A bound uses the numbers the paper gives
for the claim's own setting. Where it gives several (a field with ``values``: the PF README
reports densities of 0.2455 in its MNIST table and about 0.02 in its figure, and the speed-up
claim names neither), every combination gives a bound; the claim prints their range and is
INCONSISTENT only when it exceeds all of them (the largest decides).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

__all__ = ["INCONSISTENT", "TIME_METRICS", "Bound", "amdahl_bound", "consistency_bound"]

INCONSISTENT = "INCONSISTENT (paper)"
TIME_METRICS = frozenset({"time_to_target_s", "total_time_s"})


def amdahl_bound(comm_compute: float, density: float) -> float:
    """The largest step speed-up from sending ``density`` of the dense bytes (module doc)."""
    if comm_compute < 0 or not 0 <= density <= 1:
        raise ValueError(
            f"need comm/compute >= 0 and density in [0, 1], got {comm_compute}, {density}"
        )
    return (1.0 + comm_compute) / (1.0 + comm_compute * density)


@dataclass(frozen=True)
class Bound:
    """The bound a paper's own numbers put on a claim, in the claim's own unit.

    Attributes:
        low: The smallest bound over the values the paper gives (``high`` where it gives one).
        high: The largest: the claim is INCONSISTENT (paper) only above it.
        text: The arithmetic, with the sources.
    """

    low: float
    high: float
    text: str


def _known(field: dict[str, Any] | None) -> list[float]:
    """The field's reported or derived numbers (``values``, else ``value``); [] if none."""
    if not field or field.get("status") not in ("reported", "derived"):
        return []
    raw = field.get("values", [field.get("value")])
    return [
        float(v) for v in raw if isinstance(v, int | float) and math.isfinite(v)
    ]  # a string value (a model's name) is no number


def _in_unit(kind: str, speedup: float) -> float:
    return speedup if kind == "speedup" else 100.0 * (1.0 - 1.0 / speedup)


def consistency_bound(claim: dict[str, Any], regime: dict[str, dict[str, Any]]) -> Bound | None:
    """The bound on the claim from its paper's own numbers, or None where none applies.

    Args:
        claim: The claim (its ``reported`` kind and first metric).
        regime: The claim's paper regime (:func:`psml_core.analysis.regime.paper_regime`).
    """
    kind = claim["reported"]["kind"]
    metric = claim["measure"]["metrics"][0]
    if metric not in TIME_METRICS or kind not in ("speedup", "reduction"):
        return None
    ccs = [c for c in _known(regime.get("comm_compute")) if c >= 0]
    rhos = [r for r in _known(regime.get("density")) if 0 <= r <= 1]
    if not ccs or not rhos:
        return None
    combos = [(cc, rho, amdahl_bound(cc, rho)) for cc, rho in itertools.product(ccs, rhos)]
    sources = "; ".join(
        f"{key} {regime[key]['status']}: {regime[key].get('source') or regime[key].get('how')}"
        for key in ("comm_compute", "density")
    )
    steps = "; ".join(
        ("" if len(combos) == 1 else f"at comm/compute {cc:g} and density {rho:g}, ")
        + f"(1 + {cc:g}) / (1 + {cc:g} x {rho:g}) = {b:.3g}x"
        for cc, rho, b in combos
    )
    lead = (
        "Amdahl from the paper's own numbers: a dense step is compute plus c x compute of "
        "communication (c: comm/compute); sending rho of the bytes shortens it at most "
        "(1 + c) / (1 + c x rho):"
    )
    if len(combos) == 1:
        cc, rho, _b = combos[0]
        lead = (
            f"Amdahl from the paper's own numbers: a dense step is compute plus {cc:g}x compute "
            f"of communication; sending {rho:g} of the bytes shortens it at most"
        )
    low, high = min(b for *_, b in combos), max(b for *_, b in combos)
    text = f"{lead} {steps}, with compute and the number of steps unchanged and encoding free"
    if len(combos) > 1:
        text += (
            f"; the paper does not pin which of its values the claim's setting had, so the bound "
            f"is the range {low:.3g}x to {high:.3g}x, and a claim is inconsistent only above "
            "all of them"
        )
    text += f" ({sources})"
    if kind == "reduction":
        lo_r, hi_r = _in_unit(kind, low), _in_unit(kind, high)
        span = f"{hi_r:.3g}%" if len(combos) == 1 else f"{lo_r:.3g}% to {hi_r:.3g}%"
        return Bound(lo_r, hi_r, f"{text}; as a time reduction, at most {span}")
    return Bound(low, high, text)
