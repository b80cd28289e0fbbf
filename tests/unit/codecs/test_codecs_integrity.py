"""No codec decodes a damaged payload silently: mutation tests over every registered codec.

Variable-length formats are sealed with a CRC-32C trailer (``psml_core.codecs.integrity``)
bound to the step and the element count: truncation, extension, a flipped byte, an empty
buffer and a wrong count are all refused. Fixed-length formats (``none``, ``fp16``, ``qsgd``,
the sign codecs; random-k too, though sealed) are refused by length; a flipped byte is a
different message the encoder could have sent (every bit pattern of the right length is one,
non-finite values and set padding bits aside, which the decoders refuse), so for them the test
checks only that a flipped payload never decodes to something that is not a finite vector of
length n. A wrong element count is refused on every decode path, except exactly the sign
codecs' counts that no byte can tell (:data:`COUNT_BLIND`).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sealing import sealed
from sending import sending_codec

from psml_core.codecs import CODECS
from psml_core.codecs.base import CodecContext, Payload
from psml_core.codecs.integrity import CHECKSUM_BYTES, crc32c, seal, unseal

N = 1000
CTX = CodecContext(step=3, ratio=0.05, seed=7)


HEADER_FREE = {"none", "fp16", "qsgd", "signsgd", "efsignsgd", "randomk"}
"""Fixed-length formats: the length is known to both ends, every bit pattern is a message."""


def test_every_codec_is_classified():
    sealed = set(CODECS.names()) - HEADER_FREE
    assert sealed == {
        "dfs", "dgc", "kv", "omnireduce", "threshold", "topk", "topk_matched", "value_bounded",
    }  # fmt: skip


def _payload(name: str, seed: int) -> tuple[object, Payload]:
    codec = sending_codec(name)
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
    buf = bytes(p.buffer)  # a memoryview where the payload keeps its codec's array
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
        with pytest.raises(ValueError, match="CRC-32C"):
            codec.decode(damaged, CTX)


@pytest.mark.parametrize("name", sorted(CODECS.names()))
def test_every_prefix_of_a_payload_that_starts_with_zero_bytes_is_refused(name):
    """A payload whose first entry is at index 0 starts with four zero bytes: cut to any
    length (4 bytes included, which an unseeded CRC-32C took for a sealed empty body), it is
    refused."""
    codec = sending_codec(name)
    x = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    x[1:20] = 0.0
    x[0] = 3.0  # the largest entry, so every sparse codec sends index 0 first
    p = codec.encode(x, CTX)
    for size in range(len(p.buffer)):
        with pytest.raises(ValueError):
            codec.decode(Payload(p.codec, p.n, p.buffer[:size]), CTX)


def _crc32c_bitwise(data: bytes, value: int = 0) -> int:
    """CRC-32C bit by bit from its definition (reflected Castagnoli polynomial 0x82F63B78)."""
    c = value ^ 0xFFFFFFFF
    for byte in data:
        c ^= byte
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    return c ^ 0xFFFFFFFF


def test_the_trailer_is_crc32c():
    """The standard's check value, and the definition on bodies of every kind the seal reads."""
    assert crc32c(b"123456789") == 0xE3069283  # RFC 3720's CRC-32C check value
    assert crc32c(b"\0" * 32) == 0x8A9136AA  # RFC 3720 B.4: 32 bytes of zeros
    rng = np.random.default_rng(5)
    for size in (0, 1, 7, 64, 1000):
        body = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        seed = int(rng.integers(0, 2**32))
        want = _crc32c_bitwise(body, seed)
        for kind in (body, bytearray(body), memoryview(body), np.frombuffer(body, np.uint8)):
            assert crc32c(kind, seed) == want, (size, type(kind))
        assert crc32c(body[size // 2 :], crc32c(body[: size // 2], seed)) == want
        assert seal(body, 4, n=size)[-CHECKSUM_BYTES:] == sealed(body, 4, n=size)[-4:]


def test_an_empty_body_does_not_seal_to_zero():
    assert seal(b"", n=0) != b"\0" * CHECKSUM_BYTES
    with pytest.raises(ValueError, match="CRC-32C"):
        unseal(b"\0" * CHECKSUM_BYTES, "kv", 10)


@pytest.mark.parametrize("step", [None, 0, 3])
def test_every_seal_binds_the_element_count(step):
    """With or without a step (a touched pull's key list and answer have none)."""
    body = bytes(range(24))
    for down in (False, True):
        buf = seal(body, step, n=10, down=down)
        assert bytes(unseal(buf, "kv", 10, step, down=down)) == body
        for other in (9, 11, 0, 2**32 + 10):
            with pytest.raises(ValueError, match=r"^codec 'kv': .* for \d+ elements fails"):
                unseal(buf, "kv", other, step, down=down)


@pytest.mark.parametrize("name", sorted(set(CODECS.names()) - HEADER_FREE))
def test_sealed_payloads_count_their_trailer(name):
    codec, p = _payload(name, 0)
    body = unseal(p.buffer, name, N, CTX.step)
    assert p.wire_bytes == len(p.buffer) == len(body) + CHECKSUM_BYTES
    np.testing.assert_array_equal(
        codec.decode(p, CTX), codec.decode(Payload(p.codec, p.n, seal(body, CTX.step, n=N)), CTX)
    )


@pytest.mark.parametrize("name", ["topk", "value_bounded"])
def test_broadcasts_are_sealed_too(name):
    codec = sending_codec(name)
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

SIZES = (1000, 1001, 1003)
"""Vector lengths for the wrong-count test: ``n % 8`` is 0, 1 and 3, so a count one off
changes a sign bitmap's byte count (``n + 1`` at 1000, ``n - 1`` at 1001) or keeps it."""
SEEDS = range(6)
"""Random vectors per length: standard-normal, so a sign codec's last bit is 0 in some."""

SIGN_CODECS = ("signsgd", "efsignsgd")
COUNT_BLIND = frozenset(
    (name, path, delta) for name in SIGN_CODECS for path in PATHS for delta in (-1, 1)
)
"""The only (codec, decode path, wrong count - n) that ever decode, each only when the bytes
are exactly what the encoder sends for a vector of the wrong count (:func:`_sign_bits_fit`):
the sign codecs' bitmap carries no count (no trailer, no header) and its padding bits are
zero, so a count one short whose dropped bit is 0 (a negative last element) or a count one
longer within the same bytes (the new bit is the zero padding) is a valid message of that
count. Their decoders refuse a changed byte count and any set padding bit, which is all the
bytes can tell; every other codec refuses every wrong count (the sealed ones by their
trailer, which binds the count; ``none``, ``fp16`` and 8-bit ``qsgd`` by their length)."""


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


def _sign_bits_fit(name: str, buf: bytes, m: int) -> bool:
    """Whether ``buf`` is bit for bit a sign codec's message for an ``m``-vector: ``ceil(m/8)``
    bytes of bits (after ``efsignsgd``'s 4-byte scale) whose bits past ``m`` are all zero."""
    bits = buf[4:] if name == "efsignsgd" else buf
    return len(bits) == -(-m // 8) and (m % 8 == 0 or bits[-1] >> (m % 8) == 0)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", sorted(CODECS.names()))
def test_a_wrong_element_count_is_refused_on_every_decode_path(name, path):
    """Random vectors, counts n - 1 and n + 1 (and farther off): refused in one line naming the
    codec, except exactly :data:`COUNT_BLIND`, where no byte tells the count."""
    slipped = set()
    for n, seed in itertools.product(SIZES, SEEDS):
        x = np.random.default_rng([seed, n]).standard_normal(n).astype(np.float32)
        p = sending_codec(name).encode(x, CTX)
        assert tuple(_decode_via(path, sending_codec(name), p, CTX).shape) == (n,)  # the control
        for m in (n - 1, n + 1, n // 2, 2 * n, 0):
            try:
                out = _decode_via(path, sending_codec(name), Payload(p.codec, m, p.buffer), CTX)
            except ValueError as err:
                msg = str(err)
                assert msg.startswith(f"codec '{name}'") and "\n" not in msg, msg
                continue
            assert (name, path, m - n) in COUNT_BLIND, (n, seed, m)
            assert _sign_bits_fit(name, p.buffer, m), (n, seed, m)  # indistinguishable
            assert tuple(out.shape) == (m,)
            slipped.add((name, path, m - n))
    assert slipped == {case for case in COUNT_BLIND if case[:2] == (name, path)}


@pytest.mark.parametrize("name", SIGN_CODECS)
def test_a_sign_codec_refuses_every_count_its_bytes_contradict(name):
    """The other side of :data:`COUNT_BLIND`: a count whose byte count differs, or that makes
    a set bit padding, is refused."""
    for n in range(1, 40):
        x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        p = sending_codec(name).encode(x, CTX)
        for m in range(0, 50):
            payload = Payload(p.codec, m, p.buffer)
            if _sign_bits_fit(name, p.buffer, m):
                assert sending_codec(name).decode(payload, CTX).shape == (m,)
                continue
            with pytest.raises(ValueError, match=f"^codec '{name}': "):
                sending_codec(name).decode(payload, CTX)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_wrong_seed_is_refused_or_changes_nothing(data):
    """Decoded with another shared seed, a payload is refused (random-k: its trailer binds the
    seed its indices come from) or decodes to the same vector (every other decoder ignores it)."""
    name = data.draw(st.sampled_from(CODECS.names()), label="codec")
    path = data.draw(st.sampled_from(PATHS), label="path")
    other = data.draw(st.integers(0, 2**64 - 1).filter(lambda s: s != CTX.seed), label="seed")
    codec, p = _payload(name, data.draw(st.integers(0, 2**16), label="vector"))
    right = np.asarray(_decode_via(path, sending_codec(name), p, CTX))
    ctx = CodecContext(step=CTX.step, ratio=CTX.ratio, seed=other)
    fresh = sending_codec(name)
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
