"""The codecs' torch paths against their NumPy paths, on CPU tensors (so CI covers them).

A codec given a torch tensor runs its torch path on the tensor's device; these tests force it
on CPU tensors and check, step by step over several workers and the server (``torch_pairs``):
identical payload bytes (the kept indices, ties included: top-k's ties go to the lower index on
both paths), decoded values equal bit for bit (0 ulp, stricter than the 1 ulp allowed), the same
server sums, broadcasts and published state, and the same residuals. The vectors are drawn to
make ties, zeros, signed zeros, subnormals and magnitudes near float32's range likely.
``test_codecs_cuda.py`` runs the same pairs on a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch_pairs import run_pair

from psml_core.codecs import CodecContext

CPU = torch.device("cpu")

RECIPES: dict[str, tuple[str, dict, float]] = {
    # label: (codec, params, momentum of a momentum-correction wrapper)
    "topk": ("topk", {}, 0.0),
    "topk_ef": ("topk", {"error_feedback": True}, 0.0),
    "topk_mc": ("topk", {"ratio": 0.01, "momentum_correction": True}, 0.9),
    "randomk_ef": ("randomk", {"error_feedback": True}, 0.0),
    "threshold": ("threshold", {"threshold": 0.7}, 0.0),
    "dgc_ef": ("dgc", {"error_feedback": True}, 0.0),
    "omnireduce": ("omnireduce", {"block_size": 8}, 0.0),
    "topk_omnireduce": (
        "omnireduce",
        {"block_size": 16, "topk": True, "ratio": 0.05, "momentum_correction": True},
        0.9,
    ),
    "dfs_fixed": (
        "dfs",
        {"ratio": 0.05, "lam": 1.0, "block_size": 4, "dynamic": False, "error_feedback": True},
        0.0,
    ),
    "dfs_dynamic": (
        "dfs",
        {"lam": 0.0, "block_size": 4, "candidates": [2, 4, 8], "momentum_correction": True},
        0.9,
    ),
    "dfs_energy_down": (
        "dfs",
        {"lam": 1.0, "block_size": 8, "candidates": [4, 8], "energy": 0.5, "down_ratio": 0.2},
        0.0,
    ),
    "value_bounded": ("value_bounded", {"schedule": "decay", "theta0": 0.8, "warmup": 1}, 0.0),
    "value_bounded_f32": (
        "value_bounded",
        {"schedule": "fixed", "theta0": 0.5, "warmup": 0, "residual_dtype": "float32"},
        0.0,
    ),
    "qsgd": ("qsgd", {}, 0.0),
    "qsgd_4bit": ("qsgd", {"levels": 7, "error_feedback": True}, 0.0),
    "qsgd_16bit": ("qsgd", {"levels": 32767}, 0.0),
    "fp16": ("fp16", {"error_feedback": True}, 0.0),
    "none": ("none", {}, 0.0),
    # No torch path: a tensor is encoded on a host copy, to the same bytes.
    "signsgd": ("signsgd", {}, 0.0),
    "kv": ("kv", {}, 0.0),
    "value_bounded_key": ("value_bounded", {"mode": "key", "theta0": 0.5, "key_size": 5}, 0.0),
}

_TIES = st.sampled_from([0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0])
_WIDE = st.one_of(
    st.floats(-1e3, 1e3, width=32),
    st.sampled_from([1e-40, -1e-40, 3e38, -3e38, 1e-30, 6e4, 7e4]),  # subnormal, near the range
)


def _vectors(draw: st.DrawFn, n: int, steps: int, workers: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(draw(st.integers(0, 2**31), label="seed"))
    kind = draw(st.sampled_from(["normal", "ties", "wide", "sparse"]), label="kind")
    out = []
    for _ in range(steps):
        row = []
        for _ in range(workers):
            if kind == "normal":
                x = rng.standard_normal(n) * rng.exponential(1.0, n)
            elif kind == "ties":
                x = rng.choice([0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0], n)
            elif kind == "sparse":
                x = rng.standard_normal(n) * (rng.random(n) < 0.05)
            else:
                x = np.array(draw(st.lists(_WIDE, min_size=n, max_size=n)), dtype=np.float64)
            row.append(x.astype(np.float32))
        out.append(row)
    return out


def _ctx(ratio: float):
    return lambda step: CodecContext(step=step, ratio=ratio, seed=17 + step, lr=0.1 / (1 + step))


@pytest.mark.parametrize("label", sorted(RECIPES))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_torch_path_equals_the_host_path(label, data):
    name, params, momentum = RECIPES[label]
    n = data.draw(st.integers(0, 400) if name != "dfs" else st.integers(1, 400), label="n")
    if label == "qsgd_16bit" or name == "fp16":
        n = min(n, 200)
    vectors = _vectors(data.draw, n, steps=3, workers=2)
    ratio = data.draw(st.sampled_from([0.01, 0.1, 0.5, 1.0]), label="ratio")
    server = label not in {"kv"}  # kv: no torch server path to compare beyond the default
    run_pair(name, params, vectors, _ctx(ratio), CPU, momentum, server=server)


@pytest.mark.parametrize("label", ["topk_ef", "dfs_dynamic", "topk_omnireduce", "value_bounded"])
def test_larger_vectors_over_several_steps(label):
    """Past the top-k sample threshold (4 x 65,536 elements), where the fast selection runs."""
    name, params, momentum = RECIPES[label]
    rng = np.random.default_rng(5)
    n = 300_000
    vectors = [
        [
            (rng.standard_normal(n) * rng.exponential(1.0, n)).astype(np.float32),
            np.round(rng.standard_normal(n), 1).astype(np.float32),  # many ties
        ]
        for _ in range(3)
    ]
    run_pair(name, params, vectors, _ctx(0.01), CPU, momentum)


def test_the_torch_path_is_the_one_that_ran(monkeypatch):
    """A tensor selects the torch path (not the host path on a copy)."""
    from psml_core.codecs import make_codec, sparsify_torch
    from psml_core.config import BlockSpec

    calls = []
    real = sparsify_torch.encode_topk
    monkeypatch.setattr(sparsify_torch, "encode_topk", lambda *a: calls.append(1) or real(*a))
    codec = make_codec(BlockSpec("topk", {"ratio": 0.1}))
    codec.encode(torch.ones(50), CodecContext())
    codec.encode(np.ones(50, np.float32), CodecContext())
    assert calls == [1]


def test_bad_tensors_are_refused_like_bad_arrays():
    from psml_core.codecs import make_codec
    from psml_core.config import BlockSpec

    codec = make_codec(BlockSpec("topk", {"ratio": 0.5}))
    with pytest.raises(ValueError, match="non-finite value .* at index 1"):
        codec.encode(torch.tensor([1.0, float("nan")]), CodecContext())
    with pytest.raises(ValueError, match="beyond float32's range"):
        codec.encode(torch.tensor([1.0, 1e39], dtype=torch.float64), CodecContext())
    with pytest.raises(ValueError, match="1-D"):
        codec.encode(torch.ones(2, 2), CodecContext())
    with pytest.raises(TypeError, match="floating"):
        codec.encode(torch.ones(3, dtype=torch.int32), CodecContext())
