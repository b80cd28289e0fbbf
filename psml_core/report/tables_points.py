"""The operating-points appendix: each (workload, recipe)'s chosen point and its candidates.

It reads ``operating_points`` of the effective configuration (``config.json``): the record
entries in use, collected by the workflow with their sources (:mod:`psml_core.tuning.record`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pandas as pd

from psml_core.report.attachments import Attachment
from psml_core.report.format import DASH
from psml_core.report.tables import Table

__all__ = ["points_attachment", "points_intro", "points_tables"]


def _entries(experiment: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(((experiment.get("operating_points") or {}).get("entries") or {}).items())


def _momentum(s: Mapping[str, Any]) -> str:
    h = s["momentum_handling"]
    return h if h in ("none", "n/a") else f"{h} {s['momentum']:g}"


def points_intro(experiment: Mapping[str, Any]) -> str:
    """What the appendix says before its tables: the rule, the seed, where the points came from."""
    if "operating_points" not in experiment:
        return (
            "The configuration records no operating points: every run used its workload's "
            "declared learning rate, momentum and warm-up."
        )
    op = experiment["operating_points"] or {}
    tuning = op.get("tuning") or {}
    if not tuning.get("enabled", True):
        return (
            "This tier does not tune (`tuning.enabled: false`): every recipe runs at its "
            "workload's declared learning rate, momentum and warm-up."
        )
    entries = _entries(experiment)
    sources = sorted({_where(e) for e in entries.values()}) or [DASH]
    inherited = op.get("inherited") or {}
    factors = ", ".join(f"{f:g}" for f in tuning.get("lr_factors") or [])
    margin = float(tuning.get("accuracy_margin", 0.01))
    text = (
        f"Every (workload, recipe) trains at an operating point chosen by a sweep on the tuning "
        f"seed {tuning.get('seed')}, which no verdict uses: first the recipe's free parameter "
        "where it has one (a baseline's setting its paper leaves open, such as OmniReduce's "
        "block size or a uniform ratio, or a constant of our reconstruction, such as DC2's "
        f"kappa), then the learning rate times {factors} with the momentum on and off within "
        "the recipe's own mechanism (the server's optimizer, or DGC's momentum correction on "
        "the workers; AdaGrad has none), then a linear warm-up over "
        f"{tuning.get('warmup_fraction', 0) * 100:g}% of the iterations at the best point. The "
        "rule, fixed before any run, chooses for what the claims judge: a (workload, recipe) "
        "that a claim judges on a time or bytes to target takes the least of it among the "
        "candidates whose final test accuracy (the mean of the last "
        f"{tuning.get('final_evaluations')} evaluations) is within {margin:g} of the best "
        "candidate's (never less than one test sample); any other takes the highest final "
        "accuracy, candidates within one test sample tying. Ties go to the declared point, its "
        "free parameter's own value, the smaller learning rate, the declared momentum and no "
        "warm-up. A diverged candidate is never chosen. Where the points came from: "
        + "; ".join(sources)
        + "."
    )
    if inherited:
        pairs = ", ".join(f"{k} from {v}" for k, v in sorted(inherited.items()))
        text += (
            " Workloads and recipes an experiment's sweep derives inherit their base's point: "
            f"{pairs}."
        )
    return text


def _where(entry: Mapping[str, Any]) -> str:
    src = str(entry.get("source", ""))
    if src.startswith("record "):
        return f"the record config/{src.split(' ', 1)[1]}"
    return "this workflow's tune jobs (results/<tier>/tune/)" if src else DASH


def _free(params: Mapping[str, Any] | None) -> str:
    """A candidate's free-parameter values in a few words (``block_size 32``), "" for none."""
    return ", ".join(f"{p.rsplit('.', 1)[-1]} {v:g}" for p, v in (params or {}).items())


def _label(c: Mapping[str, Any], declared: Mapping[str, Any]) -> str:
    if c["stage"] == 2:
        return "warm-up"
    if c["stage"] == 0 and not c.get("declared_params", True):
        return _free(c.get("params"))
    same = c["momentum"] == declared["momentum"] or c["momentum_handling"] == "n/a"
    return f"{c['lr_factor']:g}×" + ("" if same else " ±m")


_SHOWN = {"time_to_target_s": " s", "bytes_to_target": " B", "samples_to_target": ""}
"""The to-target metrics a candidate's cell shows after its accuracy, with their units."""


def _cell(c: Mapping[str, Any], chosen: bool, metric: str = "final_test_accuracy") -> str:
    acc = c["final_accuracy"]
    text = "NaN" if acc is None else f"{acc:.3f}"
    if metric in _SHOWN:
        value = c.get(metric)
        text += f" / {'never' if value is None else f'{value:.3g}{_SHOWN[metric]}'}"
    if c.get("diverged"):
        text += " div."
    elif c.get("unstable"):
        text += " unst."
    return f"{text} *" if chosen else text


_HELD = re.compile(r"; held at check seeds [0-9, ]+")


def _why(text: str) -> str:
    """The rule's reason, without the check seeds every point held (the caption says so)."""
    return _HELD.sub("", text)


