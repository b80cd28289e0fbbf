"""What every method recipe must satisfy: the conformance base class and shared run helpers.

A test module subclasses :class:`MethodConformance`, names its recipes (``recipes``), the paper
whose recipes it must cover (``paper``) and a workload (``digits_mlp`` dense, ``rcv1_logreg``
sparse); it inherits one test per check and recipe:

* **sim**: the recipe runs from its name (``load_methods()[name]``) with the smoke experiment's
  settings (P = 4 workers, S = 2 colocated shards, a few iterations); P records per iteration;
  bytes per direction are the sum of the per-shard bytes and the remote bytes the sum over the
  shards on other machines; ``time = compute + comm + wait`` per worker and iteration (times are
  cumulative: increments are checked); sane value ranges; lossless columns only with Snappy;
* **determinism**: the same spec twice gives equal records and bit-identical final parameters;
* **invariants** of the recipe's sync policy and controller (BSP staleness 0, SSP <= s, DSSP
  <= s_low + r_max, ASP never waits, PCP 1 <= local steps <= s_max, one ratio per step);
* **dist** (``dist_recipes`` only: one representative per paper, processes are costly): the
  same run on :class:`~psml_core.engine.DistBackend` completes with the same record count, the
  wall-clock label, counted bytes equal to the bytes handed to gloo minus protocol bytes, and,
  for deterministic recipes (BSP, static controller), the parameters and bytes of sim.

Runs are cached per process (:func:`simulate`), so the differential and convergence modules
share them; cached jobs and records must not be mutated.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from psml_core.config import BlockSpec, Experiment, HeterogeneitySpec, MethodRecipe, RunSpec
from psml_core.control import CONTROLLERS
from psml_core.data.store import load_prepared
from psml_core.engine import DistBackend, Job, SimBackend, staged_job
from psml_core.engine.torchdist import DistOptions
from psml_core.metrics.records import IterationRecord
from psml_core.placement import Assignment
from psml_core.recipes import load_methods

SCENARIO = "dc_10g"


@cache
def recipes() -> dict[str, MethodRecipe]:
    """``config/methods.yaml``, loaded once per process."""
    return load_methods()


def with_params(recipe: MethodRecipe, block: str, **params: Any) -> MethodRecipe:
    """``recipe`` with ``params`` merged into the parameters of its ``block`` (e.g. "codec")."""
    spec: BlockSpec = getattr(recipe, block)
    return dataclasses.replace(
        recipe, **{block: dataclasses.replace(spec, params={**spec.params, **params})}
    )


def run_spec(
    smoke: Experiment,
    method: str | MethodRecipe,
    workload: str,
    iterations: int,
    *,
    scenario: str = SCENARIO,
    multipliers: Sequence[float] | None = None,
    momentum: float | None = None,
    backend: str = "sim",
) -> RunSpec:
    """One run with the smoke experiment's settings (P, S, seed, data) and ``method``.

    Args:
        smoke: The smoke experiment.
        method: A recipe name of ``config/methods.yaml``, or a (modified) recipe.
        workload: A smoke workload.
        iterations: Iterations (rounds under PCP).
        scenario: A smoke network scenario.
        multipliers: Fixed per-worker compute-time multipliers (heterogeneous workers).
        momentum: Overrides the workload's momentum.
        backend: Our design's backend field.
    """
    recipe = recipes()[method] if isinstance(method, str) else method
    base = smoke.run(workload, "dense_bsp", scenario, smoke.seeds[0])
    wl = dataclasses.replace(base.workload, iterations=iterations)
    if momentum is not None:
        wl = dataclasses.replace(wl, momentum=momentum)
    compute = base.compute
    if multipliers is not None:
        compute = dataclasses.replace(
            compute, heterogeneity=HeterogeneitySpec(multipliers=tuple(multipliers))
        )
    return dataclasses.replace(
        base,
        run_id=smoke.run_id(workload, recipe.name, scenario, smoke.seeds[0]),
        backend=backend,
        workload=wl,
        method=recipe,
        compute=compute,
    )


@dataclass(frozen=True)
class SimRun:
    """A finished sim run: its job (final state) and its records, sorted by (iteration, worker)."""

    job: Job
    records: list[IterationRecord]


def run_sim(
    spec: RunSpec, prepared: dict[str, Path], assignment: Assignment | None = None
) -> SimRun:
    """Build and simulate ``spec`` (uncached)."""
    job = staged_job(spec, load_prepared(prepared[spec.dataset.name]), assignment)
    recs = SimBackend().run(job)
    return SimRun(job, sorted(recs, key=lambda r: (r.iteration, r.worker)))


_RUNS: dict[tuple[str, str], SimRun] = {}


def simulate(spec: RunSpec, prepared: dict[str, Path]) -> SimRun:
    """:func:`run_sim`, cached per process by our design's settings and the data directory."""
    key = (spec.config_hash(), str(prepared[spec.dataset.name]))
    if key not in _RUNS:
        _RUNS[key] = run_sim(spec, prepared)
    return _RUNS[key]


