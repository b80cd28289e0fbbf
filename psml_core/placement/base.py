"""The Placement ABC: samples to workers and parameter keys to server shards."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from psml_core.registry import Registry

__all__ = ["PLACEMENTS", "Assignment", "Placement", "PlacementProblem"]


@dataclass(frozen=True)
class PlacementProblem:
    """What a placement may look at.

    Attributes:
        n_samples: Training samples.
        n_keys: Parameter keys (elements of the flat parameter vector).
        incidence: Samples x keys, non-zero where a sample's gradient touches a key (sparse
            linear models); None for dense models, where every sample touches every key.
        seed: Seed for randomised placements.
        groups: The true group of each sample where the data set plants them
            (``zipf_sparse`` communities), else None.
    """

    n_samples: int
    n_keys: int
    incidence: sp.csr_matrix | None = None
    seed: int = 0
    groups: np.ndarray | None = None


@dataclass(frozen=True)
class Assignment:
    """A placement's result.

    Attributes:
        sample_owner: Worker of each training sample (int32, length n_samples).
        key_owner: Shard of each parameter key (int32, length n_keys).
    """

    sample_owner: np.ndarray
    key_owner: np.ndarray

    def samples_of(self, worker: int) -> np.ndarray:
        """Indices of the samples held by ``worker``, ascending."""
        return np.flatnonzero(self.sample_owner == worker)

    def keys_of(self, shard: int) -> np.ndarray:
        """Indices of the keys held by ``shard``, ascending."""
        return np.flatnonzero(self.key_owner == shard)


class Placement(ABC):
    """Assigns samples to workers and keys to shards.

    Attributes:
        moves_keys: Whether keys move between shards during the run (the dynamic partition):
            the placement then has a ``tracker`` the backend drives, and only backends that
            can migrate keys run it.
        needs_incidence: See below.
    """

    name: ClassVar[str]
    moves_keys: ClassVar[bool] = False
    needs_incidence: ClassVar[bool] = True
    """Whether :meth:`assign` reads ``problem.incidence``; where it does not, a model whose
    incidence is large (:class:`~psml_core.models.sparse_mlp.SparseMLP`) is spared building it."""

    @abstractmethod
    def assign(self, problem: PlacementProblem, workers: int, shards: int) -> Assignment:
        """Compute the assignment; every worker and every shard must get at least one item."""


PLACEMENTS: Registry[type[Placement]] = Registry("placement")
