"""The stages before training, run in-process: hash the data, then place samples and keys.

The workflow runs them as jobs of their own, ``psml hash`` (a recipe's ``hashing`` block) and
``psml partition`` (its placement), and hands their outputs to ``psml train``;
:func:`~psml_core.engine.job.build_job` requires both. ``psml train`` without ``--partition``,
the validation harness, the benchmarks and the tests run the same stages here, through the
same functions as those commands.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from psml_core.config import RunSpec
from psml_core.data.base import Dataset
from psml_core.data.hashing import hashed_once
from psml_core.engine.job import Job, build_job, placement_problem
from psml_core.models import Model, make_model
from psml_core.placement import PLACEMENTS, Assignment, Placement, PlacementProblem

__all__ = ["Placed", "hash_stage", "place_stage", "staged_job"]


@dataclass(frozen=True)
class Placed:
    """A placement stage's result.

    Attributes:
        placement: The placement that assigned them.
        model: The model whose keys were placed.
        problem: What the placement looked at (samples, keys, their incidence, groups).
        assignment: The samples' workers and the keys' shards.
        seconds: The placement's wall-clock time (its ``assign`` call).
    """

    placement: Placement
    model: Model
    problem: PlacementProblem
    assignment: Assignment
    seconds: float


def hash_stage(spec: RunSpec, dataset: Dataset, who: str | None = None) -> Dataset:
    """The recipe's training data: hashed as its ``hashing`` block says, or passed through.

    An already hashed data set passes if the recipe hashes it alike
    (:func:`~psml_core.data.hashing.hashed_once`).
    """
    return hashed_once(dataset, spec.method.hashing, spec.seed, who or f"run {spec.run_id!r}")


def place_stage(spec: RunSpec, dataset: Dataset) -> Placed:
    """The run's placement of its samples and keys, on the hashed data (``psml partition``)."""
    model = make_model(spec.workload, dataset.n_features, dataset.n_classes)
    placement = PLACEMENTS.build(spec.method.placement)
    problem = placement_problem(model, placement, dataset, spec.seed)
    t0 = time.perf_counter()
    assignment = placement.assign(problem, spec.workers, spec.shards)
    return Placed(placement, model, problem, assignment, time.perf_counter() - t0)


def staged_job(spec: RunSpec, dataset: Dataset, assignment: Assignment | None = None) -> Job:
    """The run's job from its raw (or hashed) data: hash, place unless given, build.

    Args:
        spec: The run's settings.
        dataset: The prepared data set, raw or already hashed by this recipe.
        assignment: A placement computed beforehand (``psml partition``); placed here if None.
    """
    dataset = hash_stage(spec, dataset)
    if assignment is None:
        assignment = place_stage(spec, dataset).assignment
    return build_job(spec, dataset, assignment)