def by_worker(records: Sequence[IterationRecord], p: int) -> list[IterationRecord]:
    """Worker ``p``'s records in iteration order."""
    return sorted((r for r in records if r.worker == p), key=lambda r: r.iteration)


def final_eval(records: Sequence[IterationRecord]) -> tuple[float, float]:
    """Test loss and accuracy of the global model after the last iteration."""
    last = max(r.iteration for r in records)
    evaluated = [r for r in records if r.iteration == last and not math.isnan(r.test_loss)]
    assert evaluated, "the last iteration was not evaluated"
    return evaluated[0].test_loss, evaluated[0].test_accuracy


def traffic(records: Sequence[IterationRecord]) -> dict[str, int]:
    """Total bytes of the run: up, down, both, and the remote (network-crossing) parts."""
    up = sum(r.bytes_up for r in records)
    down = sum(r.bytes_down for r in records)
    rup = sum(r.remote_bytes_up for r in records)
    rdown = sum(r.remote_bytes_down for r in records)
    return {"up": up, "down": down, "total": up + down, "remote": rup + rdown}


# --------------------------------------------------------------------------- the checks


def check_record_grid(spec: RunSpec, records: Sequence[IterationRecord], clock: str) -> None:
    """One record per worker and iteration (round), all labelled with ``clock``.

    A round policy ends at the step budget (P x iterations local steps), after fewer rounds.
    """
    p, t = spec.workers, spec.workload.iterations
    if any(r.local_steps != 1 for r in records) or spec.method.sync.name == "pcp":
        t = max(r.iteration for r in records) + 1
        steps = sum(r.local_steps for r in records)
        assert p * spec.workload.iterations <= steps < p * (spec.workload.iterations + 1)
    assert len(records) == p * t
    assert sorted((r.iteration, r.worker) for r in records) == [
        (i, w) for i in range(t) for w in range(p)
    ]
    assert {r.clock for r in records} == {clock}


def check_bytes_by_shard(job: Job, records: Sequence[IterationRecord]) -> None:
    """Per direction: total = sum over shards; remote = sum over shards on another machine."""
    shards = job.spec.shards
    machine = [int(m) for m in job.shard_machine]
    for r in records:
        assert len(r.shard_bytes_up) == len(r.shard_bytes_down) == shards, r
        assert r.bytes_up == sum(r.shard_bytes_up), r
        assert r.bytes_down == sum(r.shard_bytes_down), r
        far = [s for s in range(shards) if machine[s] != r.worker]
        assert r.remote_bytes_up == sum(r.shard_bytes_up[s] for s in far), r
        assert r.remote_bytes_down == sum(r.shard_bytes_down[s] for s in far), r


