"""The codecs' torch paths on a GPU against their NumPy paths (skipped without one).

The same side-by-side runs as ``test_codecs_torch.py`` (CPU tensors, in CI), on CUDA tensors:
identical payload bytes, decoded values equal bit for bit, identical server sums, broadcasts
and state; and at ResNet-18's size (11.2M elements), where the selections take their fast
paths; and the seal, on the host or on the device, to the same bytes. On a GPU machine:
``pytest tests/unit/codecs/test_codecs_cuda.py``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from test_codecs_torch import RECIPES, _ctx
from torch_pairs import run_pair

from psml_core.codecs import CodecContext, make_codec
from psml_core.codecs.base import Payload
from psml_core.codecs.select import topk_indices as host_topk
from psml_core.codecs.torch_select import topk_indices
from psml_core.config import BlockSpec

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no GPU: torch.cuda.is_available() is False (test_codecs_torch.py covers the torch "
    "paths on CPU tensors)",
)

GPU = torch.device("cuda")


def _vectors(n: int, steps: int, workers: int, seed: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for s in range(steps):
        row = []
        for w in range(workers):
            x = rng.standard_normal(n) * rng.exponential(1.0, n)
            if (s + w) % 2:
                x = np.round(x, 1)  # many ties
            row.append(x.astype(np.float32))
        out.append(row)
    return out


@pytest.mark.parametrize("label", sorted(RECIPES))
@pytest.mark.parametrize("n", [1, 1000, 70_001])
def test_gpu_path_equals_the_host_path(label, n):
    name, params, momentum = RECIPES[label]
    run_pair(name, params, _vectors(n, 3, 2, n), _ctx(0.05), GPU, momentum)


@pytest.mark.parametrize("label", ["topk_ef", "dfs_dynamic", "topk_omnireduce", "randomk_ef"])
def test_gpu_path_at_resnet18_size(label):
    name, params, momentum = RECIPES[label]
    run_pair(name, params, _vectors(11_200_000, 2, 2, 7), _ctx(0.01), GPU, momentum)


@pytest.mark.parametrize("ratio", [0.001, 0.01, 0.1])
def test_exact_topk_on_the_gpu_keeps_the_host_indices(ratio):
    x = np.round(np.random.default_rng(1).standard_normal(11_200_000), 2).astype(np.float32)
    k = int(x.size * ratio)
    got = topk_indices(torch.from_numpy(x).to(GPU), k).cpu().numpy()
    np.testing.assert_array_equal(got, host_topk(x, k))


@pytest.mark.parametrize("device_crc", [False, True])
def test_a_gpu_payload_is_sealed_once_to_the_same_bytes(monkeypatch, device_crc):
    """Sealed on the host as its chunks land (the default) or on the device
    (``PSML_DEVICE_CRC=1``): the same bytes, in pinned host memory, over several chunks."""
    from psml_core.codecs import torch_wire as tw

    monkeypatch.setattr(tw, "DEVICE_CRC", device_crc)
    x = np.random.default_rng(2).standard_normal(3_000_000).astype(np.float32)
    for ratio in (0.01, 0.6):  # a COO body of 240 kB; a dense one of 12 MB (three chunks)
        ctx = CodecContext(step=3, ratio=ratio, seed=5)
        host = make_codec(BlockSpec("topk", {})).encode(x, ctx)
        dev = make_codec(BlockSpec("topk", {})).encode(torch.from_numpy(x).to(GPU), ctx)
        assert host.buffer == dev.buffer
        with warnings.catch_warnings():  # a read-only buffer, only asked where it lives
            warnings.simplefilter("ignore", UserWarning)
            assert torch.frombuffer(dev.buffer, dtype=torch.uint8).is_pinned()


def test_a_gpu_decode_refuses_a_damaged_body_it_copied_while_checking():
    """A body of 240 kB is copied to the GPU while the host checks its trailer: a flipped
    byte is refused all the same, and the intact payload decodes as on the host."""
    x = np.random.default_rng(3).standard_normal(3_000_000).astype(np.float32)
    ctx = CodecContext(step=3, ratio=0.01, seed=5)
    codec = make_codec(BlockSpec("topk", {}))
    p = codec.encode(x, ctx)
    np.testing.assert_array_equal(codec.decode_on(p, ctx, GPU).cpu().numpy(), codec.decode(p, ctx))
    bad = bytearray(p.buffer)
    bad[1000] ^= 1
    with pytest.raises(ValueError, match="CRC-32C"):
        codec.decode_on(Payload(p.codec, p.n, bytes(bad)), ctx, GPU)
