"""Hash placement: owner = hash(id) mod parts, as a PS-lite-style key hash (docs/methods.md, JPDC).

Source: the "hash partition" baseline of jpdc (docs/methods.md, JPDC baselines); hashing keys to
servers is what consistent-hashing parameter servers do, so that any node can compute a key's
server without a table. Algorithm: key ``k`` goes to shard
``murmurhash3_32(k, seed) mod shards`` and sample ``i`` to worker
``murmurhash3_32(i, seed') mod workers`` (sklearn's MurmurHash3, vectorised), with
``seed = problem.seed mod 2^32`` and a different ``seed'`` so that sample ``i`` and key ``i``
are not tied together.

Balance is statistical only: each part gets a binomial share (standard deviation
``sqrt(n (1/P)(1 - 1/P))`` items), so small problems can exceed a 5% slack. A part that the
hash leaves empty (tiny problems) gets one item from the largest part, the one with the
largest hash value; that is the only step that needs a table.

No parameters. Use it as a stateless baseline; for balance guarantees use ``random``.
"""

from __future__ import annotations

import numpy as np

from psml_core.data.hashing import murmurhash3_32
from psml_core.errors import ConfigError
from psml_core.placement.base import PLACEMENTS, Assignment, Placement, PlacementProblem

__all__ = ["HashPlacement", "hash_owner"]

_U32 = 1 << 32
_SAMPLE_SEED_OFFSET = 0x9E3779B9  # golden-ratio constant: decorrelates the two hash seeds


def hash_owner(n: int, parts: int, seed: int, what: str) -> np.ndarray:
    """Owner (int32) of ids ``0..n-1``: ``murmurhash3_32(id, seed) mod parts``, no part empty.

    Args:
        n: Number of ids (< 2^31).
        parts: Number of parts, 1 <= parts <= n.
        seed: Hash seed (taken mod 2^32).
        what: What is split ("samples", "keys"), for the error message.

    Raises:
        ConfigError: More parts than items.
    """
    if not 1 <= parts <= n:
        raise ConfigError(f"cannot split {n} {what} over {parts} parts; use fewer workers/shards")
    h = murmurhash3_32(np.arange(n, dtype=np.int32), seed % _U32)
    owner = (h % parts).astype(np.int32)
    counts = np.bincount(owner, minlength=parts)
    for p in np.flatnonzero(counts == 0):
        donor = int(np.argmax(counts))
        mine = np.flatnonzero(owner == donor)
        item = mine[np.argmax(h[mine])]
        owner[item] = p
        counts[donor] -= 1
        counts[p] += 1
    return owner


@PLACEMENTS.register("hash")
class HashPlacement(Placement):
    """Keys and samples by MurmurHash3 of their index, mod the number of parts."""

    def assign(self, problem: PlacementProblem, workers: int, shards: int) -> Assignment:
        """Hash samples over workers and keys over shards."""
        return Assignment(
            sample_owner=hash_owner(
                problem.n_samples, workers, problem.seed + _SAMPLE_SEED_OFFSET, "samples"
            ),
            key_owner=hash_owner(problem.n_keys, shards, problem.seed, "keys"),
        )
