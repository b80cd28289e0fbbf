from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from psml_core.codecs.select import topk_indices


def reference_topk(x: np.ndarray, k: int) -> np.ndarray:
    """Plain reference: stable sort by decreasing magnitude, first k, ascending indices."""
    order = np.argsort(-np.abs(x), kind="stable")
    return np.sort(order[:k])


@settings(max_examples=60)
@given(st.integers(0, 3000), st.floats(0, 1), st.integers(0, 2**32 - 1), st.booleans())
def test_matches_reference(n, frac, seed, ties):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(np.float32)
    if ties:
        x = np.round(x * 2) / 2  # many equal magnitudes
    k = int(frac * n)
    np.testing.assert_array_equal(topk_indices(x, k), reference_topk(x, k))


def test_large_vector_sampled_path_is_exact():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(2_000_000).astype(np.float32)
    x[::7] = 0.25  # heavy ties
    for k in (1, 100, 20_000, 200_000):
        np.testing.assert_array_equal(topk_indices(x, k), reference_topk(x, k))


def test_adversarial_one_huge_value_and_zeros():
    x = np.zeros(1_000_000, dtype=np.float32)
    x[123_456] = 1e30
    np.testing.assert_array_equal(topk_indices(x, 1), [123_456])
    np.testing.assert_array_equal(topk_indices(x, 3), [0, 1, 123_456])
