"""Planted communities for the Zipf-sparse generator: locality of the data as a parameter.

Text corpora are not one bag of words: a document about a topic uses that topic's vocabulary.
That is the structure a data placement (JPDC, Parsa) exploits: samples of one topic on one
worker touch fewer distinct keys. ``zipf_sparse`` without communities draws every row from one
global law, so no group of samples has a vocabulary of its own; with them:

* the rows fall into ``K`` groups (uniformly at random [ours]; RCV1's topics are skewed), and
  the features into ``K`` disjoint vocabularies of near-equal size (a seeded permutation of the
  feature ids cut into ``K`` consecutive parts) [ours];
* each vocabulary has its own Zipf law (same exponent as the global law) over its own ranks, in
  the permutation's order, so each group's most frequent words are its own [ours];
* a fraction ``locality`` (lambda) of a row's draws come from its group's vocabulary, the rest
  from the global (class-conditional) law of the generator, so lambda = 0 is the data without
  communities and lambda -> 1 is data whose groups share almost nothing.

Calibration: RCV1-v2 has 103 topic categories (Lewis et al., JMLR 5, 2004), so ``K`` defaults to
103 where a calibration names it. Everything here draws from a stream of its own
(``default_rng([seed, COMMUNITY_STREAM])``), so that with lambda = 0 the generator's own stream,
hence X and y, are exactly those of the data without communities; the groups are then labels
with no effect on the features (the baseline of the oracle bound).

Tuning: the oracle bound (:mod:`psml_core.placement.oracle`) rises with lambda; lambda in
{0, 0.3, 0.6, 0.9} spans "nothing to co-locate" to "almost block-diagonal".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from psml_core.errors import ConfigError

__all__ = ["COMMUNITY_STREAM", "Communities", "mixture_rates", "plant", "solve_rate"]

# At most this many draws per distinct non-zero (as the generator's own solver allows).
_MAX_INFLATION = 64.0

COMMUNITY_STREAM = 0xC0
"""Second element of the community stream's seed: ``default_rng([seed, COMMUNITY_STREAM])``."""


@dataclass(frozen=True)
class Communities:
    """Planted groups of rows and their vocabularies.

    Attributes:
        k: Number of groups K.
        locality: Fraction lambda of a row's draws taken from its group's vocabulary.
        group: Group of every row (int32, length rows).
        vocab: The vocabularies' feature ids, concatenated (group 0's first).
        bounds: ``vocab[bounds[g]:bounds[g + 1]]`` is group g's vocabulary, by its own rank.
        cdf: Cumulative probabilities within each vocabulary, shifted by the group index
            (``g + cdf_g``), so one ``searchsorted`` draws for rows of any groups.
        rng: The community stream (membership draws and in-vocabulary draws).
    """

    k: int
    locality: float
    group: np.ndarray
    vocab: np.ndarray
    bounds: np.ndarray
    cdf: np.ndarray
    rng: np.random.Generator

    def law(self, g: int, features: int) -> np.ndarray:
        """Group ``g``'s vocabulary law over all feature ids (zero outside its vocabulary)."""
        lo, hi = int(self.bounds[g]), int(self.bounds[g + 1])
        out = np.zeros(features)
        out[self.vocab[lo:hi]] = np.diff(np.concatenate([[float(g)], self.cdf[lo:hi]]))
        return out

    def from_group(self, n: int) -> np.ndarray:
        """Which of ``n`` draws come from the rows' vocabularies (Bernoulli(lambda) each)."""
        return self.rng.random(n) < self.locality

    def draw(self, groups: np.ndarray) -> np.ndarray:
        """One feature id from the vocabulary of each entry of ``groups``."""
        u = self.rng.random(groups.size)
        pos = np.searchsorted(self.cdf, groups + u, side="right")
        hi = self.bounds[groups + 1] - 1  # float rounding at a group's end stays in the group
        return self.vocab[np.minimum(pos, hi)]


def plant(
    rows: int, features: int, k: int, locality: float, exponent: float, seed: int
) -> Communities:
    """Draw the groups and vocabularies from the community stream of ``seed``.

    Args:
        rows: Rows of the data set (train and test together).
        features: Feature count d (at least ``k``).
        k: Number of groups K >= 1.
        locality: lambda in [0, 1].
        exponent: Zipf exponent of each vocabulary's law.
        seed: The data set's seed.
    """
    rng = np.random.default_rng([seed, COMMUNITY_STREAM])
    group = rng.integers(0, k, size=rows).astype(np.int32)
    vocab = rng.permutation(features).astype(np.int64)
    bounds = np.array([round(i * features / k) for i in range(k + 1)], dtype=np.int64)
    cdf = np.empty(features)
    for g in range(k):
        lo, hi = int(bounds[g]), int(bounds[g + 1])
        w = np.arange(1, hi - lo + 1, dtype=np.float64) ** -exponent
        c = np.cumsum(w / w.sum())
        c[-1] = 1.0
        cdf[lo:hi] = g + c
    return Communities(k, float(locality), group, vocab, bounds, cdf, rng)


def solve_rate(p: np.ndarray, target: float) -> float:
    """The Poisson rate ``lam`` with ``d - sum (1 - p) exp(-lam p) == target`` (Newton).

    The expected distinct count is increasing and concave in ``lam``, so Newton's iterates from
    ``lam = 0`` increase monotonically to the root without overshooting; a handful of steps
    reach float precision, where :func:`~psml_core.data.zipf_sparse.solve_draw_rate`'s
    bisection would take a hundred (this runs once per class and group).
    """
    if target <= 1.0:
        return 0.0
    q = 1.0 - p
    lam = 0.0
    for _ in range(200):
        e = np.exp(-lam * p)
        f = p.size - float(np.sum(q * e)) - target
        step = -f / float(np.sum(p * q * e))
        lam += step
        if step <= 1e-12 * max(lam, 1.0):
            break
    return lam


def mixture_rates(
    class_laws: list[np.ndarray], share: list[float], com: Communities, target: float
) -> tuple[np.ndarray, np.ndarray]:
    """Draw rate per (class, group) and the idf of every feature, under the mixed laws.

    Row i of class c and group g draws from ``(1 - lambda) class_laws[c] + lambda vocab_g``.

    Args:
        class_laws: Each class's law over feature ids.
        share: Each class's share of the rows.
        com: The communities (lambda > 0).
        target: The calibrated distinct non-zeros per row.

    Returns:
        ``(rates, idf)``: ``rates[c, g]`` gives the target for class c in group g;
        ``idf = 1 + ln(1 / q)`` from the document frequency ``q`` averaged over the rows.

    Raises:
        ConfigError: The target is out of reach for some mixture.
    """
    d, lam = class_laws[0].size, com.locality
    rates = np.empty((len(class_laws), com.k))
    q = np.zeros(d)
    for c, law in enumerate(class_laws):
        for g in range(com.k):
            p = (1.0 - lam) * law + lam * com.law(g, d)
            rate = solve_rate(p, target)
            if rate > _MAX_INFLATION * target:
                raise ConfigError(
                    f"nnz_per_row={target:g} is out of reach for vocabularies of {d // com.k} "
                    f"features at locality {lam:g}; lower nnz_per_row, communities or locality"
                )
            rates[c, g] = rate
            q += share[c] / com.k * (1.0 - (1.0 - p) * np.exp(-rate * p))
    return rates, 1.0 + np.log(1.0 / q)
