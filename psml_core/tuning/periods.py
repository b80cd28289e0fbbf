"""A delay-variation claim's scenario must vary while the claim is decided.

A claim about adapting to delay variation (DC2's "low and high delay variation") says nothing
when the runs it compares reach their target before the network has changed state: the
audit found uniform compression at its target after 1.8 s of simulated time, before the first
congested period at 3.1 s. So a claim with ``measure.min_periods: k`` in its paper file needs,
in every verdict seed, at least ``k`` congested and ``k`` free periods of its scenario's
two-state process to *begin* before its dense baseline reaches the target. The dense
baseline's time to target is read from the tier's operating-point record (its chosen
candidate at the tuning seed, tuned under the claim's scenario); the periods are the seeded
chain of each verdict seed, which is derived from the seed and time alone
(:mod:`psml_core.net.cross_traffic`), so the check runs when the config loads, before any run.

Two-state processes: cross-traffic ``markov`` (its periods in simulated time) and the delay
``markov`` process (its periods in iterations: counted over the dense baseline's iterations
to target).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from psml_core.config import Experiment
from psml_core.config.claim_uses import ClaimUse
from psml_core.errors import ConfigError

__all__ = ["PeriodCount", "check_periods", "count_periods", "dense_reference"]


@dataclass(frozen=True)
class PeriodCount:
    """Periods of a two-state process that begin before a horizon.

    Attributes:
        congested: Periods in the high (congested) state.
        free: Periods in the low (free) state, the first one included.
        unit: ``s`` (simulated seconds) or ``iterations``.
    """

    congested: int
    free: int
    unit: str


def _states(segments: int) -> tuple[int, int]:
    """(congested, free) periods of ``segments`` alternating state segments, the first free."""
    return segments // 2, segments - segments // 2


def count_periods(scenario: Any, seed: int, machines: int, until: float) -> PeriodCount | None:
    """The periods of ``scenario``'s two-state process that begin before ``until``.

    Args:
        scenario: The :class:`~psml_core.config.ScenarioSpec`.
        seed: The run seed (the chain's seed).
        machines: The run's machines (a per-machine chain counts machine 0's).
        until: The horizon, in simulated seconds for cross-traffic and in iterations for a
            delay process.

    Returns:
        The count, or None where the scenario has no two-state process.
    """
    cross, delay = scenario.cross_traffic or {}, scenario.delay or {}
    if cross.get("kind") == "markov":
        from psml_core.net.cross_traffic import make_cross_traffic

        chain = make_cross_traffic(cross, seed, machines)
        segments, t = 1, 0.0
        while chain is not None:
            t = chain.next_change(t)
            if not t < until:
                break
            segments += 1
        return PeriodCount(*_states(segments), unit="s")
    if delay.get("kind") == "markov":
        from psml_core.net.delay import make_delay

        process = make_delay(delay, seed)
        steps = max(0, math.ceil(until))
        values = [process.delay_s(i) for i in range(steps)]
        segments = 1 + sum(1 for a, b in zip(values, values[1:], strict=False) if a != b)
        return PeriodCount(*_states(segments), unit="iterations")
    return None


def dense_reference(exp: Experiment, use: ClaimUse) -> str | None:
    """The claim's dense baseline: a comparator without a codec, else dense_bsp, else dense_asp."""
    ex = exp.experiments.get(use.experiment)
    runs = set(ex.methods) if ex is not None else set()
    for name in (*use.comparators, *use.robustness):
        recipe = exp.recipes.get(name)
        if recipe is not None and recipe.codec.name == "none" and name in runs:
            return name
    return next((m for m in ("dense_bsp", "dense_asp") if m in runs), None)


def check_periods(exp: Experiment, entries: dict[str, dict[str, Any]], record: str) -> list[str]:
    """Refuse a delay-variation claim whose scenario does not vary before it is decided.

    Args:
        exp: The tier (its ``claims``).
        entries: The record's current entries by tuning key (the dense baselines' points).
        record: The record's name, for the message.

    Returns:
        One note per claim that could not be checked yet (its dense baseline not tuned under
        its scenario, or never reaching the target); the workflow tunes it first.

    Raises:
        ConfigError: one line naming the claim, the scenario, the seed and the numbers.
    """
    notes: list[str] = []
    for use in exp.claims:
        if not use.min_periods:
            continue
        ex = exp.experiments[use.experiment]
        dense = dense_reference(exp, use)
        for workload in [use.workload] if use.workload else list(ex.workloads or exp.workloads):
            if dense is None:
                raise ConfigError(
                    f"claim {use.claim!r} (config/papers/{use.paper}.yaml): measure.min_periods "
                    f"needs a dense baseline in experiment {use.experiment!r} to time the "
                    "periods against; add dense_bsp to it"
                )
            entry = entries.get(exp.tuning_key(workload, dense))
            for sc in use.scenarios:
                why = _check_one(exp, use, ex, workload, dense, sc, entry, record)
                if why:
                    notes.append(why)
    return notes


def _horizon(exp: Experiment, workload: str, entry: dict[str, Any], unit: str) -> float | None:
    """The dense baseline's time (or iterations) to target on the tuning seed, None: never."""
    chosen = entry["chosen"]
    pick = next(
        (c for c in entry["candidates"]
         if all(c[k] == chosen[k] for k in ("lr", "momentum", "warmup_iterations"))
         and (c.get("params") or {}) == (chosen.get("params") or {})),
        None,
    )  # fmt: skip
    if pick is None:
        return None
    if unit == "s":
        return pick.get("time_to_target_s")
    samples = pick.get("samples_to_target")
    if samples is None:
        return None
    workers, _shards = exp.cluster(workload)
    return samples / (workers * exp.workloads[workload].batch_size)


def _check_one(
    exp: Experiment, use: ClaimUse, ex: Any, workload: str, dense: str, sc: str,
    entry: dict[str, Any] | None, record: str,
) -> str | None:  # fmt: skip
    """Check one (claim, workload, scenario); a note where it cannot be checked yet."""
    scenario = exp.scenarios.get(sc)
    if scenario is None:
        return None  # the claim is NOT RUN here, which the analysis says
    where = f"claim {use.claim!r} (config/papers/{use.paper}.yaml)"
    probe = count_periods(scenario, 0, 1, 0.0)
    if probe is None:
        raise ConfigError(
            f"{where}: measure.min_periods asks for delay variation, but scenario {sc!r} has no "
            "two-state process (cross_traffic or delay of kind markov); give it one or drop "
            "min_periods"
        )
    if entry is None or entry.get("scenario") != sc:
        return (
            f"{where}: periods of {sc!r} not checked yet: {workload}/{dense} is not tuned under it"
        )
    until = _horizon(exp, workload, entry, probe.unit)
    if until is None:
        return f"{where}: periods of {sc!r} not checked: {dense} never held its target"
    workers, shards = exp.cluster(workload)
    machines = workers if exp.colocated else workers + shards
    for seed in ex.seeds or exp.seeds:
        got = count_periods(scenario, seed, machines, until)
        assert got is not None
        if min(got.congested, got.free) < use.min_periods:
            raise ConfigError(
                f"{where}: scenario {sc!r} holds {got.congested} congested and {got.free} free "
                f"periods in seed {seed} before {dense} reaches its target ({until:.3g} "
                f"{got.unit} on the tuning seed, {record}); measure.min_periods asks for "
                f"{use.min_periods} of each: shorten the scenario's periods (period_ms, "
                "switch_prob)"
            )
    return None