def check_time_split(records: Sequence[IterationRecord], workers: int) -> None:
    """Per worker and iteration: compute + codec + comm + wait = the increment of the time.

    An iteration's exposed communication may be 0 (its transfers hidden behind a wait at its
    colocated shard or behind backward and encoding), but not a whole run's.
    """
    assert sum(r.comm_s for r in records) > 0
    for p in range(workers):
        prev = 0.0
        for r in by_worker(records, p):
            assert r.compute_s > 0 and r.comm_s >= 0 and r.wait_s >= 0 and r.codec_s >= 0, r
            assert r.compute_s + r.codec_s + r.comm_s + r.wait_s == pytest.approx(
                r.time_s - prev, rel=1e-9, abs=1e-12
            ), r
            assert r.time_s > prev, r
            prev = r.time_s


def check_value_ranges(recipe: MethodRecipe, records: Sequence[IterationRecord]) -> None:
    """Bytes, ratio, local steps, losses and the lossless columns are in their ranges.

    Pushes are never empty. Pulls carry bytes from the first iteration on, except under
    ``pull: aggregate`` and ``pull: delta``, whose first pull has nothing to send (every replica
    starts from the same seeded values): at most a sealed empty payload's 4-byte checksum per
    shard there, more after.

    Snappy sizes are > 0 where the raw size is; a raw size of 0 is 0 (no payload) or up to one
    byte per shard: Snappy's length preamble of an empty payload (``snappy.compress(b"")`` is 1
    byte), which the engine counts when an empty payload exists (delta pulls).
    """
    shards = len(records[0].shard_bytes_up)
    for r in records:
        assert r.bytes_up > 0, r
        nothing_yet = recipe.pull in ("aggregate", "delta") and r.iteration == 0
        # nothing yet: no payload, or a sealed empty one (its 4-byte checksum) per shard
        assert (r.bytes_down <= 4 * shards) if nothing_yet else (r.bytes_down > 0), r
        assert 0.0 < r.ratio <= 1.0, r
        assert isinstance(r.local_steps, int) and r.local_steps >= 1, r
        assert isinstance(r.staleness, int) and r.staleness >= 0, r
        assert math.isfinite(r.loss) and r.loss >= 0, r
        if recipe.lossless == "snappy":
            pairs = ((r.bytes_up, r.lossless_bytes_up), (r.bytes_down, r.lossless_bytes_down))
            for raw, packed in pairs:
                assert isinstance(packed, int), r
                assert packed > 0 if raw > 0 else 0 <= packed <= shards, r
        else:
            assert r.lossless_bytes_up is None and r.lossless_bytes_down is None, r
    loss, acc = final_eval(records)
    assert math.isfinite(loss) and 0.0 <= acc <= 1.0


def check_sync_invariants(
    recipe: MethodRecipe, records: Sequence[IterationRecord], heterogeneous: bool
) -> None:
    """The invariant the recipe's sync policy promises.

    With heterogeneous workers a non-BSP policy must also use its freedom (staleness or local
    steps above BSP's), so that the bound is not met trivially.
    """
    sync, params = recipe.sync.name, recipe.sync.params
    stale = max(r.staleness for r in records)
    steps = [r.local_steps for r in records]
    if sync == "bsp":
        assert stale == 0 and set(steps) == {1}
    elif sync == "ssp":
        assert stale <= params["staleness"]
        assert set(steps) == {1}
        if heterogeneous:
            assert stale >= 1
    elif sync == "dssp":
        assert stale <= params["s_low"] + params["r_max"]
        if heterogeneous:
            assert stale >= 1
    elif sync == "asp":
        assert all(r.wait_s == 0 for r in records)
        assert set(steps) == {1}
    elif sync == "pcp":
        assert min(steps) >= 1 and max(steps) <= params.get("s_max", 8)
        if heterogeneous:
            assert max(steps) > 1
    else:
        pytest.fail(f"no conformance invariant for sync policy {sync!r}: add one here")


