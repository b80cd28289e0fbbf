from __future__ import annotations

import struct
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sealing import TRAILER, body_of, sealed

from psml_core.codecs import CODECS, CodecContext, ErrorFeedback, Payload, make_codec
from psml_core.codecs.lossless import snappy_size
from psml_core.codecs.value_bounded import ValueBoundedCodec, ValueBoundedServer
from psml_core.config import BlockSpec
from psml_core.errors import ConfigError

# ---------------------------------------------------------------------------------------------
# Plain references: loops over elements and keys, written from the spec.


def ref_theta(t: int, schedule="decay", theta0=0.0, a=3.0, tau=0.0, lr=0.0, lr0=1.0) -> float:
    """The schedule at iteration t (1-based)."""
    if schedule == "fixed":
        return theta0
    if schedule == "decay":
        return theta0 / t ** (1.0 / a)
    return tau * lr / lr0


def ref_bounds(n: int, key_size: int) -> list[int]:
    """Boundaries of keys of key_size elements, the last one possibly shorter."""
    return [*range(0, n, key_size), n]


def ref_size(n: int, k: int) -> int:
    """Our design's element-sparse rule (COO 8k while not longer than bitmap, else the cheaper)
    plus the 4-byte CRC-32C trailer."""
    coo, bitmap, dense = 8 * k, -(-n // 8) + 4 * k, 4 * n
    if coo <= bitmap:
        return coo + TRAILER
    return (bitmap if bitmap < dense else dense) + TRAILER


class RefFilter:
    """The filter with residual carry-over, one element at a time."""

    def __init__(self, mode: str, dtype: str = "float64") -> None:
        self.mode = mode
        self.cast = np.dtype(dtype).type
        self.r: list | None = None

    def step(self, u: np.ndarray, theta: float, bounds: list[int]):
        """Returns (kept indices, their float32 values, sent as a dense vector)."""
        n, cast = len(u), self.cast
        if self.r is None:
            self.r = [cast(0)] * n
        th = cast(theta)
        v = [cast(cast(u[i]) + self.r[i]) for i in range(n)]
        keep = []
        if self.mode == "element":
            keep = [i for i in range(n) if abs(v[i]) > th]
        else:
            for j in range(len(bounds) - 1):
                s, e = bounds[j], bounds[j + 1]
                total = 0.0
                for i in range(s, e):
                    total += abs(float(v[i]))
                if total / (e - s) >= th:
                    keep.extend(range(s, e))
        self.r = list(v)
        vals = np.zeros(len(keep), dtype=np.float32)
        sent = np.zeros(n, dtype=np.float32)
        for j, i in enumerate(keep):
            vals[j] = sent[i] = np.float32(v[i])
            self.r[i] = cast(v[i] - cast(vals[j]))
        return keep, vals, sent


def ref_key_buffer(
    keep: list[int], vals: np.ndarray, bounds: list[int], step: int = 0, down: bool = False
) -> bytes:
    """MXNet's dense-key message: uint32 key count, uint64 key numbers, float32 values."""
    keys = [j for j in range(len(bounds) - 1) if bounds[j] in set(keep)]
    head = struct.pack("<I", len(keys)) + b"".join(struct.pack("<Q", j) for j in keys)
    return sealed(head + b"".join(struct.pack("<f", v) for v in vals), step, down, n=bounds[-1])


def ref_key_size(keep: list[int], bounds: list[int]) -> int:
    """Wire bytes of a key-mode payload: count, 8 B per sent key, 4 B per value, trailer."""
    sent = sum(1 for j in range(len(bounds) - 1) if bounds[j] in set(keep))
    return 4 + 8 * sent + 4 * len(keep) + TRAILER


def ctx_at(step: int, lr: float = 0.0, **extra) -> CodecContext:
    return CodecContext(step=step, lr=lr, extra=dict(extra))


# ---------------------------------------------------------------------------------------------
# The bound.


def test_decay_schedule_values_a3():
    c = ValueBoundedCodec(theta0=1.2, a=3)
    for t, div in [(1, 1), (8, 2), (27, 3), (64, 4)]:
        assert c.theta_at(t) == pytest.approx(1.2 / div, rel=1e-14)
    # t = ctx.step + 1; steps 26 and 63 are past the 8 warm-up steps
    assert c.threshold(ctx_at(26)) == pytest.approx(0.4, rel=1e-14)
    assert c.threshold(ctx_at(63)) == pytest.approx(0.3, rel=1e-14)


def test_decay_a2_lr_and_fixed_schedules():
    assert ValueBoundedCodec(theta0=0.8, a=2).theta_at(16) == pytest.approx(0.2)
    lr = ValueBoundedCodec(schedule="lr", tau=1e-4, lr0=0.01)
    assert lr.theta_at(5, lr=0.001) == pytest.approx(1e-5)
    assert lr.threshold(ctx_at(100, lr=0.01)) == pytest.approx(1e-4)
    with pytest.raises(ValueError, match="ctx.lr"):
        lr.threshold(ctx_at(100, lr=-1.0))
    fixed = ValueBoundedCodec(schedule="fixed", theta0=0.3)
    assert fixed.theta_at(1) == fixed.theta_at(1000) == 0.3


def test_warmup_mapping():
    c = ValueBoundedCodec(theta0=1.0)
    assert [c.threshold(ctx_at(s)) for s in range(8)] == [0.0] * 8
    assert c.threshold(ctx_at(8)) == pytest.approx(9 ** (-1 / 3))
    assert ValueBoundedCodec(theta0=1.0, warmup=0).threshold(ctx_at(0)) == 1.0


@pytest.mark.parametrize("mode", ["element", "key"])
def test_warmup_filters_nothing(mode):
    rng = np.random.default_rng(1)
    c = ValueBoundedCodec(mode=mode, schedule="fixed", theta0=1e6, warmup=5, key_size=7)
    for step in range(5):
        u = rng.standard_normal(50).astype(np.float32)
        np.testing.assert_array_equal(c.decode(c.encode(u, ctx_at(step)), ctx_at(step)), u)
        assert not c.residual.any()
    assert not c.decode(c.encode(u, ctx_at(5)), ctx_at(5)).any()
    np.testing.assert_array_equal(c.residual, u)


# ---------------------------------------------------------------------------------------------
# The codec against the reference.


@st.composite
def streams(draw, max_n=60, max_steps=6):
    n = draw(st.integers(0, max_n))
    steps = draw(st.integers(1, max_steps))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    us = [rng.standard_normal(n).astype(np.float32) for _ in range(steps)]
    for u in us:
        u[rng.random(n) < 0.2] = 0.0
    return us


SCHEDULES = [
    dict(schedule="decay", theta0=0.9, a=3),
    dict(schedule="decay", theta0=1.5, a=2),
    dict(schedule="fixed", theta0=0.5),
    dict(schedule="lr", tau=2.0, lr0=0.1),
    dict(schedule="decay", theta0=0.0),
]


@settings(max_examples=80, deadline=None)
@given(
    streams(),
    st.sampled_from(SCHEDULES),
    st.sampled_from(["element", "key"]),
    st.sampled_from(["float64", "float32"]),
    st.integers(0, 3),
    st.integers(1, 9),
)
def test_matches_reference(us, sched, mode, dtype, warmup, key_size):
    c = ValueBoundedCodec(
        mode=mode, warmup=warmup, key_size=key_size, residual_dtype=dtype, **sched
    )
    server = c.server()
    ref, ref_server = RefFilter(mode, dtype), RefFilter(mode, dtype)
    for step, u in enumerate(us):
        ctx = ctx_at(step, lr=0.1 / (1 + step))
        theta = 0.0 if step < warmup else ref_theta(step + 1, lr=ctx.lr, **sched)
        n, bounds = u.size, ref_bounds(u.size, key_size)
        for codec_end, ref_end, encode, decode, down in [
            (c, ref, c.encode, c.decode, False),
            (server, ref_server, server.encode_down, server.decode_down, True),
        ]:
            p = encode(u, ctx)
            keep, vals, sent = ref_end.step(u, theta, bounds)
            np.testing.assert_array_equal(decode(p, ctx), sent)
            np.testing.assert_array_equal(codec_end.residual, np.array(ref_end.r, dtype=dtype))
            assert codec_end.last_sent == len(keep)
            if mode == "element":
                assert p.wire_bytes == ref_size(n, len(keep))
            else:
                assert p.buffer == ref_key_buffer(keep, vals, bounds, step, down)
                assert p.wire_bytes == ref_key_size(keep, bounds)


@settings(max_examples=40, deadline=None)
@given(streams(max_n=80, max_steps=3), st.data())
def test_key_bounds_override_key_size(us, data):
    n = us[0].size
    cuts = data.draw(st.sets(st.integers(1, max(1, n - 1)), max_size=6)) if n > 1 else set()
    bounds = [0, *sorted(cuts), n] if n else [0]
    c = ValueBoundedCodec(mode="key", schedule="fixed", theta0=0.8, warmup=1, key_size=5)
    ref = RefFilter("key")
    for step, u in enumerate(us):
        ctx = ctx_at(step, key_bounds=np.array(bounds))
        p = c.encode(u, ctx)
        keep, vals, sent = ref.step(u, 0.0 if step < 1 else 0.8, bounds)
        assert p.buffer == ref_key_buffer(keep, vals, bounds, step)
        np.testing.assert_array_equal(c.decode(p, ctx), sent)


@pytest.mark.parametrize("mode", ["element", "key"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_residual_invariant_exact(mode, dtype):
    rng = np.random.default_rng(7)
    c = ValueBoundedCodec(mode=mode, theta0=2.0, warmup=2, key_size=16, residual_dtype=dtype)
    cast = np.dtype(dtype)
    r_old = np.zeros(1000, dtype=cast)
    for step in range(30):
        u = (rng.standard_normal(1000) * rng.choice([1e-3, 1.0, 1e4])).astype(np.float32)
        ctx = ctx_at(step)
        sent = c.decode(c.encode(u, ctx), ctx)
        r_new = c.residual.copy()
        np.testing.assert_array_equal(u.astype(cast) + r_old, sent.astype(cast) + r_new)
        r_old = r_new


@pytest.mark.parametrize("mode", ["element", "key"])
def test_server_residual_invariant_and_bytes(mode):
    rng = np.random.default_rng(3)
    c = ValueBoundedCodec(mode=mode, theta0=0.6, warmup=1, key_size=10)
    workers = [ValueBoundedCodec(mode=mode, theta0=0.6, warmup=1, key_size=10) for _ in range(3)]
    server = c.server()
    assert isinstance(server, ValueBoundedServer)
    big_r = np.zeros(95)
    for step in range(20):
        ctx = ctx_at(step)
        pushes = [w.encode(rng.standard_normal(95).astype(np.float32), ctx) for w in workers]
        total = server.aggregate(pushes, ctx)
        expected = sum(w.decode(p, ctx) for w, p in zip(workers, pushes, strict=True))
        np.testing.assert_allclose(total, expected, rtol=1e-6, atol=1e-6)
        avg = total / np.float32(3)
        down = server.encode_down(avg, ctx)
        bcast = server.decode_down(down, ctx)
        np.testing.assert_array_equal(avg.astype(np.float64) + big_r, bcast + server.residual)
        big_r = server.residual.copy()
        k = server.last_sent
        keys = len(np.unique(np.flatnonzero(bcast) // 10))  # whole keys of 10 (last one 5)
        key_bytes = 4 + 8 * keys + 4 * k + TRAILER
        assert down.wire_bytes == (ref_size(95, k) if mode == "element" else key_bytes)
        assert down.codec == "value_bounded/down"
        assert server.shared() == ({}, 0)


@pytest.mark.parametrize("mode", ["element", "key"])
def test_theta0_zero_is_lossless(mode):
    """The PF README's theta0 = 0 row: the filter is off, every non-zero is sent."""
    rng = np.random.default_rng(5)
    c = ValueBoundedCodec(mode=mode, theta0=0.0, key_size=32)
    for step in range(20):
        u = rng.standard_normal(200).astype(np.float32)
        u[rng.random(200) < 0.5] = 0.0
        p = c.encode(u, ctx_at(step))
        np.testing.assert_array_equal(c.decode(p, ctx_at(step)), u)
        assert not c.residual.any()
        k = int(np.count_nonzero(u))
        # Key mode sends all 7 keys whole (the last holds 8): a dense push plus 8 B per key.
        assert p.wire_bytes == (ref_size(200, k) if mode == "element" else 4 + 8 * 7 + 4 * 200 + 4)


@pytest.mark.parametrize("mode", ["element", "key"])
def test_own_residual_loses_nothing_over_many_steps(mode):
    rng = np.random.default_rng(11)
    c = ValueBoundedCodec(mode=mode, theta0=1.0, key_size=8)
    total_in, total_sent = np.zeros(300), np.zeros(300)
    for step in range(100):
        u = rng.standard_normal(300).astype(np.float32)
        total_in += u
        total_sent += c.decode(c.encode(u, ctx_at(step)), ctx_at(step))
    np.testing.assert_allclose(total_in, total_sent + c.residual, rtol=0, atol=1e-12)


def test_error_feedback_wrapping_would_carry_twice():
    c = ValueBoundedCodec(schedule="fixed", theta0=10.0, warmup=0)
    assert c.carries_residual
    ef = ErrorFeedback(c)
    u = np.ones(4, dtype=np.float32)
    ef.encode(u, ctx_at(0))
    ef.encode(u, ctx_at(1))
    assert c.residual[0] == 3.0  # 1 + (1 + 1): the EF residual re-adds what c already holds


# ---------------------------------------------------------------------------------------------
# Bytes.


def test_element_byte_formula_all_three_formats():
    n = 1000  # ceil(n/8) = 125, COO while k <= 31
    for k, size in [(0, 0), (31, 248), (32, 125 + 128), (900, 125 + 3600), (980, 4000)]:
        x = np.zeros(n, dtype=np.float32)
        x[np.linspace(0, n - 1, k).astype(int)] = 5.0
        x[x == 0] = 0.5
        c = ValueBoundedCodec(schedule="fixed", theta0=1.0, warmup=0)
        p = c.encode(x, ctx_at(0))
        assert c.last_sent == k and p.wire_bytes == size + TRAILER == ref_size(n, k)
        np.testing.assert_array_equal(c.decode(p, ctx_at(0)), np.where(x == 5.0, x, 0))


def test_key_byte_formula_with_short_last_key():
    x = np.zeros(23, dtype=np.float32)
    x[0:10] = 1.0  # key 0: mean 1.0 -> sent
    x[10] = 3.0  # key 1: mean 0.3 -> kept back
    x[20:23] = 0.5  # key 2 (3 elements): mean 0.5 -> sent at theta 0.5
    c = ValueBoundedCodec(mode="key", schedule="fixed", theta0=0.5, warmup=0, key_size=10)
    p = c.encode(x, ctx_at(0))
    assert p.wire_bytes == 4 + 8 * 2 + 4 * 13 + TRAILER  # keys 0 and 2: 13 values
    assert p.buffer == ref_key_buffer(
        [*range(10), 20, 21, 22], np.r_[x[:10], x[20:]], [0, 10, 20, 23]
    )
    np.testing.assert_array_equal(c.residual[10:20], x[10:20])


# ---------------------------------------------------------------------------------------------
# Adversarial inputs.


@pytest.mark.parametrize("mode", ["element", "key"])
def test_all_zeros_huge_value_and_empty(mode):
    c = ValueBoundedCodec(mode=mode, schedule="fixed", theta0=1.0, warmup=0, key_size=4)
    z = np.zeros(10, dtype=np.float32)
    p = c.encode(z, ctx_at(0))
    empty = TRAILER if mode == "element" else 4 + TRAILER  # key mode: its count of 0 keys
    assert p.wire_bytes == empty and not c.decode(p, ctx_at(0)).any()
    h = z.copy()
    h[9] = 1e30
    got = c.decode(c.encode(h, ctx_at(1)), ctx_at(1))
    want = h if mode == "element" else np.r_[z[:8], 0, 1e30].astype(np.float32)
    np.testing.assert_array_equal(got, want)
    e = ValueBoundedCodec(mode=mode, theta0=1.0)
    p = e.encode(np.zeros(0, dtype=np.float32), ctx_at(0))
    assert p.wire_bytes == empty and e.decode(p, ctx_at(0)).size == 0


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_other_float_dtypes_are_cast(dtype):
    x = np.array([1.5, -0.25, 0.0, 3.0, -2.0], dtype=dtype)
    c = ValueBoundedCodec(schedule="fixed", theta0=1.0, warmup=0)
    got = c.decode(c.encode(x, ctx_at(0)), ctx_at(0))
    np.testing.assert_array_equal(got, np.array([1.5, 0, 0, 3.0, -2.0], dtype=np.float32))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_rejected(bad):
    with pytest.raises(ValueError, match="non-finite value .* at index 1"):
        ValueBoundedCodec().encode(np.array([0.0, bad], dtype=np.float32), ctx_at(0))


def test_residual_overflow_rejected():
    c = ValueBoundedCodec(schedule="fixed", theta0=1e38, warmup=0, residual_dtype="float32")
    x = np.array([3e38], dtype=np.float32)
    c.encode(x * np.float32(0.3), ctx_at(0))  # 9e37 is kept back
    with pytest.raises(ValueError, match="overflowed float32"):
        c.encode(x, ctx_at(1))


def test_vector_length_is_fixed_per_instance():
    c = ValueBoundedCodec()
    c.encode(np.ones(5, dtype=np.float32), ctx_at(0))
    with pytest.raises(ValueError, match="one codec instance per vector"):
        c.encode(np.ones(6, dtype=np.float32), ctx_at(1))


def test_deterministic():
    rng = np.random.default_rng(2)
    us = [rng.standard_normal(500).astype(np.float32) for _ in range(12)]
    for mode in ("element", "key"):
        runs = []
        for _ in range(2):
            c = ValueBoundedCodec(mode=mode, theta0=0.7, key_size=16)
            runs.append([c.encode(u, ctx_at(s)).buffer for s, u in enumerate(us)])
        assert runs[0] == runs[1]


# ---------------------------------------------------------------------------------------------
# Corrupted buffers.


def _key_payload() -> tuple[ValueBoundedCodec, Payload]:
    x = np.arange(1, 25, dtype=np.float32)
    c = ValueBoundedCodec(mode="key", schedule="fixed", theta0=5.0, warmup=0, key_size=6)
    p = c.encode(x, ctx_at(0))  # keys 0 (mean 3.5) kept back; keys 1, 2, 3 sent
    assert p.wire_bytes == 4 + 8 * 3 + 4 * 18 + TRAILER
    return c, p


def _with(p: Payload, body: bytes) -> Payload:
    """``p`` with another body, sealed: the decoder's own checks behind the checksum."""
    return Payload(p.codec, p.n, sealed(body, n=p.n))


def test_key_mode_rejects_truncated_and_corrupted_buffers():
    c, p = _key_payload()
    ctx = ctx_at(0)
    body = body_of(p.buffer, n=p.n)
    count = int(np.frombuffer(body, dtype="<u4", count=1)[0])
    keys = np.frombuffer(body, dtype="<u8", count=count, offset=4).copy()
    vals = np.frombuffer(body, dtype="<f4", offset=4 + 8 * count).copy()
    assert count == 3 and list(keys) == [1, 2, 3]

    def rebuilt(k: np.ndarray, v: np.ndarray, n: int | None = None) -> Payload:
        head = np.array([len(k) if n is None else n], "<u4").tobytes()
        return _with(p, head + k.astype("<u8").tobytes() + v.astype("<f4").tobytes())

    with pytest.raises(ValueError, match="does not hold"):
        c.decode(_with(p, body[:-1]), ctx)
    with pytest.raises(ValueError, match="no key count"):
        c.decode(_with(p, body[:3]), ctx)
    with pytest.raises(ValueError, match="does not hold"):
        c.decode(rebuilt(keys, vals[:-1]), ctx)  # one value short
    swapped = keys.copy()
    swapped[[0, 1]] = swapped[[1, 0]]
    with pytest.raises(ValueError, match="ascending"):
        c.decode(rebuilt(swapped, vals), ctx)
    out_of_range = keys.copy()
    out_of_range[-1] = 4
    with pytest.raises(ValueError, match="ascending and in"):
        c.decode(rebuilt(out_of_range, vals), ctx)
    shifted = keys - 1  # keys 0, 1, 2 instead of 1, 2, 3: still whole keys, so valid
    np.testing.assert_array_equal(c.decode(rebuilt(shifted, vals), ctx)[:18], vals)
    with pytest.raises(ValueError, match="names 9 keys"):
        c.decode(rebuilt(keys, vals, n=9), ctx)
    nan = vals.copy()
    nan[3] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        c.decode(rebuilt(keys, nan), ctx)
    with pytest.raises(ValueError):
        c.decode(Payload(p.codec, 2, p.buffer), ctx)


def test_keys_tensors_follow_the_layout_the_engine_sets():
    """MXNet's keys are tensors: with keys: tensors the codec filters per tensor of the layout."""
    x = np.zeros(12, dtype=np.float32)
    x[:8] = 0.1  # tensor 0 (8 elements): mean 0.1 -> kept back
    x[8:] = 2.0  # tensor 1 (4 elements): mean 2.0 -> sent
    c = ValueBoundedCodec(mode="key", schedule="fixed", theta0=0.5, warmup=0, keys="tensors")
    with pytest.raises(ValueError, match="tensor layout"):
        c.encode(x, ctx_at(0))
    c.set_layout(np.array([0, 8, 12]))
    p = c.encode(x, ctx_at(0))
    assert p.wire_bytes == 4 + 8 + 4 * 4 + TRAILER
    np.testing.assert_array_equal(c.decode(p, ctx_at(0)), np.r_[np.zeros(8), x[8:]])


def test_element_mode_rejects_truncated_and_corrupted_buffers():
    x = np.zeros(1000, dtype=np.float32)
    x[[3, 500, 999]] = 7.0
    c = ValueBoundedCodec(schedule="fixed", theta0=1.0, warmup=0)
    p = c.encode(x, ctx_at(0))
    assert p.wire_bytes == 24 + TRAILER
    body = body_of(p.buffer, n=p.n)
    with pytest.raises(ValueError):
        c.decode(_with(p, body[:-1]), ctx_at(0))
    idx = np.frombuffer(body, dtype="<i4", count=3).copy()
    idx[1] = 1000
    with pytest.raises(ValueError, match="ascending"):
        c.decode(_with(p, idx.tobytes() + body[12:]), ctx_at(0))
    with pytest.raises(ValueError, match="non-finite"):
        c.decode(_with(p, body[:12] + np.full(3, np.inf, "<f4").tobytes()), ctx_at(0))
    with pytest.raises(ValueError, match="non-finite"):
        c.decode(_with(p, np.full(1000, np.nan, "<f4").tobytes()), ctx_at(0))


def test_bad_key_bounds_rejected():
    c = ValueBoundedCodec(mode="key", theta0=1.0, warmup=0)
    x = np.ones(10, dtype=np.float32)
    for bad in ([0, 5], [1, 10], [0, 5, 5, 10], [0.0, 10.0], [[0, 10]]):
        with pytest.raises(ValueError, match="key_bounds"):
            c.encode(x, ctx_at(0, key_bounds=np.array(bad)))


# ---------------------------------------------------------------------------------------------
# Parameters, registry, Snappy.


@pytest.mark.parametrize(
    ("params", "name"),
    [
        (dict(mode="tensor"), "mode"),
        (dict(schedule="cosine"), "schedule"),
        (dict(theta0=-0.1), "theta0"),
        (dict(theta0=float("nan")), "theta0"),
        (dict(a=0), "a"),
        (dict(tau=-1.0), "tau"),
        (dict(schedule="lr", tau=1.0), "lr0"),
        (dict(lr0=0.0), "lr0"),
        (dict(warmup=-1), "warmup"),
        (dict(warmup=1.5), "warmup"),
        (dict(key_size=0), "key_size"),
        (dict(residual_dtype="float16"), "residual_dtype"),
    ],
)
def test_invalid_params(params, name):
    with pytest.raises(ValueError, match=name):
        ValueBoundedCodec(**params)


def test_registered_and_made_from_a_recipe():
    assert CODECS.get("value_bounded") is ValueBoundedCodec
    c = make_codec(BlockSpec(name="value_bounded", params={"mode": "key", "theta0": 0.4}))
    assert isinstance(c, ValueBoundedCodec) and c.mode == "key" and c.theta0 == 0.4
    with pytest.raises(ConfigError, match="theta0"):
        make_codec(BlockSpec(name="value_bounded", params={"theta0": -1}))


def test_snappy_size_is_none_without_snappy(monkeypatch):
    monkeypatch.setitem(sys.modules, "snappy", None)  # makes `import snappy` fail
    assert snappy_size(b"abc") is None


def test_snappy_size_with_snappy():
    import snappy  # python-snappy is a dependency (Ratatouille's lossless sizes)

    c = ValueBoundedCodec(theta0=0.0)
    p = c.encode(np.zeros(4096, dtype=np.float32) + 1.0, ctx_at(0))
    size = snappy_size(p)
    assert size == len(snappy.compress(p.buffer)) == snappy_size(p.buffer)
    assert size < p.wire_bytes == 4 * 4096 + TRAILER  # never mixed into wire_bytes


# ---------------------------------------------------------------------------------------------
# Traffic falls as theta0 grows (the PF README table's trend).


@pytest.mark.parametrize("mode", ["element", "key"])
def test_cumulative_traffic_falls_as_theta0_grows(mode):
    rng = np.random.default_rng(0)
    n, steps = 2000, 200
    stream = [
        (rng.standard_normal(n) * 0.3 * np.exp(-s / 100)).astype(np.float32) for s in range(steps)
    ]
    traffic = []
    for theta0 in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2):
        c = ValueBoundedCodec(mode=mode, theta0=theta0, key_size=50)
        traffic.append(sum(c.encode(u, ctx_at(s)).wire_bytes for s, u in enumerate(stream)))
    assert all(a > b for a, b in zip(traffic, traffic[1:], strict=False)), traffic