def _is_chosen(c: Mapping[str, Any], chosen: Mapping[str, Any]) -> bool:
    keys = ("lr", "momentum", "warmup_iterations")
    same_params = (c.get("params") or {}) == (chosen.get("params") or {})
    return same_params and all(c[k] == chosen[k] for k in keys)


def _objective(e: Mapping[str, Any]) -> str:
    obj = e.get("objective") or {}
    metric = obj.get("metric", "final_test_accuracy")
    claim = obj.get("claim")
    return f"{metric} ({claim.rsplit('/', 1)[-1]}, {obj.get('role')})" if claim else metric


def points_tables(experiment: Mapping[str, Any]) -> list[Table]:
    """The chosen points and the candidates' accuracies, grouped by workload (none if untuned)."""
    entries = _entries(experiment)
    if not entries:
        return []
    chosen_rows, cand_rows = [], []
    columns: list[str] = []
    for _key, e in sorted(entries.items()):
        d, ch = e["declared"], e["chosen"]
        under = "any (scenario-free)" if e["scenario_free"] else e["scenario"]
        metric = (e.get("objective") or {}).get("metric", "final_test_accuracy")
        chosen_rows.append([
            e["workload"], e["method"], under, _objective(e),
            f"{ch['lr']:g} ({ch['lr'] / d['lr']:g}×)", _momentum(ch),
            str(ch["warmup_iterations"]) if ch["warmup_iterations"] else "none",
            _free(ch.get("params")) or DASH,
            _why(ch["why"]) + (" (every candidate diverged)" if e["all_diverged"] else ""),
        ])  # fmt: skip
        cells = {_label(c, d): _cell(c, _is_chosen(c, ch), metric) for c in e["candidates"]}
        columns += [c for c in cells if c not in columns]
        cand_rows.append((e["workload"], e["method"], cells))
    lrs = sorted((c for c in columns if "×" in c), key=_column_key)
    order = [*(c for c in columns if "×" not in c and c != "warm-up"), *lrs, "warm-up"]
    chosen = Table(
        "operating_points",
        "The operating point of each (workload, recipe): what it was chosen for (the metric "
        "of the claim that judges it, and its role there; final accuracy where no claim judges "
        "it on a time or bytes to target), learning rate (its multiple of the workload's), "
        "momentum handling, warm-up iterations, its free parameter's value, and why the rule "
        "chose it; 'tuned under' is the scenario of its candidates (any: the recipe trains "
        "alike under every scenario). Every point also trained without diverging at the check "
        "seeds (the tuning seed + 1, + 2, + 3); 'passed over' counts faster candidates that "
        "diverged at one of them.",
        ["Workload", "Method", "Tuned under", "Chosen for", "lr", "Momentum", "Warm-up",
         "Free", "Why"],
        chosen_rows,
        widths=["auto", "auto", "auto", 1.7, "auto", "auto", "auto", "auto", 2.3],
        group=True,
    )  # fmt: skip
    cands = Table(
        "tuning_candidates",
        "Every candidate's final test accuracy (mean of the last evaluations) on the tuning "
        "seed, and after '/' its time (s, simulated) or bytes to target where that is what the "
        "point was chosen for ('never': it did not hold the target); the chosen one marked *. "
        "Columns: a free parameter's other values at the declared lr; the lr multiple at the "
        "declared momentum (at the free parameter's chosen value), '±m' the momentum switched "
        "(off, or on where the workload declares none); 'warm-up' the best point with a "
        "warm-up; 'div.' marks a run that diverged, 'unst.' one that the rule chose but that "
        "diverged at a check seed (neither is ever the point).",
        ["Workload", "Method", *order],
        [[w, m, *(cells.get(c, DASH) for c in order)] for w, m, cells in cand_rows],
        align=["left", "left", *["right"] * len(order)],
        group=True,
    )
    return [chosen, cands]


def _column_key(label: str) -> tuple[float, bool]:
    factor, _, rest = label.partition("×")
    return float(factor), bool(rest)


def points_attachment(experiment: Mapping[str, Any]) -> Attachment | None:
    """Every candidate of every tuning, with its settings and outcome (numbers as numbers)."""
    rows = [
        {"key": key, "scenario": e["scenario"], "source": e.get("source", ""),
         "fingerprint": e["fingerprint"], "chosen": _is_chosen(c, e["chosen"]),
         "objective": (e.get("objective") or {}).get("metric", "final_test_accuracy"),
         **{k: v for k, v in c.items() if k not in ("evaluations", "params", "checks")},
         "check_seeds_held": sum(1 for r in c.get("checks") or () if not r["diverged"]),
         "params": _free(c.get("params"))}
        for key, e in sorted(_entries(experiment).items())
        for c in e["candidates"]
    ]  # fmt: skip
    if not rows:
        return None
    return Attachment(
        "tuning_candidates",
        "Every tuning candidate: its (workload, recipe), stage, learning rate, momentum, "
        "warm-up, free parameter, final test accuracy, samples, time and bytes to target "
        "(empty: censored), why it diverged (empty: it did not), whether it was chosen, what "
        "the entry was chosen for, and the entry's fingerprint and source.",
        pd.DataFrame(rows),
        summary="every tuning candidate: settings, accuracy, samples to target, divergence",
    )
