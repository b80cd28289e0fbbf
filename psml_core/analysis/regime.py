"""The regime a claim was made in, and the regime our runs measured it in.

A speed-up from compression exists only where communication costs something next to compute,
and only where bytes, not latency, set that cost; a byte saving depends on how dense the
gradient is. A claim is comparable with its paper only when these dimensionless quantities
match, so every claim carries its paper's regime (``regime`` in ``config/papers/<id>.yaml``:
a paper-wide block, overridden per claim), each field *reported* (with its source), *derived*
(with how) or *unknown*, and the report sets ours beside it.

**Ours, measured** (:func:`measure_regime`) from the claim's own experiment and scenario:

* the *reference* is the dense method the claim is judged against (a ``dense_*`` baseline),
  else ``dense_bsp``, else ``dense_asp``; its runs give the gradient bytes per step (the dense
  push's wire bytes per worker-step, so parameters = bytes / 4), the compute per step, the
  comm/compute ratio (``comm_s / compute_s``, summed over workers) and the bandwidth share of
  communication: ``1 - floor / comm``, with ``comm`` the communication time per worker-step
  and ``floor = 2 (latency + per-message overhead)`` the time a step's push and pull take on
  an infinitely fast link;
* the density is the method's wire bytes per sample over the reference's (1 for dense), both
  directions, or the workers' sent bytes only where the paper's figure counts those
  (``direction: up`` on its density field: ``density_up``);
* workers, servers, batch, link and target come from the runs and the scenario.

**Matching bounds** (:func:`check_regime`), applied only to fields the paper reports or that
are derived from what it reports (a field with several ``values``, where the paper does not
pin which one the claim's setting had, matches where ours matches any of them):

* comm/compute within a factor of 2 (:data:`COMM_COMPUTE_FACTOR`);
* the same side of bandwidth-bound (share >= 0.5) against latency-bound;
* the same density class (:func:`density_class`: dense, ~10%, ~1%, ~0.1%, below), except for
  a claim whose metric is traffic: there the density *is* the result, so bounding it would
  judge the claim twice;
* the number of workers within a factor of 2 (:data:`WORKERS_FACTOR`), where the paper gives
  it (a claim made on 2 workers is measured on about 2);
* the gradient bytes per step within an order of magnitude (:data:`GRADIENT_FACTOR`): a codec's
  per-call costs and a message's latency weigh on 69 kB as they never do on 45 MB.

The *codec share* (the method's codec time per worker-step over the dense reference's compute
plus communication per worker-step) is measured and shown beside the paper's where it is
derivable: it says how much of a step the compressor itself costs on our clock.

A claim outside them is ``NOT COMPARABLE (regime)`` (see :mod:`psml_core.analysis.claims`);
one whose deciding fields are all unknown is answered by a regime map
(:mod:`psml_core.analysis.regime_map`) where the tier runs one.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "COMM_COMPUTE_FACTOR",
    "GRADIENT_FACTOR",
    "TRAFFIC_METRICS",
    "WORKERS_FACTOR",
    "REGIME_FIELDS",
    "check_regime",
    "density_class",
    "measure_regime",
    "paper_regime",
    "reference_method",
    "regime_rows",
]

REGIME_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("model", "model", ""),
    ("params", "parameters", ""),
    ("gradient_bytes", "gradient bytes per step", "B"),
    ("workers", "workers", ""),
    ("servers", "servers", ""),
    ("batch_size", "batch size per worker", ""),
    ("compute_s", "compute per step", "s"),
    ("bandwidth_gbps", "link bandwidth", "Gbit/s"),
    ("latency_us", "link latency", "us"),
    ("delay_variation", "delay variation", ""),
    ("comm_compute", "dense comm / compute", "x"),
    ("bandwidth_share", "bandwidth share of comm", ""),
    ("density", "density (bytes vs dense)", ""),
    ("codec_share", "codec time / dense step", ""),
    ("target_accuracy", "target accuracy", ""),
)
"""(key, label, unit) of every regime field, in the order the report prints them."""

COMM_COMPUTE_FACTOR = 2.0
"""How far (a factor either way) our dense comm/compute may lie from the paper's."""

