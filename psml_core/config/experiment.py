"""An experiment: the validated, effective configuration of one workflow invocation.

:class:`Experiment` holds a tier's parts (data sets, workloads, scenarios, recipes) and turns
them into runs (:meth:`Experiment.run`, :meth:`Experiment.grid`); :class:`ExperimentSpec` is one
grid of its own inside a tier. Built by :func:`psml_core.config.load.build_experiment`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from psml_core.config.claim_uses import ClaimUse
from psml_core.config.points import OperatingPoint, TuningSpec
from psml_core.config.specs import (
    BlockSpec,
    ComputeSpec,
    DatasetSpec,
    MethodRecipe,
    RunSpec,
    ScenarioSpec,
    WorkloadSpec,
)

__all__ = ["Experiment", "ExperimentSpec"]


@dataclass(frozen=True)
class ExperimentSpec:
    """A grid of its own inside a tier: some methods on some workloads and scenarios."""

    name: str
    methods: tuple[str, ...]
    workloads: tuple[str, ...] = ()
    scenarios: tuple[str, ...] = ()
    seeds: tuple[int, ...] = ()
    description: str = ""
    paper: str | None = None
    sweep: dict[str, Any] | None = None
    scenario_sweep: dict[str, Any] | None = None
    workload_sweep: dict[str, Any] | None = None
    regime_map: dict[str, Any] | None = None


@dataclass(frozen=True)
class Experiment:
    """The validated effective configuration of one workflow invocation."""

    tier: str
    backend: str
    seeds: tuple[int, ...]
    workers: int
    shards: int
    colocated: bool
    methods: tuple[str, ...]
    datasets: dict[str, DatasetSpec]
    workloads: dict[str, WorkloadSpec]
    scenarios: dict[str, ScenarioSpec]
    compute: ComputeSpec
    recipes: dict[str, MethodRecipe]
    description: str = ""
    report: dict[str, Any] = field(default_factory=dict)
    experiments: dict[str, ExperimentSpec] = field(default_factory=dict)
    checkpoint_every: int = 0
    torch_device: str = "cpu"
    slurm_gpu_partition: str = "gpu"
    derived: frozenset[str] = frozenset()
    """Scenarios and workloads an experiment's axis sweep derived (only its own grid runs them)."""
    tuning: TuningSpec = TuningSpec()
    bases: dict[str, str] = field(default_factory=dict)  # derived workload/recipe -> its base
    base_recipes: dict[str, MethodRecipe] = field(default_factory=dict)  # sweeps' base recipes
    operating_points: dict[str, OperatingPoint] = field(default_factory=dict)  # by tuning_key
    calibrations: dict[str, Any] = field(default_factory=dict)
    """Calibrated sweeps' factors to fit, by key (``config.calibration.CalibrationSpec``)."""
    claims: tuple[ClaimUse, ...] = ()
    """The paper files' claims on this tier's experiments, in file and claim order."""

    @property
    def all_methods(self) -> tuple[str, ...]:
        """Every method of the main grid and of the experiments, main grid first."""
        out = list(self.methods)
        for ex in self.experiments.values():
            out += [m for m in ex.methods if m not in out]
        return tuple(out)

    def run_id(self, workload: str, method: str, scenario: str, seed: int) -> str:
        """The run's id, which is also its directory under ``results/<tier>/runs/``."""
        return f"{workload}/{method}/{scenario}/seed{seed}"

    def tuning_key(self, workload: str, method: str) -> str:
        """``<workload>/<method>`` of the tuning a run's point comes from: a sweep's base's."""
        return f"{self.bases.get(workload, workload)}/{self.bases.get(method, method)}"

    def run(self, workload: str, method: str, scenario: str, seed: int) -> RunSpec:
        """The settings of one run of the grid, at its operating point where one is known."""
        spec = self.declared_run(workload, method, scenario, seed)
        point = self.operating_points.get(self.tuning_key(workload, method))
        return spec if point is None else spec.at_point(point)

    def declared_run(self, workload: str, method: str, scenario: str, seed: int) -> RunSpec:
        """The settings of one run at the workload's declared lr, momentum and warm-up."""
        wl = self.workloads[workload]
        workers, shards = self.cluster(workload)
        return RunSpec(
            run_id=self.run_id(workload, method, scenario, seed),
            tier=self.tier,
            backend=self.backend,
            seed=seed,
            workers=workers,
            shards=shards,
            colocated=self.colocated,
            dataset=self.datasets[wl.dataset],
            workload=wl,
            method=self.recipes[method] if method in self.recipes else self.base_recipes[method],
            scenario=self.scenarios[scenario],
            compute=self.compute_for(scenario, workload),
            checkpoint_every=self.checkpoint_every,
            torch_device=self.torch_device,
        )

    def placement_run(self, workload: str, method: str) -> RunSpec:
        """The settings ``psml partition`` places (workload, method) with.

        The declared run of the tier's first scenario and seed, so that a new operating point
        does not move the placement. Its :meth:`RunSpec.placement_key` names the placement's
        files.
        """
        return self.declared_run(workload, method, sorted(self.scenarios)[0], self.seeds[0])

    def placement_spec(self, workload: str, method: str) -> RunSpec:
        """What ``psml partition`` reads for (workload, method)'s placement.

        The same text for every recipe that shares the placement key: its run id names the
        key, and its recipe keeps only the placement and hashing blocks (dense, BSP, static
        beside them; ``psml partition`` reads no other part of a recipe). So a recipe that joins
        or leaves the group rewrites no spec, and re-runs no placement and no training.
        """
        spec = self.placement_run(workload, method)
        key = spec.placement_key()
        shared = MethodRecipe(
            name=key,
            description=f"placement {key} of workload {workload}",
            codec=BlockSpec("none"),
            sync=BlockSpec("bsp"),
            controller=BlockSpec("static"),
            placement=spec.method.placement,
            hashing=spec.method.hashing,
        )
        return dataclasses.replace(spec, run_id=f"{workload}/{key}", method=shared)

    def cluster(self, workload: str) -> tuple[int, int]:
        """(workers, shards) of the workload's runs: its own ``workers`` or the tier's.

        A workload with its own worker count (a regime map's workers axis) keeps the tier's
        layout: one colocated shard per worker when the tier has as many shards as workers,
        else the tier's shard count (at most one per worker when colocated).
        """
        own = self.workloads[workload].workers
        if own is None or own == self.workers:
            return self.workers, self.shards
        if self.shards == self.workers:
            return own, own
        return own, min(self.shards, own) if self.colocated else self.shards

    def compute_for(self, scenario: str, workload: str | None = None) -> ComputeSpec:
        """The compute settings of a run: the tier's, with what the scenario and workload set.

        The scenario's heterogeneity replaces the tier's, and its ``codec_costs`` (the
        codec-free sensitivity runs) the tier's; the workload's ``device`` (the hardware class
        its paper trained on) replaces the tier's device profile.
        """
        sc = self.scenarios[scenario]
        changes: dict[str, Any] = {}
        if sc.heterogeneity is not None:
            changes["heterogeneity"] = sc.heterogeneity
        if sc.codec_costs is not None:
            changes["codec_costs"] = sc.codec_costs
        profile = self.workloads[workload].cost_profile if workload is not None else None
        if profile is not None:
            changes["cost_profile"] = profile
        return dataclasses.replace(self.compute, **changes) if changes else self.compute

    def grid(self) -> list[tuple[str, str, str, int]]:
        """All (workload, method, scenario, seed) tuples, in a stable order, each once.

        The main grid (``methods`` x every workload x every scenario x ``seeds``), then each
        experiment's grid in name order.
        """
        out: dict[tuple[str, str, str, int], None] = {}
        workloads = sorted(set(self.workloads) - self.derived)
        scenarios = sorted(set(self.scenarios) - self.derived)
        grids = [(self.methods, workloads, scenarios, self.seeds)]
        for name in sorted(self.experiments):
            ex = self.experiments[name]
            grids.append(
                (
                    ex.methods,
                    list(ex.workloads or workloads),
                    list(ex.scenarios or scenarios),
                    ex.seeds or self.seeds,
                )
            )
        for methods, workloads, scenarios, seeds in grids:
            for w in workloads:
                for m in methods:
                    for s in scenarios:
                        for seed in seeds:
                            out[(w, m, s, seed)] = None
        return list(out)

    def runs(self) -> list[RunSpec]:
        """The settings of every run of the grid."""
        return [self.run(*key) for key in self.grid()]
