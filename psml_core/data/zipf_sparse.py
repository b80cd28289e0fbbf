"""Sparse binary classification data whose feature popularity follows a Zipf law.

The generator is calibrated to published statistics of a real text corpus so that the placement
methods (jpdc's data/parameter partition in particular) see realistic sparsity: a few features
that nearly every row touches, a long tail touched by a handful of rows, and ~76 non-zeros per
row out of ~47k features.

Calibration ``rcv1_v2`` (RCV1-v2, the "CCAT vs rest" binary task):

=================  ==========  =====================================================================
field              value       where it comes from
=================  ==========  =====================================================================
rows (reference)   804,414     Lewis et al., JMLR 5 (2004); scikit-learn ``fetch_rcv1`` docs
features           47,236      Lewis et al. (2004); scikit-learn ``fetch_rcv1`` docs
nnz_per_row        75.58       "0.16% of non zero values" (``fetch_rcv1`` docs) x 47,236 features
positive_rate      0.474       CCAT, the largest topic: 381,327 / 804,414 documents (Lewis et al.)
zipf_exponent      1.0         [ours] not published for RCV1; Zipf's law for word frequencies
=================  ==========  =====================================================================

Generative model (all [ours]):

* Row ``i`` draws ``K_i = 1 + Poisson(lam)`` feature ranks, with replacement, from a truncated
  Zipf(s) law over ranks 1..d (inverse CDF via ``np.searchsorted``). Duplicate draws in a row
  merge into one non-zero whose term frequency ``tf`` is the number of draws. ``lam`` is solved
  so that the *expected number of distinct features* per row equals the target ``nnz_per_row``
  (closed form: ``E[distinct] = d - sum_r (1 - p_r) exp(-lam p_r)``), which corrects the
  shrinkage that de-duplication would otherwise cause.
* Rank ``r`` maps to feature id ``perm[r - 1]`` for a seeded permutation, so popular features
  are not all at low indices.
* Values follow RCV1's "ltc" weighting: ``(1 + ln tf) * idf * LogNormal(0, 0.25)`` with
  ``idf = 1 + ln(1 / q_r)`` from the expected document frequency ``q_r`` of rank ``r``; each row
  is then L2-normalised (cosine normalisation).
* Labels are class-conditional, as topics are in text: exactly ``round(positive_rate * rows)``
  rows are drawn positive first;
  each class owns half of a band of mid-frequency "topic words" (ranks ``topic_band`` x d, split
  by a seeded shuffle), and a fraction ``topic_mix`` of a row's draws comes from its class's
  topic words (Zipf-weighted within the band) instead of the global law. ``lam`` is solved per
  class so both classes hit the calibrated non-zeros per row. A fraction ``label_flip`` of the
  labels is then flipped (half from each class, so the positive rate stays exact): the task is
  learnable but not separable. (A planted linear model
  on the most popular features was tried first: those features sit in nearly every row, and SGD
  oscillated along that common direction for hundreds of steps; topic words are present or
  absent, which is what makes text classes learnable.)
* Optional planted communities (``communities``, ``locality``; :mod:`.communities`): K groups of
  rows, each with a Zipf vocabulary of its own, from which a fraction lambda of a row's draws
  come. With lambda = 0 the data are exactly those without communities (the groups come from a
  stream of their own); the groups are stored with the data (``groups_train``,
  ``groups_test``) so that a placement, and the oracle bound, can use them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from psml_core.config import DatasetSpec
from psml_core.data.base import DATASETS, Dataset, DatasetSource
from psml_core.data.communities import Communities, mixture_rates, plant
from psml_core.data.prepare import holdout_dataset
from psml_core.errors import ConfigError

__all__ = [
    "CALIBRATIONS",
    "Calibration",
    "ZipfParams",
    "ZipfSparseSource",
    "expected_distinct",
    "generate",
    "generate_with_groups",
    "resolve_params",
    "solve_draw_rate",
]

# Draws per generation chunk: bounds peak memory (~16 B per draw) for 800k-row sets. A constant,
# so the random stream (hence the data) does not depend on the machine.
_CHUNK_DRAWS = 4_000_000
# At most this many draws per kept non-zero; beyond it the target is unreachable in practice.
_MAX_INFLATION = 64.0
_VALUE_SIGMA = 0.25


@dataclass(frozen=True)
class Calibration:
    """Published statistics a synthetic sparse set is calibrated to.

    Attributes:
        features: Number of features d.
        nnz_per_row: Mean number of non-zeros per row.
        positive_rate: Fraction of positive labels in the binary task.
        zipf_exponent: Exponent s of the feature-popularity law ``p_r ~ r^-s``.
        source: Where each figure comes from; ``[ours]`` marks figures that are assumptions.
        topics: Number of topic categories, the default number of planted communities.
    """

    features: int
    nnz_per_row: float
    positive_rate: float
    zipf_exponent: float
    source: str
    topics: int | None = None


DEFAULT_CALIBRATION = "rcv1_v2"
"""The calibration of a zipf_sparse data set that names none."""

CALIBRATIONS: dict[str, Calibration] = {
    "rcv1_v2": Calibration(
        features=47_236,
        nnz_per_row=0.0016 * 47_236,  # 0.16% density x d = 75.58
        positive_rate=381_327 / 804_414,  # CCAT vs rest = 0.474
        zipf_exponent=1.0,
        source=(
            "RCV1-v2 (804,414 documents, 47,236 cosine-normalised log TF-IDF features, "
            "0.16% non-zero values => 75.6 non-zeros per row; largest topic CCAT has 381,327 "
            "documents => positive rate 0.474 for CCAT vs rest): D. D. Lewis, Y. Yang, "
            "T. G. Rose, F. Li, 'RCV1: A New Benchmark Collection for Text Categorization "
            "Research', JMLR 5:361-397, 2004; scikit-learn fetch_rcv1 documentation. "
            "Zipf exponent s = 1.0 is [ours]: not published for RCV1, taken from Zipf's law "
            "for word frequencies. 103 topic categories (Lewis et al. 2004), the default number "
            "of planted communities."
        ),
        topics=103,
    ),
}


@dataclass(frozen=True)
class ZipfParams:
    """Resolved generator parameters (calibration overridden by the spec).

    Attributes:
        rows: Rows generated in total (train + test).
        features: Number of features d.
        nnz_per_row: Target mean number of distinct non-zeros per row.
        zipf_exponent: Exponent s of the rank law.
        positive_rate: Target fraction of positive labels.
        topic_mix: Fraction of a row's draws taken from its class's topic words.
        topic_band: Rank band (fractions of d) of the topic words, split between the classes.
        label_flip: Fraction of labels flipped after generation.
        communities: Number K of planted groups of rows (0: none).
        locality: Fraction lambda of a row's draws from its group's vocabulary.
    """

    rows: int
    features: int
    nnz_per_row: float
    zipf_exponent: float
    positive_rate: float
    topic_mix: float = 0.1
    topic_band: tuple[float, float] = (0.002, 0.05)
    label_flip: float = 0.05
    communities: int = 0
    locality: float = 0.0


def _rank_probabilities(d: int, s: float) -> np.ndarray:
    """Truncated Zipf law over ranks 1..d, normalised."""
    w = np.arange(1, d + 1, dtype=np.float64) ** -s
    return w / w.sum()


def expected_distinct(p: np.ndarray, lam: float) -> float:
    """Expected distinct features in a row of ``1 + Poisson(lam)`` draws from ``p``.

    Args:
        p: Probabilities of the ranks (sum 1).
        lam: Poisson rate of the extra draws.

    Returns:
        ``d - sum_r (1 - p_r) exp(-lam p_r)``, by the Poisson generating function.
    """
    return float(p.size - np.sum((1.0 - p) * np.exp(-lam * p)))


def solve_draw_rate(p: np.ndarray, target: float) -> float:
    """Find ``lam`` such that ``expected_distinct(p, lam) == target``.

    Args:
        p: Probabilities of the ranks (sum 1).
        target: Wanted mean distinct non-zeros per row, in ``[1, d)``.

    Returns:
        The Poisson rate ``lam >= 0``.

    Raises:
        ConfigError: If the target needs more than 64 draws per kept non-zero.
    """
    if target <= 1.0:
        return 0.0
    hi = target
    while expected_distinct(p, hi) < target:
        hi *= 2.0
        if hi > _MAX_INFLATION * target:
            raise ConfigError(
                f"nnz_per_row={target:g} is too close to features={p.size} for this Zipf "
                "exponent (rows would need too many draws); lower nnz_per_row or zipf_exponent"
            )
    lo = 0.0
    for _ in range(100):  # bisection: f is increasing; 100 halvings reach float precision
        mid = 0.5 * (lo + hi)
        if expected_distinct(p, mid) < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _chunks(draws: np.ndarray) -> list[tuple[int, int]]:
    """Split rows into consecutive ranges of at most ~_CHUNK_DRAWS draws (at least one row)."""
    bounds = [0]
    csum = np.cumsum(draws)
    while bounds[-1] < draws.size:
        start = bounds[-1]
        base = csum[start - 1] if start else 0
        end = int(np.searchsorted(csum, base + _CHUNK_DRAWS, side="right"))
        bounds.append(max(end, start + 1))
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def _draw_chunk(
    rng: np.random.Generator,
    k: np.ndarray,
    y: np.ndarray,
    cdfs: list[np.ndarray],
    perm: np.ndarray,
    idf: np.ndarray,
    groups: np.ndarray | None = None,
    com: Communities | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw the rows of one chunk.

    With communities (``com`` and the chunk's ``groups``), a Bernoulli(lambda) per draw from
    the community stream sends it to the row's vocabulary instead of its class's law; the
    generator's own stream is drawn exactly as without them.

    Returns:
        Per non-zero, in row-major order with sorted feature ids: the chunk-local row, the
        feature id and the row-L2-normalised value (float32).
    """
    d = cdfs[0].size
    row = np.repeat(np.arange(k.size, dtype=np.int64), k)
    u = rng.random(row.size)
    ranks = np.empty(row.size, dtype=np.int64)
    for c, cdf in enumerate(cdfs):
        mine = y[row] == c
        ranks[mine] = np.searchsorted(cdf, u[mine], side="right")
    feat = perm[np.minimum(ranks, d - 1)]
    if com is not None and groups is not None:
        local = com.from_group(row.size)
        feat[local] = com.draw(groups[row[local]])
    keys, tf = np.unique(row * d + feat, return_counts=True)  # sorted: row-major, then feature
    row, feat = np.divmod(keys, d)
    noise = rng.lognormal(0.0, _VALUE_SIGMA, size=keys.size)
    val = (1.0 + np.log(tf)) * idf[feat] * noise
    val /= np.sqrt(np.bincount(row, weights=val * val, minlength=k.size))[row]
    return row, feat, val.astype(np.float32)