_BOUNDED = ("comm_compute", "bandwidth_share", "density", "workers", "gradient_bytes")
GRADIENT_FACTOR = 10.0
"""How far (a factor either way) our gradient bytes per step may lie from the paper's."""
TRAFFIC_METRICS = frozenset(
    {"bytes_total", "bytes_up", "bytes_down", "bytes_to_target", "remote_bytes_total"}
)
"""Metrics that measure traffic: a claim on them is not bounded by its density class."""
WORKERS_FACTOR = 2.0
"""How far (a factor either way) our worker count may lie from a paper's that states one."""
_CLASSES = ((0.5, "dense"), (0.05, "~10%"), (0.005, "~1%"), (0.0005, "~0.1%"))


def density_class(density: float) -> str:
    """The density class of a fraction of the dense bytes: dense, ~10%, ~1%, ~0.1%, <0.05%."""
    for floor, name in _CLASSES:
        if density >= floor:
            return name
    return "<0.05%"


def paper_regime(paper: dict[str, Any], claim: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The claim's paper regime: the paper's block, the claim's fields over it; unknown else."""
    merged = {key: {"status": "unknown"} for key, _, _ in REGIME_FIELDS}
    merged.update(paper.get("regime") or {})
    merged.update(claim.get("regime") or {})
    return merged


def reference_method(claim: dict[str, Any], methods: set[str]) -> str | None:
    """The dense method whose runs measure the claim's regime (see the module docstring)."""
    meas = claim["measure"]
    base = meas.get("baseline")
    base = [base] if isinstance(base, str) else list(base or [])
    for cand in [*(b for b in base if b.startswith("dense")), meas["method"]]:
        if cand.startswith("dense") and cand in methods:
            return cand
    for cand in ("dense_bsp", "dense_asp"):
        if cand in methods:
            return cand
    return None


def _num(runs: pd.DataFrame, col: str) -> np.ndarray:
    return pd.to_numeric(runs[col], errors="coerce").to_numpy(dtype=float)


def _delay_text(sc: dict[str, Any]) -> str:
    parts = []
    ct = sc.get("cross_traffic")
    if ct:
        if ct.get("kind") == "markov":
            parts.append(f"cross-traffic {ct.get('flows')} flows, switch p {ct.get('switch_prob')}")
        else:
            parts.append(f"cross-traffic {ct.get('kind')} (mean {ct.get('mean', '?')} flows)")
    if sc.get("delay"):
        parts.append(f"delay {sc['delay'].get('kind')}")
    if sc.get("bandwidth_steps"):
        parts.append(f"{len(sc['bandwidth_steps'])} bandwidth steps")
    if sc.get("heterogeneity"):
        parts.append("heterogeneous workers")
    return "; ".join(parts) or "none"


def measure_regime(
    claim: dict[str, Any], runs: pd.DataFrame, config: dict[str, Any], scenario: str
) -> dict[str, Any]:
    """Our regime of ``claim`` under ``scenario``, from the runs (field -> value or None).

    Args:
        claim: The claim (its ``measure`` names the method and baselines).
        runs: The runs table, restricted to the claim's experiment's workloads.
        config: The effective config (its ``scenarios`` and ``workloads``, sweeps resolved).
        scenario: One of the claim's fixed scenarios.

    Returns:
        A dict with every key of :data:`REGIME_FIELDS` (None where the runs cannot say) and
        ``reference``, the dense method measured.
    """
    meas = claim["measure"]
    sel = runs[runs["scenario"] == scenario]
    if meas.get("workload"):
        sel = sel[sel["workload"] == meas["workload"]]
    out: dict[str, Any] = {key: None for key, _, _ in REGIME_FIELDS}
    ref_name = reference_method(claim, set(sel["method"]))
    out["reference"] = ref_name
    mine = sel[sel["method"] == meas["method"]]
    some = mine if not mine.empty else sel
    if some.empty:
        return out
    wl_name = str(some["workload"].iloc[0])
    wl = (config.get("workloads") or {}).get(wl_name, {})
    sc = (config.get("scenarios") or {}).get(scenario, {})
    hidden = wl.get("hidden")
    model = wl.get("model", "")
    if model == "mlp" and hidden:
        model = f"mlp, hidden {'-'.join(str(h) for h in hidden)}"
    out["model"] = f"{model} on {wl.get('dataset', '?')}" if model else None
    out["workers"] = int(some["workers"].iloc[0])
    out["servers"] = int(some["shards"].iloc[0])
    out["batch_size"] = wl.get("batch_size")
    out["bandwidth_gbps"] = sc.get("bandwidth_gbps")
    out["latency_us"] = sc.get("latency_us")
    out["delay_variation"] = _delay_text(sc)
    out["target_accuracy"] = float(_num(some, "target_accuracy").mean())
    if ref_name is None:
        return out
    ref = sel[sel["method"] == ref_name]
    batch = float(wl.get("batch_size") or 1)
    worker_steps = _num(ref, "samples_processed") / batch  # summed over workers
    grad = _num(ref, "bytes_up") / worker_steps
    out["gradient_bytes"] = float(np.nanmean(grad))
    out["params"] = float(np.nanmean(grad) / 4.0)
    out["compute_s"] = float(np.nanmean(_num(ref, "compute_s") / worker_steps))
    out["comm_compute"] = float(np.nanmean(_num(ref, "comm_s") / _num(ref, "compute_s")))
    comm_step = float(np.nanmean(_num(ref, "comm_s") / worker_steps))
    floor = 2e-6 * (float(sc.get("latency_us", 0.0)) + float(sc.get("message_overhead_us", 0.0)))
    if comm_step > 0:
        out["bandwidth_share"] = float(min(1.0, max(0.0, 1.0 - floor / comm_step)))
    dense_step = (_num(ref, "compute_s") + _num(ref, "comm_s")) / worker_steps
    if not mine.empty and "codec_s" in mine:
        steps = _num(mine, "samples_processed") / batch
        codec = np.nanmean(_num(mine, "codec_s") / steps)
        if np.nanmean(dense_step) > 0 and math.isfinite(codec):
            out["codec_share"] = float(codec / np.nanmean(dense_step))
    if not mine.empty:
        per_sample = np.nanmean(_num(mine, "bytes_total") / _num(mine, "samples_processed"))
        ref_sample = np.nanmean(_num(ref, "bytes_total") / _num(ref, "samples_processed"))
        if ref_sample > 0:
            out["density"] = float(per_sample / ref_sample)
        up_sample = np.nanmean(_num(mine, "bytes_up") / _num(mine, "samples_processed"))
        ref_up = np.nanmean(_num(ref, "bytes_up") / _num(ref, "samples_processed"))
        if ref_up > 0:
            out["density_up"] = float(up_sample / ref_up)
    return out


def _mine(key: str, field: dict[str, Any], ours: dict[str, Any]) -> Any:
    """Our value of a field, measured as the paper's is (a density of sent bytes: up only)."""
    if key == "density" and field.get("direction") == "up":
        return ours.get("density_up")
    return ours.get(key)


def _outside(mine: float, theirs: float, bound: float) -> float | None:
    """``mine / theirs`` where it lies beyond ``bound`` either way, else None."""
    factor = mine / theirs if theirs > 0 else math.inf
    return None if 1 / bound <= factor <= bound else factor


def _paper_values(field: dict[str, Any]) -> list[float]:
    """A known field's numbers: its ``values`` (several, the setting not pinned) or ``value``."""
    if field.get("status") == "unknown":
        return []
    raw = field.get("values", [field.get("value")])
    return [float(v) for v in raw if isinstance(v, int | float) and not isinstance(v, bool)]


def _field_note(key: str, mine: float, value: float) -> str | None:
    """Why our ``mine`` lies outside the matching bound of the paper's ``value``; None: inside."""
    if key == "comm_compute":
        factor = _outside(mine, value, COMM_COMPUTE_FACTOR)
        if factor is None:
            return None
        return (
            f"comm/compute {mine:.3g} is {factor:.3g}x the paper's {value:.3g} "
            f"(bound: within {COMM_COMPUTE_FACTOR:g}x)"
        )
    if key == "workers":
        if _outside(mine, value, WORKERS_FACTOR) is None:
            return None
        return f"{mine:g} workers against the paper's {value:g} (bound: within {WORKERS_FACTOR:g}x)"
    if key == "gradient_bytes":
        factor = _outside(mine, value, GRADIENT_FACTOR)
        if factor is None:
            return None
        return (
            f"gradient bytes {mine:.3g} B per step are {factor:.3g}x the paper's "
            f"{value:.3g} (bound: within {GRADIENT_FACTOR:g}x)"
        )
    if key == "bandwidth_share":
        if (mine >= 0.5) == (value >= 0.5):
            return None
        side = "bandwidth" if mine >= 0.5 else "latency"
        return (
            f"our links are {side}-bound (bandwidth share {mine:.2f}) where the paper's "
            f"are not (share {value:.2f})"
        )
    if density_class(mine) == density_class(value):
        return None
    return (
        f"density {mine:.3g} ({density_class(mine)}) is not the paper's class "
        f"({value:.3g}, {density_class(value)})"
    )


def check_regime(
    theirs: dict[str, dict[str, Any]], ours: dict[str, Any], metric: str | None = None
) -> tuple[str, list[str]]:
    """``(status, notes)``: matched, off (each note names a field out of bounds) or unknown.

    Only fields the paper reports or derives, with a numeric value, are checked; the density
    class is not checked for a claim whose ``metric`` is traffic (:data:`TRAFFIC_METRICS`).
    A field with several ``values`` (the paper does not pin which one the claim's setting had)
    matches where ours matches any of them.
    """
    notes: list[str] = []
    checked = 0
    for key in _BOUNDED:
        if key == "density" and metric in TRAFFIC_METRICS:
            continue
        field = theirs.get(key, {})
        values = _paper_values(field)
        if not values:
            continue
        mine = _mine(key, field, ours)
        if mine is None or not math.isfinite(mine):
            continue
        checked += 1
        misses = [_field_note(key, mine, v) for v in values]
        if any(m is None for m in misses):
            continue
        if len(misses) == 1:
            notes.append(str(misses[0]))
        else:
            each = " / ".join(str(m) for m in misses)
            notes.append(f"none of the paper's {len(misses)} values matches: {each}")
    if not checked:
        return "unknown", []
    return ("off" if notes else "matched"), notes


def regime_rows(theirs: dict[str, dict[str, Any]], ours: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per field: label, the paper's value and status (with source), ours, ratio."""
    rows = []
    for key, label, unit in REGIME_FIELDS:
        field = theirs.get(key, {"status": "unknown"})
        value = field.get("values", field.get("value"))  # a list where the paper gives several
        mine = _mine(key, field, ours)
        ratio = None
        if (
            isinstance(value, int | float)
            and isinstance(mine, int | float)
            and value
            and math.isfinite(mine)
        ):
            ratio = float(mine) / float(value)
        rows.append(
            {
                "field": key,
                "label": label,
                "unit": unit,
                "status": field.get("status", "unknown"),
                "theirs": value,
                "note": field.get("source") or field.get("how") or "",
                "ours": mine,
                "ratio": ratio,
            }
        )
    return rows
