from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

from psml_core.config import BlockSpec
from psml_core.errors import ConfigError
from psml_core.placement import PLACEMENTS, PlacementProblem, predicted_traffic


@given(st.integers(1, 500), st.integers(1, 16), st.integers(1, 16))
def test_range_is_balanced_contiguous_and_complete(n, workers, shards):
    if workers > n or shards > n:
        return
    a = PLACEMENTS.build(BlockSpec("range")).assign(PlacementProblem(n, n), workers, shards)
    for owner, parts in ((a.sample_owner, workers), (a.key_owner, shards)):
        counts = np.bincount(owner, minlength=parts)
        assert counts.max() - counts.min() <= 1
        assert np.all(np.diff(owner) >= 0)  # contiguous ranges


def test_more_parts_than_items_is_a_clear_error():
    with pytest.raises(ConfigError, match="cannot split 3 items over 4 parts"):
        PLACEMENTS.build(BlockSpec("range")).assign(PlacementProblem(3, 10), 4, 2)


def test_predicted_traffic_hand_example():
    # 4 samples, 4 keys, 2 workers colocated with 2 shards (keys 0-1 on machine 0, 2-3 on 1).
    inc = sp.csr_matrix(np.array([[1, 0, 1, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 0, 1]]))
    prob = PlacementProblem(4, 4, inc)
    a = PLACEMENTS.build(BlockSpec("range")).assign(prob, 2, 2)
    t = predicted_traffic(prob, a, 2, 2, colocated=True)
    # worker 0 touches {0,1,2}: key 2 is remote; worker 1 touches {2,3}: none remote.
    assert t["touched_per_worker"] == [3, 2]
    assert t["remote_per_worker"] == [1, 0]
    assert t["pslite_bytes_per_direction"] == 12
    assert t["dense_remote_bytes_per_iteration_per_direction"] == 4 * (2 + 2)
    dedicated = predicted_traffic(prob, a, 2, 2, colocated=False)
    assert dedicated["remote_per_worker"] == [3, 2]