def check_controller(recipe: MethodRecipe, job: Job, records: Sequence[IterationRecord]) -> None:
    """One ratio per step for every worker, as the recipe's controller sets it."""
    per_step: dict[int, set[float]] = {}
    for r in records:
        per_step.setdefault(r.iteration, set()).add(r.ratio)
    assert all(len(v) == 1 for v in per_step.values()), per_step
    ratio = {t: next(iter(v)) for t, v in per_step.items()}
    ctl = recipe.controller
    if ctl.name == "static":
        assert set(ratio.values()) == {float(ctl.params.get("ratio", 1.0))}
    elif ctl.name == "dc2":
        ref = CONTROLLERS.build(ctl)  # the defaults the recipe leaves unset
        assert all(ref.r_min <= r <= ref.r_max for r in ratio.values())  # type: ignore[attr-defined]
        warm = [r for t, r in ratio.items() if t < ref.warmup]  # type: ignore[attr-defined]
        assert set(warm) <= {ref.r0}  # type: ignore[attr-defined]
        # The records show the ratios the run's controller fixed, step by step.
        fixed = {step: r for step, r, *_ in job.controller.history}  # type: ignore[attr-defined]
        assert fixed == ratio
    else:
        pytest.fail(f"no conformance check for controller {ctl.name!r}: add one here")


def deterministic(recipe: MethodRecipe) -> bool:
    """Whether a dist run must reproduce sim exactly: BSP, no adaptive control, no rounds."""
    return recipe.sync.name == "bsp" and recipe.controller.name == "static"


# --------------------------------------------------------------------------- the base class


class RunCache:
    """The class's sim runs: one per recipe, from its name."""

    def __init__(
        self, smoke: Experiment, prepared: dict[str, Path], owner: type[MethodConformance]
    ) -> None:
        self.smoke, self.prepared, self.owner = smoke, prepared, owner

    def spec(self, name: str, backend: str = "sim") -> RunSpec:
        """The recipe's run with the class's workload, iterations and workers."""
        o = self.owner
        return run_spec(
            self.smoke,
            name,
            o.workload,
            o.iterations,
            multipliers=o.multipliers,
            backend=backend,
        )

    def sim(self, name: str) -> SimRun:
        """The recipe's sim run (cached)."""
        return simulate(self.spec(name), self.prepared)

    def fresh(self, name: str) -> SimRun:
        """The recipe's sim run, built and run again."""
        return run_sim(self.spec(name), self.prepared)


