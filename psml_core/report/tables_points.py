"""The operating-points appendix: each (workload, recipe)'s chosen point and its candidates.

It reads ``operating_points`` of the effective configuration (``config.json``): the record
entries in use, collected by the workflow with their sources (:mod:`psml_core.tuning.record`).
"""

from __future__ import annotations

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
    text = (
        f"Every (workload, recipe) trains at an operating point chosen by a sweep on the tuning "
        f"seed {tuning.get('seed')}, which no verdict uses: the learning rate times "
        f"{factors}, with the momentum on and off within the recipe's own mechanism (the "
        "server's optimizer, or DGC's momentum correction on the workers; AdaGrad has none), "
        f"then a linear warm-up over {tuning.get('warmup_fraction', 0) * 100:g}% of the "
        "iterations at the best point. The rule, fixed before any run: among the candidates "
        "that did not diverge, the highest mean test accuracy over the last "
        f"{tuning.get('final_evaluations')} evaluations; candidates within one test sample "
        "tie, and a tie goes to the declared point, then to the smaller learning rate; the "
        "warm-up is taken only when it gains more than one test sample. A diverged candidate "
        "is never chosen. Where the points came from: " + "; ".join(sources) + "."
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


def _label(c: Mapping[str, Any], declared: Mapping[str, Any]) -> str:
    if c["stage"] == 2:
        return "warm-up"
    same = c["momentum"] == declared["momentum"] or c["momentum_handling"] == "n/a"
    return f"{c['lr_factor']:g}×" + ("" if same else " ±m")


def _cell(c: Mapping[str, Any], chosen: bool) -> str:
    acc = c["final_accuracy"]
    text = "NaN" if acc is None else f"{acc:.3f}"
    if c.get("diverged"):
        text += " div."
    return f"{text} *" if chosen else text


def _is_chosen(c: Mapping[str, Any], chosen: Mapping[str, Any]) -> bool:
    keys = ("lr", "momentum", "warmup_iterations")
    return all(c[k] == chosen[k] for k in keys)


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
        chosen_rows.append([
            e["workload"], e["method"], under,
            f"{ch['lr']:g} ({ch['lr'] / d['lr']:g}×)", _momentum(ch),
            str(ch["warmup_iterations"]) if ch["warmup_iterations"] else "none",
            ch["why"] + (" (every candidate diverged)" if e["all_diverged"] else ""),
        ])  # fmt: skip
        cells = {_label(c, d): _cell(c, _is_chosen(c, ch)) for c in e["candidates"]}
        columns += [c for c in cells if c not in columns]
        cand_rows.append((e["workload"], e["method"], cells))
    order = sorted((c for c in columns if c != "warm-up"), key=_column_key) + ["warm-up"]
    chosen = Table(
        "operating_points",
        "The operating point of each (workload, recipe): learning rate (its multiple of the "
        "workload's), momentum handling, warm-up iterations, and why the rule chose it; "
        "'tuned under' is the scenario of its candidates (any: the recipe trains alike under "
        "every scenario).",
        ["Workload", "Method", "Tuned under", "lr", "Momentum", "Warm-up", "Why"],
        chosen_rows,
        widths=["auto", "auto", "auto", "auto", "auto", "auto", 1],
        group=True,
    )
    cands = Table(
        "tuning_candidates",
        "Every candidate's final test accuracy (mean of the last evaluations) on the tuning "
        "seed, the chosen one marked *: lr multiple at the declared momentum, '±m' the momentum "
        "switched (off, or on where the workload declares none), 'warm-up' the best point with "
        "a warm-up; 'div.' marks a run that diverged (never chosen).",
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
         **{k: v for k, v in c.items() if k != "evaluations"}}
        for key, e in sorted(_entries(experiment).items())
        for c in e["candidates"]
    ]  # fmt: skip
    if not rows:
        return None
    return Attachment(
        "tuning_candidates",
        "Every tuning candidate: its (workload, recipe), stage, learning rate, momentum, "
        "warm-up, final test accuracy, samples to target (empty: censored), why it diverged "
        "(empty: it did not), whether it was chosen, and the entry's fingerprint and source.",
        pd.DataFrame(rows),
        summary="every tuning candidate: settings, accuracy, samples to target, divergence",
    )
