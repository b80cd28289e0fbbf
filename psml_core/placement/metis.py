"""METIS on the sample-parameter bipartite graph, then Step B for the keys (docs/methods.md, JPDC).

Sources: the multilevel alternative of jpdc's data partition (Duan, Wang and Wu, TNSE 2021
use a multilevel bipartite graph partitioner); METIS (Karypis and Kumar, SIAM J. Sci. Comput.
20(1), 1998) through PyMETIS (``pymetis.part_graph``).

Algorithm:

1. Build the bipartite graph G = (samples U, keys V): one vertex per sample and per key, an
   edge (i, k) when sample i touches key k. Keys touched by fewer than two samples are left
   out: they can never be cut, so they do not change the sample partition.
2. Vertex weights: 1 for a sample, 0 for a key, so METIS's balance constraint
   (``ufactor = 1000 * eps``: parts weigh at most ``(1 + eps)`` times the average) is on
   samples per worker.
3. Edge weights: ``max(1, round(edge_weight_scale / (deg(k) - 1)))``, the usual normalisation
   of a hyperedge of size deg(k) in a graph expansion. METIS minimises the edge cut, but the
   traffic is the connectivity of each key (how many workers touch it); unweighted, a key
   that 5,000 samples touch weighs 5,000 times more than a rare one although both cost at most
   P - 1 remote copies. Measured on the 40,000-row RCV1-calibrated set, 8 workers (sum of
   remote keys per pass, keys by Step B): random 251,579; unweighted METIS 243,946;
   weighted 223,781.
4. METIS runs recursive bisection by default: with zero-weight key vertices its k-way
   scheme missed the balance badly at 16 parts (a worker with 0 samples on the 1/64-hashed
   set) while bisection kept every part within 2,499 to 2,501 samples, at a similar cut and
   2 to 4 times faster. Samples take their METIS part, then
   :func:`~psml_core.placement.parsa.rebalance_samples` enforces ``(1 - eps) n / P`` to
   ``(1 + eps) n / P`` samples per worker (rounded down, at least one).
5. Keys follow Step B (:func:`~psml_core.placement.parsa.assign_keys`), not their METIS part
   [ours]: key vertices weigh 0, so METIS does not balance them (measured: 3,550 to 8,129 keys
   per shard against 5,899 to 5,908 with Step B), and Step B places each key on one of its
   users whenever capacity allows, which is optimal for the sum of remote keys given the
   sample partition (measured on unweighted METIS's partition: max remote per worker 32,614
   with METIS's key parts, 30,631 with Step B; equal sums).

Parameters:
    eps: Balance slack (METIS's ``ufactor`` and the Step B key capacity). 0.05 as in the spec.
    edge_weight_scale: Numerator of the edge weights; 100 keeps weights integral and the total
        far from the 32-bit limit. Larger values resolve rarer keys more finely (10 to 1,000
        gave the same traffic within 0.2% in our measurements).
    seed_offset: Added to ``problem.seed`` for METIS's random seed; METIS is deterministic
        for a given seed.
    recursive: Recursive bisection (default) or k-way (False; better cuts on some graphs,
        but see step 4).

Dense problems (``incidence is None``) fall back to the even range split, with a logged note:
on a complete bipartite graph every balanced placement has the same traffic.
"""

from __future__ import annotations

import math

import numpy as np
import pymetis
import scipy.sparse as sp

from psml_core.errors import ConfigError
from psml_core.placement.base import PLACEMENTS, Assignment, Placement, PlacementProblem
from psml_core.placement.parsa import (
    assign_keys,
    binary_incidence,
    capacity,
    check_eps,
    check_parts,
    dense_fallback,
    rebalance_samples,
)

__all__ = ["MetisPlacement", "bipartite_graph", "metis_samples"]

_WEIGHT_LIMIT = 1 << 30  # total edge weight stays well inside METIS's 32-bit idx_t


