"""Seeded uniform random placement: the "random partition" baseline of jpdc (docs/methods.md, JPDC).

Source: the baseline that Duan, Wang and Wu (TNSE 2021) and Parsa (Li, Andersen and Smola,
2015) compare against. Algorithm: one random permutation of the samples cut into ``workers``
near-equal pieces, then one random permutation of the keys cut into ``shards`` pieces
(``np.array_split``: sizes differ by at most one, so it is perfectly balanced). Both draws come
from ``np.random.default_rng(problem.seed)``, samples first.

No parameters. Use it as the reference a partitioner must beat: on Zipf data it touches almost
every popular key from every worker, so with colocated shards a fraction (P - 1) / P of each
worker's keys is remote.
"""

from __future__ import annotations

import numpy as np

from psml_core.errors import ConfigError
from psml_core.placement.base import PLACEMENTS, Assignment, Placement, PlacementProblem

__all__ = ["RandomPlacement", "random_split"]


def random_split(rng: np.random.Generator, n: int, parts: int, what: str) -> np.ndarray:
    """Owner (int32) of each of ``n`` items after a random, balanced split into ``parts``.

    Args:
        rng: The generator (one ``permutation`` draw).
        n: Number of items.
        parts: Number of parts, 1 <= parts <= n.
        what: What is split ("samples", "keys"), for the error message.

    Raises:
        ConfigError: More parts than items (a part would be empty).
    """
    if not 1 <= parts <= n:
        raise ConfigError(f"cannot split {n} {what} over {parts} parts; use fewer workers/shards")
    owner = np.empty(n, dtype=np.int32)
    for p, items in enumerate(np.array_split(rng.permutation(n), parts)):
        owner[items] = p
    return owner


@PLACEMENTS.register("random")
class RandomPlacement(Placement):
    """Samples and keys dealt out uniformly at random, balanced (seeded by ``problem.seed``)."""

    def assign(self, problem: PlacementProblem, workers: int, shards: int) -> Assignment:
        """Random balanced split of the samples over workers, then of the keys over shards."""
        rng = np.random.default_rng(problem.seed)
        sample_owner = random_split(rng, problem.n_samples, workers, "samples")
        key_owner = random_split(rng, problem.n_keys, shards, "keys")
        return Assignment(sample_owner=sample_owner, key_owner=key_owner)