class MethodConformance:
    """Conformance checks for the recipes a subclass names (see the module docstring).

    Attributes:
        paper: The paper whose recipes ``recipes`` must list in full (None: the recipes with no
            paper, the shared baselines).
        recipes: The recipes to check.
        dist_recipes: The recipes also run on the dist backend (entries may be ``pytest.param``).
        workload: ``digits_mlp`` (dense MLP) or ``rcv1_logreg`` (sparse logistic regression).
        iterations: Iterations per run (rounds under PCP).
        multipliers: Per-worker compute-time multipliers; None = homogeneous workers.
    """

    paper: ClassVar[str | None] = None
    role: ClassVar[str | None] = None  # with paper None: baselines vs combinations of methods
    recipes: ClassVar[tuple[str, ...]] = ()
    dist_recipes: ClassVar[tuple[Any, ...]] = ()
    workload: ClassVar[str] = "digits_mlp"
    iterations: ClassVar[int] = 8
    multipliers: ClassVar[tuple[float, ...] | None] = None

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Parametrize ``recipe`` over :attr:`recipes`, ``dist_recipe`` over dist_recipes."""
        if "recipe" in metafunc.fixturenames:
            metafunc.parametrize("recipe", self.recipes)
        if "dist_recipe" in metafunc.fixturenames:
            metafunc.parametrize("dist_recipe", self.dist_recipes)

    @pytest.fixture(scope="class")
    @classmethod
    def runs(cls, smoke: Experiment, prepared: dict[str, Path]) -> RunCache:
        return RunCache(smoke, prepared, cls)

    def test_recipes_cover_the_paper(self) -> None:
        """Every recipe of the paper is listed, so a new recipe cannot go unchecked.

        A paper's recipes may be split over classes of one module (one per workload).
        """
        mine = {
            n for n, r in recipes().items() if r.paper == self.paper and self.role in (None, r.role)
        }
        module = sys.modules[type(self).__module__]
        listed = {
            name
            for cls in vars(module).values()
            if isinstance(cls, type)
            and issubclass(cls, MethodConformance)
            and (cls.paper, cls.role) == (self.paper, self.role)
            for name in cls.recipes
        }
        assert listed == mine

    def test_sim_records_per_worker_and_iteration(self, recipe: str, runs: RunCache) -> None:
        """P records per iteration, every (iteration, worker) once, on the simulated clock."""
        run = runs.sim(recipe)
        assert run.job.spec.method == recipes()[recipe]  # really the recipe from its name
        check_record_grid(run.job.spec, run.records, "simulated")

    def test_sim_bytes_are_the_sum_over_shards(self, recipe: str, runs: RunCache) -> None:
        run = runs.sim(recipe)
        check_bytes_by_shard(run.job, run.records)

    def test_sim_time_is_compute_plus_comm_plus_wait(self, recipe: str, runs: RunCache) -> None:
        run = runs.sim(recipe)
        check_time_split(run.records, run.job.spec.workers)

    def test_sim_values_in_range(self, recipe: str, runs: RunCache) -> None:
        check_value_ranges(recipes()[recipe], runs.sim(recipe).records)

    def test_same_spec_same_run(self, recipe: str, runs: RunCache) -> None:
        """Determinism: equal records and bit-identical final parameters."""
        a, b = runs.sim(recipe), runs.fresh(recipe)
        assert a.records == b.records
        assert a.job.global_params().tobytes() == b.job.global_params().tobytes()

    def test_sync_policy_invariants(self, recipe: str, runs: RunCache) -> None:
        check_sync_invariants(
            recipes()[recipe], runs.sim(recipe).records, self.multipliers is not None
        )

    def test_controller_ratio_shared_per_step(self, recipe: str, runs: RunCache) -> None:
        run = runs.sim(recipe)
        check_controller(recipes()[recipe], run.job, run.records)

    def test_dist_backend(
        self, dist_recipe: str, runs: RunCache, prepared: dict[str, Path]
    ) -> None:
        """The recipe on real processes: complete, labelled, bytes = wire bytes - protocol.

        Deterministic recipes (BSP, static controller) must also give sim's parameters, bit for
        bit, and sim's per-record bytes and losses (same seed, same float operations).
        """
        spec = runs.spec(dist_recipe, backend="dist")
        job = staged_job(spec, load_prepared(prepared[spec.dataset.name]))
        backend = DistBackend(DistOptions())
        recs = backend.run(job)
        assert backend.clock == "wall-clock"
        check_record_grid(spec, recs, "wall-clock")
        check_time_split(recs, spec.workers)
        check_bytes_by_shard(job, recs)
        assert backend.result is not None
        wire = backend.result.wire
        for p in range(spec.workers):
            w = wire[spec.shards + p]
            assert sum(r.bytes_up for r in by_worker(recs, p)) == w.bytes_sent() - w.protocol_sent()
        down = sum(wire[s].bytes_sent() - wire[s].protocol_sent() for s in range(spec.shards))
        assert sum(r.bytes_down for r in recs) == down
        recipe = recipes()[dist_recipe]
        if deterministic(recipe):
            sim = runs.sim(dist_recipe)
            np.testing.assert_array_equal(job.global_params(), sim.job.global_params())

            def key(r: IterationRecord) -> tuple[Any, ...]:
                return (r.iteration, r.worker, r.loss, r.shard_bytes_up, r.shard_bytes_down,
                        r.remote_bytes_up, r.remote_bytes_down, r.staleness, r.ratio,
                        r.local_steps, r.lossless_bytes_up, r.lossless_bytes_down)  # fmt: skip

            assert [key(r) for r in recs] == [key(r) for r in sim.records]
            assert final_eval(recs) == final_eval(sim.records)
