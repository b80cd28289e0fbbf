"""Inputs beyond float32's range are refused at encode, before the cast would make them inf."""

from __future__ import annotations

import numpy as np
import pytest

from psml_core.codecs import CODECS, make_codec
from psml_core.codecs.base import CodecContext, check_vector
from psml_core.config import BlockSpec

CTX = CodecContext(step=0, ratio=0.5, seed=0)


@pytest.mark.parametrize("name", CODECS.names())
@pytest.mark.parametrize("value", [1e39, -3.5e38])
def test_every_codec_refuses_a_value_beyond_float32(name, value):
    codec = make_codec(BlockSpec(name, {}))
    x = np.array([1.0, 2.0, value, 4.0], dtype=np.float64)
    with pytest.raises(ValueError, match=r"at index 2: beyond float32's range"):
        codec.encode(x, CTX)


def test_the_largest_float32_still_encodes():
    x = np.array([np.finfo(np.float32).max, -np.finfo(np.float32).max], dtype=np.float64)
    assert np.isfinite(check_vector(x)).all()


def test_float32_inputs_are_not_copied():
    x = np.ones(8, dtype=np.float32)
    assert check_vector(x) is x