def bipartite_graph(
    incidence: sp.csr_matrix, edge_weight_scale: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The weighted sample-key graph in METIS's CSR form.

    Args:
        incidence: Binary samples x keys CSR.
        edge_weight_scale: Numerator of the edge weights (see the module docstring).

    Returns:
        ``(xadj, adjncy, vweights, eweights)``: samples are vertices ``0..n-1``, the kept keys
        (degree >= 2) follow; every undirected edge is stored in both directions.
    """
    n = incidence.shape[0]
    deg = np.bincount(incidence.indices, minlength=incidence.shape[1])
    kept = np.flatnonzero(deg >= 2)
    sub = incidence[:, kept].tocsr()
    mk = kept.size
    graph = sp.bmat([[None, sub], [sub.T, None]], format="csr")
    graph.sort_indices()
    w_key = np.maximum(1, np.rint(edge_weight_scale / (deg[kept] - 1))).astype(np.int64)
    rows = np.repeat(np.arange(n + mk), np.diff(graph.indptr))
    key_end = np.where(rows >= n, rows, graph.indices) - n  # the key endpoint of each edge
    eweights = w_key[key_end]
    if int(eweights.sum()) > _WEIGHT_LIMIT:
        raise ConfigError(
            f"placement 'metis': total edge weight {int(eweights.sum())} is too large for "
            "METIS; lower params.edge_weight_scale"
        )
    vweights = np.concatenate([np.ones(n, dtype=np.int64), np.zeros(mk, dtype=np.int64)])
    return graph.indptr.astype(np.int64), graph.indices.astype(np.int64), vweights, eweights


def metis_samples(
    incidence: sp.csr_matrix,
    workers: int,
    eps: float,
    edge_weight_scale: int,
    seed: int,
    recursive: bool = True,
) -> np.ndarray:
    """Samples to workers by METIS on the weighted bipartite graph, rebalanced to the bound.

    Args:
        incidence: Binary samples x keys CSR.
        workers: Number of workers P.
        eps: Balance slack.
        edge_weight_scale: Numerator of the edge weights.
        seed: METIS's random seed.
        recursive: Recursive bisection (METIS_PartGraphRecursive) rather than k-way.

    Returns:
        The worker of each sample (int32), each worker holding ``(1 - eps) n / P`` to
        ``(1 + eps) n / P`` (rounded down, at least one).
    """
    n = incidence.shape[0]
    check_parts(n, workers, "samples")
    if workers == 1:
        return np.zeros(n, dtype=np.int32)
    xadj, adjncy, vweights, eweights = bipartite_graph(incidence, edge_weight_scale)
    opts = pymetis.Options(ufactor=max(1, round(1000 * eps)), seed=int(seed) % (1 << 31))
    result = pymetis.part_graph(
        workers,
        pymetis.CSRAdjacency(xadj, adjncy),
        vweights=vweights,
        eweights=eweights,
        options=opts,
        recursive=recursive,
    )
    owner = np.asarray(result.vertex_part[:n], dtype=np.int32)
    floor = max(1, math.floor((1.0 - eps) * n / workers))
    return rebalance_samples(incidence, owner, workers, capacity(n, workers, eps), floor)


@PLACEMENTS.register("metis")
class MetisPlacement(Placement):
    """METIS (PyMETIS) on the sample-key bipartite graph for samples, Step B for keys.

    Args:
        eps: Balance slack for samples per worker and keys per shard.
        edge_weight_scale: Numerator of the normalised edge weights.
        seed_offset: Added to the problem's seed for METIS.
        recursive: Recursive bisection (True) or k-way (False).
    """

    def __init__(
        self,
        eps: float = 0.05,
        edge_weight_scale: int = 100,
        seed_offset: int = 0,
        recursive: bool = True,
    ) -> None:
        check_eps(self.name, eps)
        if (
            isinstance(edge_weight_scale, bool)
            or not isinstance(edge_weight_scale, int)
            or edge_weight_scale < 1
        ):
            raise ConfigError(
                "placement 'metis': params.edge_weight_scale must be an integer >= 1, "
                f"got {edge_weight_scale!r}"
            )
        self.eps = float(eps)
        self.edge_weight_scale = edge_weight_scale
        self.seed_offset = int(seed_offset)
        if not isinstance(recursive, bool):
            raise ConfigError(
                f"placement 'metis': params.recursive must be true or false, got {recursive!r}"
            )
        self.recursive = recursive

    def assign(self, problem: PlacementProblem, workers: int, shards: int) -> Assignment:
        """Partition the samples with METIS, then the keys with Step B."""
        check_parts(problem.n_samples, workers, "samples")
        check_parts(problem.n_keys, shards, "keys")
        if problem.incidence is None:
            return dense_fallback(self.name, problem, workers, shards)
        inc = binary_incidence(problem.incidence)
        owner = metis_samples(
            inc,
            workers,
            self.eps,
            self.edge_weight_scale,
            problem.seed + self.seed_offset,
            self.recursive,
        )
        return Assignment(
            sample_owner=owner,
            key_owner=assign_keys(inc, owner, workers, shards, self.eps),
        )
