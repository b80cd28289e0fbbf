"""No codec decodes a damaged payload silently: mutation tests over every registered codec.

Variable-length formats are sealed with a CRC-32 trailer (``psml_core.codecs.integrity``):
truncation, extension, a flipped byte and an empty buffer are all refused. Fixed-length formats
(``none``, ``fp16``, ``qsgd``, the sign codecs, random-k) stay header-free: both ends know their
length, so truncation, extension and an empty buffer are refused by length; a flipped byte is a
different message the encoder could have sent (every bit pattern of the right length is one,
non-finite values aside, which the decoders refuse), so for them the test checks only that a
flipped payload never decodes to something that is not a finite vector of length n.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from psml_core.codecs import CODECS, make_codec
from psml_core.codecs.base import CodecContext, Payload
from psml_core.codecs.integrity import CHECKSUM_BYTES, seal, unseal
from psml_core.config import BlockSpec

N = 1000
CTX = CodecContext(step=3, ratio=0.05, seed=7)

PARAMS = {
    "threshold": {"threshold": 1.0},
    "omnireduce": {"block_size": 16},
    "value_bounded": {"schedule": "fixed", "theta0": 1.0, "warmup": 0},
    "topk_matched": {"schedule": "fixed", "theta0": 1.0, "warmup": 0},
    "dfs": {"block_size": 16},
}
"""Parameters that make each codec send something from a standard-normal vector."""

HEADER_FREE = {"none", "fp16", "qsgd", "signsgd", "efsignsgd", "randomk"}
"""Fixed-length formats: the length is known to both ends, every bit pattern is a message."""


def test_every_codec_is_classified():
    sealed = set(CODECS.names()) - HEADER_FREE
    assert sealed == {
        "dfs", "dgc", "kv", "omnireduce", "threshold", "topk", "topk_matched", "value_bounded",
    }  # fmt: skip


def _payload(name: str, seed: int) -> tuple[object, Payload]:
    codec = make_codec(BlockSpec(name, PARAMS.get(name, {})))
    x = np.random.default_rng(seed).standard_normal(N).astype(np.float32)
    return codec, codec.encode(x, CTX)


def _decodes_cleanly(codec: object, payload: Payload) -> bool:
    """Whether the payload decodes (to a finite length-N vector), or False if refused."""
    try:
        out = codec.decode(payload, CTX)  # type: ignore[attr-defined]
    except ValueError:
        return False
    assert out.shape == (payload.n,) and np.isfinite(out).all()
    return True


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_truncation_extension_and_empty_buffers_are_refused(data):
    name = data.draw(st.sampled_from(CODECS.names()), label="codec")
    codec, p = _payload(name, data.draw(st.integers(0, 2**16), label="seed"))
    buf = p.buffer
    kind = data.draw(st.sampled_from(["cut", "extend", "empty"]), label="mutation")
    if kind == "cut":
        bad = buf[: -data.draw(st.integers(1, len(buf)), label="cut")]
    elif kind == "extend":
        bad = buf + data.draw(st.binary(min_size=1, max_size=32), label="tail")
    else:
        bad = b""
    with pytest.raises(ValueError):
        codec.decode(Payload(p.codec, p.n, bad), CTX)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_flipped_byte_is_refused_by_every_sealed_codec(data):
    name = data.draw(st.sampled_from(CODECS.names()), label="codec")
    codec, p = _payload(name, data.draw(st.integers(0, 2**16), label="seed"))
    at = data.draw(st.integers(0, len(p.buffer) - 1), label="byte")
    mask = data.draw(st.integers(1, 255), label="xor")
    bad = bytearray(p.buffer)
    bad[at] ^= mask
    damaged = Payload(p.codec, p.n, bytes(bad))
    if name in HEADER_FREE:
        _decodes_cleanly(codec, damaged)  # refused, or another valid message of length n
    else:
        with pytest.raises(ValueError, match="CRC-32"):
            codec.decode(damaged, CTX)


@pytest.mark.parametrize("name", sorted(CODECS.names()))
def test_every_prefix_of_a_payload_that_starts_with_zero_bytes_is_refused(name):
    """A payload whose first entry is at index 0 starts with four zero bytes: cut to any
    length (4 bytes included, which an unseeded CRC-32 took for a sealed empty body), it is
    refused."""
    codec = make_codec(BlockSpec(name, PARAMS.get(name, {})))
    x = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    x[1:20] = 0.0
    x[0] = 3.0  # the largest entry, so every sparse codec sends index 0 first
    p = codec.encode(x, CTX)
    for size in range(len(p.buffer)):
        with pytest.raises(ValueError):
            codec.decode(Payload(p.codec, p.n, p.buffer[:size]), CTX)


def test_an_empty_body_does_not_seal_to_zero():
    assert seal(b"") != b"\0" * CHECKSUM_BYTES
    with pytest.raises(ValueError, match="CRC-32"):
        unseal(b"\0" * CHECKSUM_BYTES, "kv", 10)


@pytest.mark.parametrize("name", sorted(set(CODECS.names()) - HEADER_FREE))
def test_sealed_payloads_count_their_trailer(name):
    codec, p = _payload(name, 0)
    body = unseal(p.buffer, name, N, CTX.step)
    assert p.wire_bytes == len(p.buffer) == len(body) + CHECKSUM_BYTES
    np.testing.assert_array_equal(
        codec.decode(p, CTX), codec.decode(Payload(p.codec, p.n, seal(body, CTX.step)), CTX)
    )


@pytest.mark.parametrize("name", ["topk", "value_bounded"])
def test_broadcasts_are_sealed_too(name):
    codec = make_codec(BlockSpec(name, PARAMS.get(name, {})))
    server = codec.server()
    x = np.random.default_rng(1).standard_normal(N).astype(np.float32)
    down = server.encode_down(x, CTX)
    np.testing.assert_array_equal(
        server.decode_down(down, CTX), server.decode_down(Payload(down.codec, N, down.buffer), CTX)
    )
    for bad in (down.buffer[:-1], down.buffer + b"\0", b""):
        with pytest.raises(ValueError):
            server.decode_down(Payload(down.codec, N, bad), CTX)


def test_the_error_names_the_codec_and_the_sizes():
    with pytest.raises(ValueError, match=r"codec 'kv': a payload of 2 bytes for 10 elements"):
        unseal(b"\0\0", "kv", 10)
    with pytest.raises(ValueError, match=r"codec 'dgc': the 12-byte payload for 5 elements fails"):
        unseal(b"\0" * 12, "dgc", 5)


# ----------------------------------------------------------------- wrong element count, seed

PATHS = ("decode", "decode_on", "aggregate", "aggregate_on")
"""The decode paths: a worker's (NumPy, torch) and a server's sum of pushes (NumPy, torch)."""

COUNT_BLIND = {("kv", "longer")}
"""What no byte can tell: a key/value list names no element count, and keys that lie below
``n`` lie below any larger count too (the format has no padding and no trailer binding)."""


def _decode_via(path: str, codec: object, payload: Payload, ctx: CodecContext) -> object:
    import torch

    cpu = torch.device("cpu")
    if path == "decode":
        return codec.decode(payload, ctx)  # type: ignore[attr-defined]
    if path == "decode_on":
        return codec.decode_on(payload, ctx, cpu)  # type: ignore[attr-defined]
    server = codec.server()  # type: ignore[attr-defined]
    if path == "aggregate":
        return server.aggregate([payload], ctx)
    return server.aggregate_on([payload], ctx, cpu)


def _tail_heavy(seed: int) -> np.ndarray:
    """A vector whose last element is its largest and positive: every codec sends it, so
    a count one short has an entry (index, bit, block value) past its end."""
    x = np.random.default_rng(seed).standard_normal(N).astype(np.float32)
    x[-1] = 8.0
    return x


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", sorted(CODECS.names()))
def test_a_wrong_element_count_is_refused_on_every_decode_path(name, path):
    codec = make_codec(BlockSpec(name, PARAMS.get(name, {})))
    p = codec.encode(_tail_heavy(0), CTX)
    out = _decode_via(path, make_codec(BlockSpec(name, PARAMS.get(name, {}))), p, CTX)
    assert tuple(out.shape) == (N,)  # the control: the right count decodes
    for wrong in (N - 1, N + 1, N // 2, 2 * N, 0):
        if (name, "longer" if wrong > N else "shorter") in COUNT_BLIND:
            continue
        fresh = make_codec(BlockSpec(name, PARAMS.get(name, {})))
        with pytest.raises(ValueError):
            _decode_via(path, fresh, Payload(p.codec, wrong, p.buffer), CTX)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_wrong_seed_is_refused_or_changes_nothing(data):
    """Decoded with another shared seed, a payload is refused (random-k: its trailer binds the
    seed its indices come from) or decodes to the same vector (every other decoder ignores it)."""
    name = data.draw(st.sampled_from(CODECS.names()), label="codec")
    path = data.draw(st.sampled_from(PATHS), label="path")
    other = data.draw(st.integers(0, 2**64 - 1).filter(lambda s: s != CTX.seed), label="seed")
    codec, p = _payload(name, data.draw(st.integers(0, 2**16), label="vector"))
    right = np.asarray(_decode_via(path, make_codec(BlockSpec(name, PARAMS.get(name, {}))), p, CTX))
    ctx = CodecContext(step=CTX.step, ratio=CTX.ratio, seed=other)
    fresh = make_codec(BlockSpec(name, PARAMS.get(name, {})))
    if name == "randomk":
        with pytest.raises(ValueError, match="another step, seed or element count"):
            _decode_via(path, fresh, p, ctx)
    else:
        np.testing.assert_array_equal(np.asarray(_decode_via(path, fresh, p, ctx)), right)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_fuzzed_counts_never_decode_to_another_length(data):
    """Any count: refused, or a finite vector of exactly that many elements."""
    name = data.draw(st.sampled_from(CODECS.names()), label="codec")
    codec, p = _payload(name, data.draw(st.integers(0, 2**16), label="vector"))
    n = data.draw(st.integers(0, 3 * N), label="count")
    path = data.draw(st.sampled_from(PATHS), label="path")
    try:
        out = np.asarray(_decode_via(path, codec, Payload(p.codec, n, p.buffer), CTX))
    except ValueError:
        return
    assert out.shape == (n,) and np.isfinite(out).all()
