"""Payload memory off a device (psml_core.codecs.host_buffers) and the one-copy seal.

A payload copied off a device lands in reused host memory: never reused while a payload still
holds it, reused once none does, read-only, and pickled as plain bytes. The seal copies and
checks in chunks (on a GPU the check of one chunk overlaps the copy of the next): the same
trailer as the host's whatever the chunk size.
"""

from __future__ import annotations

import gc
import pickle

import numpy as np
import pytest
import torch

from psml_core.codecs import CodecContext, make_codec
from psml_core.codecs import host_buffers as hb
from psml_core.codecs import torch_wire as tw
from psml_core.codecs.integrity import crc32c
from psml_core.codecs.integrity import seal as host_seal
from psml_core.config import BlockSpec

CPU = torch.device("cpu")


def test_pooled_memory_is_reused_only_once_nothing_holds_it():
    pool = hb.HostPool(keep=2)
    a = pool.take(3 << 20)
    a[:] = 1
    b = pool.take(3 << 20)  # a is alive: other memory
    assert not np.shares_memory(a, b)
    base = a.base
    del a
    gc.collect()
    c = pool.take((3 << 20) - 5)  # the same 3 MiB size class: a's memory again
    assert c.base is base and c.size == (3 << 20) - 5


def test_a_payload_keeps_its_bytes_while_later_payloads_reuse_memory():
    """Dense payloads of 1.2 MB come from the pool: each stays what it was encoded from."""
    codec = make_codec(BlockSpec("none", {}))
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(300_000).astype(np.float32) for _ in range(4)]
    kept = []
    for x in xs:
        kept.append(codec.encode(torch.from_numpy(x), CodecContext()))
        codec.encode(torch.from_numpy(-x), CodecContext())  # dropped at once: memory reused
    for x, p in zip(xs, kept, strict=True):
        assert p.buffer == x.tobytes()
        assert isinstance(p.buffer, memoryview) and p.buffer.readonly


def test_a_payload_pickles_as_its_bytes():
    x = torch.from_numpy(np.random.default_rng(1).standard_normal(300_000).astype(np.float32))
    p = make_codec(BlockSpec("topk", {})).encode(x, CodecContext(ratio=0.5))
    back = pickle.loads(pickle.dumps(p))
    assert type(back.buffer) is bytes and back == p and back.wire_bytes == p.wire_bytes


@pytest.mark.parametrize("device_crc", [False, True])
@pytest.mark.parametrize("chunk", [1, 3, 8, 1 << 20])
def test_the_chunked_seal_equals_the_hosts(monkeypatch, chunk, device_crc):
    """Any chunk size, with or without a host-made head (DFS's cost report), either CRC."""
    monkeypatch.setattr(tw, "_PIPE_CHUNK", chunk)
    monkeypatch.setattr(tw, "DEVICE_CRC", device_crc)
    rng = np.random.default_rng(chunk)
    for size in (0, 1, 3, 4, 9, 40):
        body = rng.integers(0, 256, size, dtype=np.uint8)
        for step, down, bind, head in ((7, False, (), b""), (None, True, (3,), b"head!")):
            got = tw.seal(torch.from_numpy(body), step, down, bind, n=size + 1, head=head)
            want = host_seal(head + body.tobytes(), step, n=size + 1, down=down, bind=bind)
            assert got == want


def test_a_dense_broadcast_writes_negative_zero_as_the_host_does():
    """The dense format's shortcut (the vector's own bytes) writes -0.0 as 0.0, like the host's
    scatter of the non-zeros into zeros."""
    x = np.random.default_rng(2).standard_normal(1000).astype(np.float32)
    x[::100] = -0.0  # few enough zeros for the dense format
    server = make_codec(BlockSpec("topk", {})).server()
    ctx = CodecContext(step=4)
    dev = server.encode_down(torch.from_numpy(x), ctx)
    assert dev.buffer == server.encode_down(x, ctx).buffer
    assert not np.signbit(np.frombuffer(dev.buffer[:-4], np.float32)[::100]).any()


def test_fp16_saturates_at_the_edges_of_its_range_like_the_host():
    edges = [65504.0, 65519.99, 65520.0, 1e6, 3e38, 6e-8, 1e-40, 0.0, -0.0, 2.0**-24]
    x = np.array(edges + [-e for e in edges], dtype=np.float32)
    codec = make_codec(BlockSpec("fp16", {}))
    host = codec.encode(x, CodecContext())
    dev = codec.encode(torch.from_numpy(x), CodecContext())
    assert dev.buffer == host.buffer
    got = codec.decode_on(dev, CodecContext(), CPU).numpy()
    np.testing.assert_array_equal(got, codec.decode(host, CodecContext()))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_one_reduction_refuses_every_non_finite_value(dtype):
    for bad in (float("nan"), float("inf"), float("-inf")):
        x = torch.zeros(50, dtype=dtype)
        x[17] = bad
        with pytest.raises(ValueError, match="at index 17"):
            tw.check_tensor(x)
    assert tw.check_tensor(torch.ones(3, dtype=dtype)).dtype == torch.float32


class _Event:
    """Stands in for ``torch.cuda.Event`` on the CPU (a CPU copy has landed when it returns)."""

    def record(self, stream: object = None) -> None:
        pass

    def synchronize(self) -> None:
        pass


def test_the_gpus_pipelined_seal_equals_the_hosts(monkeypatch):
    """The branch a GPU takes (copies queued, then each chunk checked as it lands), run on CPU
    tensors: the same CRC as the host's over the whole body, whatever the chunking."""
    monkeypatch.setattr(torch.cuda, "Event", _Event)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: None)
    monkeypatch.setattr(tw, "_PIPE_CHUNK", 5)
    body = np.random.default_rng(4).integers(0, 256, 23, dtype=np.uint8)
    out = np.zeros(23 + 4, dtype=np.uint8)
    crc = tw._copy_and_crc(out, torch.from_numpy(body), 11, pinned=True)
    assert out[:23].tobytes() == body.tobytes()
    assert crc == crc32c(body.tobytes(), 11)
