from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.utils import murmurhash3_32

from psml_core.config import BlockSpec
from psml_core.errors import ConfigError
from psml_core.placement import PLACEMENTS, PlacementProblem
from psml_core.placement.hash import hash_owner


def _check_valid(a, n, m, workers, shards):
    assert a.sample_owner.shape == (n,) and a.key_owner.shape == (m,)
    assert a.sample_owner.dtype == np.int32 and a.key_owner.dtype == np.int32
    assert np.array_equal(np.unique(a.sample_owner), np.arange(workers))  # all used, in range
    assert np.array_equal(np.unique(a.key_owner), np.arange(shards))


def test_registered():
    assert {"random", "hash", "parsa", "metis", "dynamic", "range"} <= set(PLACEMENTS.names())
    with pytest.raises(ConfigError, match=r"unknown placement 'nope'.*known placements: .*hash"):
        PLACEMENTS.build(BlockSpec("nope"))


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 300),
    m=st.integers(1, 300),
    workers=st.integers(1, 16),
    shards=st.integers(1, 16),
    seed=st.integers(0, 2**32),
)
def test_random_is_valid_exactly_balanced_and_seeded(n, m, workers, shards, seed):
    if workers > n or shards > m:
        return
    place = PLACEMENTS.build(BlockSpec("random"))
    a = place.assign(PlacementProblem(n, m, seed=seed), workers, shards)
    _check_valid(a, n, m, workers, shards)
    for owner, parts in ((a.sample_owner, workers), (a.key_owner, shards)):
        counts = np.bincount(owner, minlength=parts)
        assert counts.max() - counts.min() <= 1
    b = place.assign(PlacementProblem(n, m, seed=seed), workers, shards)
    assert np.array_equal(a.sample_owner, b.sample_owner)
    assert np.array_equal(a.key_owner, b.key_owner)


def test_random_seeds_differ():
    place = PLACEMENTS.build(BlockSpec("random"))
    a = place.assign(PlacementProblem(1000, 1000, seed=1), 8, 8)
    b = place.assign(PlacementProblem(1000, 1000, seed=2), 8, 8)
    assert np.mean(a.sample_owner != b.sample_owner) > 0.5
    assert np.mean(a.key_owner != b.key_owner) > 0.5


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 300),
    m=st.integers(1, 300),
    workers=st.integers(1, 16),
    shards=st.integers(1, 16),
    seed=st.integers(0, 2**32),
)
def test_hash_is_valid_and_deterministic(n, m, workers, shards, seed):
    if workers > n or shards > m:
        return
    place = PLACEMENTS.build(BlockSpec("hash"))
    a = place.assign(PlacementProblem(n, m, seed=seed), workers, shards)
    _check_valid(a, n, m, workers, shards)
    b = place.assign(PlacementProblem(n, m, seed=seed), workers, shards)
    assert np.array_equal(a.sample_owner, b.sample_owner)
    assert np.array_equal(a.key_owner, b.key_owner)


def test_hash_is_murmurhash_mod_parts_and_statistically_balanced():
    n, parts = 100_000, 8
    owner = hash_owner(n, parts, seed=3, what="keys")
    expect = murmurhash3_32(np.arange(n, dtype=np.int32), seed=3, positive=True) % parts
    assert np.array_equal(owner, expect)
    counts = np.bincount(owner, minlength=parts)
    sd = np.sqrt(n * (1 / parts) * (1 - 1 / parts))
    assert np.all(np.abs(counts - n / parts) < 5 * sd)  # binomial shares, not exact balance


def test_hash_samples_and_keys_use_different_seeds():
    a = PLACEMENTS.build(BlockSpec("hash")).assign(PlacementProblem(5000, 5000, seed=0), 4, 4)
    assert np.mean(a.sample_owner != a.key_owner) > 0.5


def test_hash_fills_empty_parts_on_tiny_problems():
    # With 3 items over 3 parts a plain hash leaves some part empty for most seeds.
    for seed in range(20):
        owner = hash_owner(3, 3, seed, "keys")
        assert sorted(owner.tolist()) == [0, 1, 2]


@pytest.mark.parametrize("name", ["random", "hash"])
def test_more_parts_than_items_is_a_clear_error(name):
    with pytest.raises(ConfigError, match="cannot split 3 samples over 4 parts"):
        PLACEMENTS.build(BlockSpec(name)).assign(PlacementProblem(3, 10), 4, 2)
