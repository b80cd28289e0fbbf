"""What a tier tunes: one target per (workload, recipe), its tuning run and its fingerprint.

* **Targets.** Every (workload, method) of the tier's grid maps to a tuning key
  ``<workload>/<method>``; a workload or recipe that an experiment's sweep derives
  (``digits_mlp__p8``, ``jpdc__m_d4``) maps to its base's key and inherits its point, so the
  cost of tuning does not multiply with the sweeps.
* **Objective** (:mod:`.objective`): the metric the key's claims judge, which the selection
  rule ranks its candidates by.
* **Scenario.** A target tuned for a time to target runs under its claim's first scenario
  where its key runs there; any other under the first scenario (in grid order) that a run of
  its key uses. A recipe whose training does not depend on the scenario (a barrier policy with
  the static controller: the same updates in the same order whatever the network and the
  workers' speeds) leaves the scenario out of its fingerprint unless it is tuned for a time,
  which the link sets; DC2, ASP/SSP/DSSP and PCP keep it.
* **Fingerprint.** SHA-256 of the base run's settings at the tuning seed (recipe, workload,
  data set, workers, shards, backend, compute, scenario where it matters, the recipe's free
  parameter and its values), the tuning settings, the objective, the selection rule, the
  divergence test's threshold and the psml version; names of runs and
  tiers, checkpoints and the recipes' and scenarios' descriptive text are left out. A record
  entry whose fingerprint differs is stale.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from psml_core import __version__
from psml_core.config import Experiment, MethodRecipe, RunSpec, TuningSpec
from psml_core.config.renames import hashed_names
from psml_core.metrics import divergence
from psml_core.sync import SYNC_POLICIES
from psml_core.tuning.objective import Objective, objective_for
from psml_core.tuning.rule import RULE

__all__ = ["TuneTarget", "fingerprint", "scenario_free", "tuning_targets"]

_TEXT = ("description", "deviations", "paper", "role")


@dataclass(frozen=True)
class TuneTarget:
    """One (workload, recipe) to tune.

    Attributes:
        key: ``<workload>/<method>`` (the record's entry name).
        scenario: The scenario it is tuned under.
        spec: The run at the tuning seed and the declared point (candidates vary it).
        scenario_free: Whether the recipe's training is the same under every scenario.
        fingerprint: :func:`fingerprint` of ``spec``.
        objective: What its candidates are ranked by (:mod:`.objective`).
    """

    key: str
    scenario: str
    spec: RunSpec
    scenario_free: bool
    fingerprint: str
    objective: Objective = Objective()

    @property
    def workload(self) -> str:
        """The workload's name."""
        return self.spec.workload.name

    @property
    def method(self) -> str:
        """The recipe's name."""
        return self.spec.method.name


def scenario_free(recipe: MethodRecipe) -> bool:
    """Whether the recipe trains identically under every scenario (barrier, static controller).

    Under a barrier every shard applies the averaged pushes of a clock in worker order, so
    neither the links nor the workers' speeds change an update; an adaptive controller (DC2)
    or a policy without a barrier (ASP, SSP, DSSP, PCP) makes the updates depend on timing.
    """
    policy = SYNC_POLICIES.get(recipe.sync.name, where=f"{recipe.name}.sync")
    return bool(policy.barrier) and not policy.rounds and recipe.controller.name == "static"


def fingerprint(
    spec: RunSpec, tuning: TuningSpec, free: bool, objective: Objective | None = None
) -> str:
    """SHA-256 of what a tuning depends on (module docstring); names and paths excluded.

    Args:
        spec: The target's run at the tuning seed and the declared point.
        tuning: The tier's tuning settings.
        free: Whether the recipe trains alike under every scenario.
        objective: Its objective (None: the final accuracy, no claim).
    """
    objective = objective or Objective()
    # Under the keys' names before issue 47 (compute's device, ...), as the config hash: the
    # records' fingerprints stay valid across the rename.
    run = hashed_names(spec.to_dict())
    for key in ("run_id", "tier", "checkpoint_every", "operating_point"):
        run.pop(key, None)
    # The torch device changes rounding, not what is trained or its clock (the sim charges
    # compute.cost_profile): a point tuned on the CPU holds on a GPU. to_dict leaves the default
    # "cpu" out, so dropping it keeps the records' fingerprints.
    run.pop("device", None)
    for key in _TEXT:  # what the report prints about a recipe, never what it trains
        run["method"].pop(key, None)
    run["scenario"].pop("description", None)
    if free and objective.metric != "time_to_target_s":  # a time depends on the link
        run.pop("scenario")
        run["compute"].pop("heterogeneity", None)
    payload = {
        "run": run,
        "tuning": {
            "seed": tuning.seed,
            "lr_factors": list(tuning.lr_factors),
            "warmup_fraction": tuning.warmup_fraction,
            "final_evaluations": tuning.final_evaluations,
            "accuracy_margin": tuning.accuracy_margin,
            "check_seeds": tuning.check_seeds,
        },
        "objective": {"metric": objective.metric, "scenario": objective.scenario},
        "rule": RULE,
        "divergence": {"chance_band": divergence.CHANCE_BAND},
        "psml": __version__,
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def tuning_targets(exp: Experiment) -> dict[str, TuneTarget]:
    """The tier's targets by key, in grid order; empty when the tier does not tune."""
    if not exp.tuning.enabled:
        return {}
    first: dict[str, tuple[str, str]] = {}
    scenarios: dict[str, list[str]] = {}
    for w, m, s, _seed in exp.grid():
        key = exp.tuning_key(w, m)
        first.setdefault(key, (exp.bases.get(w, w), exp.bases.get(m, m)))
        seen = scenarios.setdefault(key, [])
        if s not in seen:
            seen.append(s)
    out = {}
    for key, (w, m) in first.items():
        objective = objective_for(exp, key, scenarios[key])
        s = objective.scenario or scenarios[key][0]
        spec = exp.declared_run(w, m, s, exp.tuning.seed)
        free = scenario_free(spec.method)
        out[key] = TuneTarget(
            key, s, spec, free, fingerprint(spec, exp.tuning, free, objective), objective
        )
    return out