def _class_laws(rng: np.random.Generator, params: ZipfParams, p: np.ndarray) -> list[np.ndarray]:
    """Per class, the rank law: the global Zipf law mixed with the class's topic words."""
    d = params.features
    lo, hi = (max(1, math.ceil(f * d)) for f in params.topic_band)
    band = np.arange(lo - 1, max(hi - 1, lo + 1))  # 0-based ranks of the topic words
    owner = rng.permutation(band.size) % 2  # half of the band to each class
    laws = []
    for c in (0, 1):
        topic = np.zeros(d)
        topic[band[owner == c]] = p[band[owner == c]]
        laws.append((1.0 - params.topic_mix) * p + params.topic_mix * topic / topic.sum())
    return laws


def _features(
    rng: np.random.Generator,
    params: ZipfParams,
    laws: list[np.ndarray],
    y: np.ndarray,
    perm: np.ndarray,
    com: Communities | None = None,
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Generate the L2-normalised CSR matrix; row i draws from ``laws[y[i]]``.

    With communities of lambda > 0, row i draws from ``(1 - lambda) laws[y[i]] + lambda
    vocab[group[i]]``; draw rates and document frequencies follow that mixture.

    Returns:
        The matrix and the number of draws of each row.
    """
    n, d = params.rows, params.features
    share = [1.0 - params.positive_rate, params.positive_rate]
    mixed = com is not None and com.locality > 0.0
    if mixed:
        assert com is not None
        by_feature = [np.empty(d) for _ in laws]
        for f, law in zip(by_feature, laws, strict=True):
            f[perm] = law
        rates, idf = mixture_rates(by_feature, share, com, params.nnz_per_row)
        draws = 1 + rng.poisson(rates[y, com.group])
    else:
        lams = [solve_draw_rate(law, params.nnz_per_row) for law in laws]
        # P(row contains rank r), averaged over the classes, gives the document frequency.
        q = sum(
            w * (1.0 - (1.0 - law) * np.exp(-lam * law))
            for w, law, lam in zip(share, laws, lams, strict=True)
        )
        idf = np.empty(d)
        idf[perm] = 1.0 + np.log(1.0 / q)
        draws = 1 + rng.poisson(np.where(y == 1, lams[1], lams[0]))
    cdfs = [np.cumsum(law) for law in laws]
    for cdf in cdfs:
        cdf[-1] = 1.0
    id_type = np.int32 if d < np.iinfo(np.int32).max else np.int64
    indices, values, counts = [], [], []
    for start, end in _chunks(draws):
        groups = com.group[start:end] if mixed and com is not None else None
        row, feat, val = _draw_chunk(
            rng, draws[start:end], y[start:end], cdfs, perm, idf, groups, com if mixed else None
        )
        indices.append(feat.astype(id_type))
        values.append(val)
        counts.append(np.bincount(row, minlength=end - start))
    indptr = np.concatenate([[0], np.cumsum(np.concatenate(counts))])
    X = sp.csr_matrix((np.concatenate(values), np.concatenate(indices), indptr), shape=(n, d))
    return X, draws


def _flip_labels(rng: np.random.Generator, y: np.ndarray, fraction: float) -> np.ndarray:
    """Flip ``fraction`` of the labels, half from each class, so the positive rate is unchanged."""
    m = round(fraction * y.size / 2)
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    m = min(m, pos.size, neg.size)
    out = y.copy()
    out[rng.choice(pos, m, replace=False)] = 0
    out[rng.choice(neg, m, replace=False)] = 1
    return out


def generate(params: ZipfParams, seed: int) -> tuple[sp.csr_matrix, np.ndarray, dict[str, Any]]:
    """Generate a Zipf-sparse binary classification set, deterministically from ``seed``.

    Args:
        params: Resolved generator parameters.
        seed: Seed of ``np.random.default_rng``.

    Returns:
        ``(X, y, stats)``: float32 CSR rows (sorted indices, no duplicates), int64 labels in
        {0, 1}, and the realised statistics (mean nnz per row, positive rate, draw rate).
    """
    X, y, _groups, stats = generate_with_groups(params, seed)
    return X, y, stats


def generate_with_groups(
    params: ZipfParams, seed: int
) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray | None, dict[str, Any]]:
    """:func:`generate`, and the planted group of every row (None without communities)."""
    p = _rank_probabilities(params.features, params.zipf_exponent)
    rng = np.random.default_rng(seed)
    # Order of draws is part of the format: permutation, topics, classes, counts, features, flips.
    perm = rng.permutation(params.features)
    laws = _class_laws(rng, params, p)
    n = params.rows
    y = np.zeros(n, dtype=np.int64)
    y[rng.permutation(n)[: round(params.positive_rate * n)]] = 1
    com = None
    if params.communities:  # a stream of its own: lambda = 0 leaves X and y as they were
        com = plant(
            n, params.features, params.communities, params.locality, params.zipf_exponent, seed
        )
    X, draws = _features(rng, params, laws, y, perm, com)
    y = _flip_labels(rng, y, params.label_flip)
    stats: dict[str, Any] = {
        "realised_nnz_per_row": float(X.nnz / params.rows),
        "realised_positive_rate": float(y.mean()),
    }
    if com is None or com.locality == 0.0:
        stats["draws_per_row"] = float(
            np.mean([1.0 + solve_draw_rate(law, params.nnz_per_row) for law in laws])
        )
    else:  # the realised mean: the rate differs by class and group
        stats["draws_per_row"] = float(draws.mean())
    return X, y, (None if com is None else com.group.astype(np.int64)), stats


def resolve_params(spec: DatasetSpec) -> ZipfParams:
    """Merge a dataset spec's overrides into its calibration and check the result.

    Args:
        spec: The dataset's config entry.

    Returns:
        The generator parameters.

    Raises:
        ConfigError: Unknown calibration, missing ``rows`` or inconsistent values.
    """
    where = f"datasets.{spec.name}"
    calibration = spec.calibration or DEFAULT_CALIBRATION
    if calibration not in CALIBRATIONS:
        raise ConfigError(
            f"{where}.calibration: unknown calibration {calibration!r}; "
            f"known: {', '.join(sorted(CALIBRATIONS))}"
        )
    if spec.rows is None or spec.rows < 2:
        raise ConfigError(f"{where}.rows: zipf_sparse needs rows >= 2, got {spec.rows!r}")
    cal = CALIBRATIONS[calibration]

    def pick(value: Any, default: Any) -> Any:
        return default if value is None else value

    params = ZipfParams(
        rows=int(spec.rows),
        features=int(pick(spec.features, cal.features)),
        nnz_per_row=float(pick(spec.nnz_per_row, cal.nnz_per_row)),
        zipf_exponent=float(pick(spec.zipf_exponent, cal.zipf_exponent)),
        positive_rate=float(pick(spec.positive_rate, cal.positive_rate)),
        **_community_params(spec, cal, where),
    )
    if not 1.0 <= params.nnz_per_row < params.features:
        raise ConfigError(
            f"{where}.nnz_per_row: must be in [1, features={params.features}), "
            f"got {params.nnz_per_row:g}"
        )
    if not 0.0 < params.positive_rate < 1.0 or not math.isfinite(params.zipf_exponent):
        raise ConfigError(f"{where}: positive_rate must be in (0, 1) and zipf_exponent finite")
    return params


def _community_params(spec: DatasetSpec, cal: Calibration, where: str) -> dict[str, Any]:
    """``communities`` and ``locality`` (K defaults to the calibration's topics)."""
    if spec.communities is None and spec.locality is None:
        return {}
    k = spec.communities if spec.communities is not None else cal.topics
    lam = float(spec.locality or 0.0)
    features = spec.features or cal.features
    if not k or not 1 <= k <= features:
        raise ConfigError(
            f"{where}.communities: must be an integer in [1, features={features}], got {k!r}"
        )
    if not 0.0 <= lam < 1.0:
        raise ConfigError(f"{where}.locality: must be in [0, 1), got {lam:g}")
    return {"communities": int(k), "locality": lam}


@DATASETS.register("zipf_sparse")
class ZipfSparseSource(DatasetSource):
    """Synthetic Zipf-sparse binary classification, calibrated to published statistics."""

    def load(self) -> Dataset:
        """Generate the set and split it by a seeded permutation."""
        spec = self.spec
        params = resolve_params(spec)
        X, y, groups, stats = generate_with_groups(params, spec.seed)
        meta = {
            "source": self.name,
            "calibration": spec.calibration or DEFAULT_CALIBRATION,
            "calibration_figures": asdict(CALIBRATIONS[spec.calibration or DEFAULT_CALIBRATION]),
            "params": asdict(params),
            "seed": spec.seed,
            "test_fraction": spec.test_fraction,
            **stats,
        }
        return holdout_dataset(spec, X, y, 2, meta, groups)
