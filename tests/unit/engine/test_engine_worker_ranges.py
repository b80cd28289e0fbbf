"""A worker updates a shard's contiguous keys in place, with exactly the values of a key list."""

from __future__ import annotations

import numpy as np
import pytest

from psml_core.engine.optim import OPTIMIZERS
from psml_core.engine.worker import Worker, _key_ranges


def test_key_ranges_are_slices_only_for_one_ascending_run() -> None:
    keys = [
        np.arange(3, 9),
        np.array([0, 1, 2]),
        np.array([0, 2, 3]),  # a gap
        np.array([5, 4, 3]),  # descending
        np.array([], dtype=np.int64),
    ]
    assert _key_ranges(keys) == [slice(3, 9), slice(0, 3), None, None, None]


def _worker(shard_keys: list[np.ndarray], init: np.ndarray, optimizer: str = "sgd") -> Worker:
    make = OPTIMIZERS.get(optimizer)
    opts = [make(len(k), lr=0.1, momentum=0.9) for k in shard_keys]
    y = np.zeros(4, dtype=np.int64)
    return Worker(0, None, np.zeros((4, 1)), y, 2, 0, [], shard_keys, init, opts)  # type: ignore[arg-type]


@pytest.mark.parametrize("optimizer", ["sgd", "adagrad"])
@pytest.mark.parametrize("mode", ["aggregate", "delta", "params"])
def test_a_contiguous_shard_is_updated_exactly_as_through_its_key_list(
    mode: str, optimizer: str
) -> None:
    rng = np.random.default_rng(0)
    n = 1000
    init = rng.standard_normal(n).astype(np.float32)
    contiguous = [np.arange(0, 600), np.arange(600, n)]
    scattered = [np.arange(0, n, 2), np.arange(1, n, 2)]  # the same sizes, no run
    by_range, by_list = _worker(contiguous, init, optimizer), _worker(contiguous, init, optimizer)
    by_list._ranges = [None, None]  # force the gather and scatter path
    other = _worker(scattered, init)
    assert by_range._ranges == [slice(0, 600), slice(600, n)] and other._ranges == [None, None]
    for _ in range(5):
        for s, keys in enumerate(contiguous):
            g = rng.standard_normal(keys.size).astype(np.float32)
            by_range.apply_answer(s, mode, g)
            by_list.apply_answer(s, mode, g)
    np.testing.assert_array_equal(by_range.params, by_list.params)
    assert not np.array_equal(by_range.params, init)
