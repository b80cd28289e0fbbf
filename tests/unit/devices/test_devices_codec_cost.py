from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from psml_core.codecs import Codec, CodecContext, ErrorFeedback, Payload, make_codec
from psml_core.config import BlockSpec
from psml_core.devices.codec_cost import CodecCostModel, unwrap, wrapper_name
from psml_core.devices.device import (
    OPS,
    TIME_FLOOR_S,
    CostCurve,
    device_from_dict,
    load_device,
)
from psml_core.errors import ConfigError

SIZES = (1_000, 10_000, 100_000, 1_000_000)


def _curve(a: float, b: float) -> dict:
    """Points that lie on ``a + b n`` at :data:`SIZES` (exact values are read back)."""
    return {"times": [a + b * n for n in SIZES]}


def _entry(ratio, scale: float, **extra) -> dict:
    ops = {op: _curve(1e-5 * scale, 1e-9 * scale) for op in OPS}
    return {"ratio": ratio, **ops, **extra}


def _table() -> dict:
    return {
        "compute": {
            "flops_per_s": 1e10,
            "overhead_s": 0.0,
            "source": {"kind": "estimated", "detail": "test"},
        },
        "codec_costs": {
            "source": {"kind": "estimated", "detail": "test"},
            "calibration": {"sizes": list(SIZES)},
            "reference": _curve(1e-6, 1e-10),
            "codecs": {
                "none": [_entry(None, 1.0)],
                "topk": [_entry(0.001, 1.0), _entry(0.01, 2.0), _entry(0.1, 4.0)],
                "dfs": [
                    _entry(
                        0.01,
                        1.0,
                        encode_report=_curve(5e-5, 6e-9),
                        aggregate_report=_curve(2e-5, 2e-9),
                        choose_block=_curve(3e-5, 4e-9),
                    )
                ],
            },
            "wrappers": {
                "error_feedback": {**_curve(1e-6, 3e-9), "inner_decode": True},
                "momentum_correction": {**_curve(2e-6, 2e-9), "inner_decode": False},
            },
        },
    }


@pytest.fixture
def model() -> CodecCostModel:
    return CodecCostModel.from_device(device_from_dict(_table(), "test", source="test table"))


def _ctx(ratio: float = 1.0, **extra) -> CodecContext:
    return CodecContext(step=1, ratio=ratio, seed=0, lr=0.1, extra=dict(extra))


def _topk(**params) -> Codec:
    return make_codec(BlockSpec("topk", params))


def _t(a: float, b: float, n: int) -> float:
    return a + b * n


def _rises(times: list[float]) -> bool:
    """Non-decreasing, up to the last bit of ``exp(log t)`` next to a stored point."""
    return all(b >= a * (1 - 1e-12) for a, b in zip(times[:-1], times[1:], strict=True))


def test_every_stored_point_is_reproduced_exactly(model):
    table = model.table
    for name, entries in table.codecs.items():
        for e in entries:
            for op, curve in e.ops.items():
                for n, t in zip(SIZES, curve.times, strict=True):
                    assert model.op_s(name, op, n, e.ratio) == t, (name, e.ratio, op, n)
    for w in table.wrappers.values():
        assert [w.curve.at(n) for n in SIZES] == list(w.curve.times)
    assert [table.reference.at(n) for n in SIZES] == list(table.reference.times)


def test_log_log_between_points_flat_below_linear_above(model):
    c, ctx = make_codec(BlockSpec("none", {})), _ctx()
    t0, t1 = _t(1e-5, 1e-9, 1_000), _t(1e-5, 1e-9, 10_000)
    # below the smallest size: the smallest size's time (n = 0 included)
    assert model.encode_s(c, 0, ctx) == model.encode_s(c, 10, ctx) == t0
    # between: a power law through the neighbours (halfway in log n: the geometric mean)
    assert model.encode_s(c, round(math.sqrt(1e7)), ctx) == pytest.approx(
        math.sqrt(t0 * t1), rel=1e-4
    )
    w = math.log(2_000 / 1_000) / math.log(10)
    assert model.encode_s(c, 2_000, ctx) == pytest.approx(t0 ** (1 - w) * t1**w)
    # above the largest: linear from the largest point
    t_max = _t(1e-5, 1e-9, 1_000_000)
    assert model.encode_s(c, 3_000_000, ctx) == pytest.approx(3 * t_max)
    with pytest.raises(ValueError, match="-1 elements"):
        model.encode_s(c, -1, ctx)


def test_monotone_in_n_when_the_points_are(model):
    grid = sorted({*range(0, 2_000, 97), *np.geomspace(1, 5e6, 2_000).astype(int).tolist()})
    for r in (0.001, 0.003, 0.01, 0.05, 0.1):
        assert _rises([model.op_s("topk", "encode", n, r) for n in grid])
    for fn in (model.decode_s, model.encode_down_s, model.decode_down_s):
        c = make_codec(BlockSpec("none", {}))
        assert fn(c, 10**6, _ctx()) > fn(c, 10, _ctx())
    # non-monotone points: each stretch stays between its two points
    curve = CostCurve((10, 100, 1_000), (3e-6, 1e-6, 2e-6))
    for lo, hi, n in ((10, 100, 37), (100, 1_000, 500)):
        assert min(curve.at(lo), curve.at(hi)) <= curve.at(n) <= max(curve.at(lo), curve.at(hi))


@pytest.mark.parametrize("device", ["cpu-core", "v100", "a100"])
def test_shipped_curves_reproduce_their_points_and_rise_where_they_do(device):
    table = CodecCostModel.for_device(device).table
    curves = [op for es in table.codecs.values() for e in es for op in e.ops.values()]
    curves += [w.curve for w in table.wrappers.values()] + [table.reference]
    for curve in curves:
        assert [curve.at(n) for n in curve.sizes] == list(curve.times)
        for (n0, t0), (n1, t1) in zip(
            zip(curve.sizes, curve.times, strict=True),
            zip(curve.sizes[1:], curve.times[1:], strict=True),
            strict=False,
        ):
            inner = [curve.at(n) for n in np.geomspace(n0, n1, 25)[1:-1]]
            if t1 >= t0:
                assert _rises([t0, *inner, t1])
            assert all(min(t0, t1) * (1 - 1e-12) <= t <= max(t0, t1) * (1 + 1e-12) for t in inner)


def test_a_zero_or_negative_point_is_floored_not_a_math_error():
    curve = CostCurve((10, 100, 1_000), (0.0, -1e-9, 1e-6))
    assert curve.at(5) == curve.at(10) == TIME_FLOOR_S
    assert curve.at(100) == TIME_FLOOR_S
    mid = curve.at(316)
    assert math.isfinite(mid) and TIME_FLOOR_S < mid < 1e-6
    assert curve.at(2_000) == pytest.approx(2e-6)
    with pytest.raises(ValueError, match="one time per size"):
        CostCurve((10, 100), (1e-6,))
    with pytest.raises(ValueError, match="ascending"):
        CostCurve((100, 10), (1e-6, 1e-6))


def test_ratio_from_codec_param_then_ctx_then_override(model):
    n = 10**5
    at = {r: model.op_s("topk", "encode", n, r) for r in (0.001, 0.01, 0.1)}
    assert model.encode_s(_topk(ratio=0.01), n, _ctx(0.1)) == pytest.approx(at[0.01])  # own
    assert model.encode_s(_topk(), n, _ctx(0.1)) == pytest.approx(at[0.1])  # ctx.ratio
    assert model.encode_s(_topk(), n, _ctx(0.1), ratio=0.001) == pytest.approx(at[0.001])


def test_interpolation_is_log_linear_in_log_ratio_and_clamped(model):
    for n in (0, 1_000, 31_623, 10**5, 5 * 10**6):
        lo, hi = model.op_s("topk", "encode", n, 0.001), model.op_s("topk", "encode", n, 0.01)
        assert hi == pytest.approx(2 * lo)  # the table's scales 1 and 2
        mid = model.op_s("topk", "encode", n, math.sqrt(0.001 * 0.01))  # halfway in log ratio
        assert mid == pytest.approx(math.sqrt(lo * hi))
        quarter = model.op_s("topk", "encode", n, 0.001 * 10**0.25)
        assert quarter == pytest.approx(lo**0.75 * hi**0.25)
        assert model.op_s("topk", "encode", n, 1e-6) == lo  # clamped below
        assert model.op_s("topk", "encode", n, 0.0) == lo
        top = model.op_s("topk", "encode", n, 0.1)
        assert model.op_s("topk", "encode", n, 1.0) == top  # and above
        assert model.op_s("topk", "encode", n, float("nan")) == top  # NaN: ratio 1
        # ratio-independent codecs ignore the ratio
        assert model.op_s("none", "encode", n, 0.001) == model.op_s("none", "encode", n, 1.0)


def test_error_feedback_adds_its_own_work_and_the_inner_decode(model):
    n, ctx = 10**5, _ctx(0.01)
    plain = model.encode_s(_topk(), n, ctx)
    ef = make_codec(BlockSpec("topk", {"error_feedback": True}))
    assert isinstance(ef, ErrorFeedback)
    extra = _t(1e-6, 3e-9, n) + model.op_s("topk", "decode", n, 0.01)
    assert model.encode_s(ef, n, ctx) == pytest.approx(plain + extra)
    # the server side of a wrapped codec is the inner codec's
    assert model.decode_s(ef, n, ctx) == model.decode_s(_topk(), n, ctx)
    assert model.encode_down_s(ef, n, ctx) == model.encode_down_s(_topk(), n, ctx)


class MomentumCorrection(Codec):
    """A stand-in DGC momentum-correction wrapper (detected by ``inner`` and its class name)."""

    name = "mc"

    def __init__(self, inner: Codec) -> None:
        self.inner = inner

    def encode(self, x: np.ndarray, ctx: CodecContext) -> Payload:
        return self.inner.encode(x, ctx)

    def decode(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        return self.inner.decode(payload, ctx)


class Renamed(MomentumCorrection):
    wrapper_name = "error_feedback"


def test_wrappers_are_detected_by_inner_and_name_and_nest(model):
    n, ctx = 10**4, _ctx(0.01)
    base = _topk()
    assert unwrap(base) == ([], base)
    mc = MomentumCorrection(base)
    assert wrapper_name(mc) == "momentum_correction"
    assert unwrap(mc) == (["momentum_correction"], base)
    assert model.encode_s(mc, n, ctx) == pytest.approx(
        model.encode_s(base, n, ctx) + _t(2e-6, 2e-9, n)
    )
    nested = ErrorFeedback(MomentumCorrection(base))
    assert unwrap(nested)[0] == ["error_feedback", "momentum_correction"]
    assert model.encode_s(nested, n, ctx) > model.encode_s(mc, n, ctx)
    assert wrapper_name(Renamed(base)) == "error_feedback"


def test_unwrap_is_kept_per_live_codec_and_forgotten_with_it():
    import gc

    from psml_core.devices import codec_cost

    base = _topk()
    wrapped = ErrorFeedback(base)
    first = unwrap(wrapped)
    again = unwrap(wrapped)
    assert first == again == (["error_feedback"], base)
    again[0].append("mutated")  # a caller's list is its own copy
    assert unwrap(wrapped) == (["error_feedback"], base)
    key = id(wrapped)
    assert key in codec_cost._UNWRAPPED  # noqa: SLF001
    del wrapped, first, again
    gc.collect()
    assert key not in codec_cost._UNWRAPPED  # noqa: SLF001


def test_unwrap_does_not_take_a_stale_entry_for_a_new_codec_at_the_same_id():
    import weakref

    from psml_core.devices import codec_cost

    plain, other = _topk(), ErrorFeedback(_topk())
    # An entry for `plain`'s id that belongs to another (a dead codec's id reused).
    codec_cost._UNWRAPPED[id(plain)] = (weakref.ref(other), ("error_feedback",), other.inner)  # noqa: SLF001
    assert unwrap(plain) == ([], plain)
    assert codec_cost._UNWRAPPED[id(plain)][0]() is plain  # noqa: SLF001


def test_unwrap_of_a_codec_without_weak_references_is_computed_each_time(monkeypatch):
    from psml_core.devices import codec_cost

    def no_weakrefs(*_: object, **__: object) -> None:
        raise TypeError("cannot create weak reference")

    monkeypatch.setattr(codec_cost.weakref, "ref", no_weakrefs)
    wrapped = ErrorFeedback(_topk())
    assert unwrap(wrapped) == (["error_feedback"], wrapped.inner)
    assert id(wrapped) not in codec_cost._UNWRAPPED  # noqa: SLF001


def test_a_wrapper_missing_from_the_table_is_a_clear_error(model):
    class Quantised(MomentumCorrection):
        pass

    with pytest.raises(ConfigError, match="wrapper 'quantised'.*psml bench calibrate"):
        model.encode_s(Quantised(_topk()), 10, _ctx(0.01))


def test_dfs_report_adds_the_candidate_evaluation(model):
    dfs = make_codec(BlockSpec("dfs", {"ratio": 0.01}))
    n = 10**5
    plain = model.encode_s(dfs, n, _ctx())
    with_report = model.encode_s(dfs, n, _ctx(dfs_report=True))
    assert with_report == _t(5e-5, 6e-9, n) and with_report > plain
    assert model.decode_s(dfs, n, _ctx(dfs_report=True)) > model.decode_s(dfs, n, _ctx())
    fixed = make_codec(BlockSpec("dfs", {"ratio": 0.01, "dynamic": False}))
    assert model.encode_s(fixed, n, _ctx(dfs_report=True)) == plain  # no reports when fixed


def test_dfs_choice_of_the_next_block_size_is_charged_once_per_round(model):
    dfs = make_codec(BlockSpec("dfs", {"ratio": 0.01}))
    n = 10**5
    assert model.round_s(dfs, n, _ctx(dfs_report=True)) == _t(3e-5, 4e-9, n)
    assert model.round_s(dfs, n, _ctx()) == 0.0  # no reports this round: nothing to choose
    fixed = make_codec(BlockSpec("dfs", {"ratio": 0.01, "dynamic": False}))
    assert model.round_s(fixed, n, _ctx(dfs_report=True)) == 0.0
    topk = make_codec(BlockSpec("topk", {"ratio": 0.01}))
    assert model.round_s(topk, n, _ctx(dfs_report=True)) == 0.0


def test_pull_mode_prices_the_codec_down_itself(model):
    c, n, ctx = _topk(), 10**4, _ctx(0.01)
    assert model.encode_down_s(c, n, ctx, pull=True) == model.encode_s(c, n, ctx)
    assert model.decode_down_s(c, n, ctx, pull=True) == model.op_s("topk", "decode", n, 0.01)
    assert model.decode_down_s(c, n, ctx) == model.op_s("topk", "decode_down", n, 0.01)


def test_a_codec_missing_from_the_table_names_the_file_and_the_fix(model):
    with pytest.raises(ConfigError) as exc:
        model.encode_s(make_codec(BlockSpec("qsgd", {})), 10, _ctx())
    msg = str(exc.value)
    assert "codec 'qsgd'" in msg and "psml bench calibrate --cost-profile test" in msg
    with pytest.raises(ConfigError, match="operation 'encode_report' of codec 'topk'"):
        model.op_s("topk", "encode_report", 10, 0.01)


def test_deterministic_and_pure(model):
    c, ctx = make_codec(BlockSpec("dfs", {})), _ctx(0.03, dfs_report=True)
    a = [model.encode_s(c, 12345, ctx) for _ in range(3)]
    b = CodecCostModel.from_device(device_from_dict(_table(), "test", source="t"))
    assert len(set(a)) == 1 and b.encode_s(c, 12345, ctx) == a[0]


@pytest.mark.parametrize("device", ["cpu-core", "v100", "a100"])
def test_shipped_tables_price_every_codec_and_dfs_reports(device):
    from psml_core.codecs import CODECS

    m = CodecCostModel.for_device(device)
    assert m.describe()["cost_profile"] == device
    for name in CODECS.names():
        params = {"theta0": 0.01} if name in ("value_bounded", "topk_matched") else {}
        c = make_codec(BlockSpec(name, params))
        ctx = _ctx(0.01)
        for fn in (m.encode_s, m.decode_s, m.encode_down_s, m.decode_down_s):
            assert fn(c, 4096, ctx) >= 0
    dfs = make_codec(BlockSpec("dfs", {"error_feedback": True}))
    assert m.encode_s(dfs, 2**20, _ctx(0.01, dfs_report=True)) > 0
    assert m.round_s(dfs, 2**20, _ctx(0.01, dfs_report=True)) > 0


def test_load_device_feeds_the_model(tmp_path):
    d = tmp_path / "devices"
    d.mkdir()
    (d / "mini.yaml").write_text(yaml.safe_dump(_table()), encoding="utf-8")
    m = CodecCostModel.for_device("mini", root=tmp_path)
    assert m.path.endswith("mini.yaml")
    assert m.op_s("none", "encode", 0) == _t(1e-5, 1e-9, SIZES[0])
    assert load_device("mini", root=tmp_path).codec_costs is m.table


def _blocked_table() -> dict:
    """DFS calibrated at B = 2 and 32 (scale 8 and 1: smaller blocks cost more)."""
    t = _table()
    t["codec_costs"]["codecs"]["dfs"] = [
        _entry(0.01, 8.0, block_size=2),
        _entry(0.1, 16.0, block_size=2),
        _entry(0.01, 1.0, block_size=32),
        _entry(0.1, 2.0, block_size=32),
    ]
    return t


def test_dfs_is_priced_at_the_block_size_it_uses():
    m = CodecCostModel.from_device(device_from_dict(_blocked_table(), "t", source="t"))
    n = 10**5
    at2, at32 = _t(8e-5, 8e-9, n), _t(1e-5, 1e-9, n)
    assert m.op_s("dfs", "encode", n, 0.01, 2) == pytest.approx(at2)
    assert m.op_s("dfs", "encode", n, 0.01, 32) == pytest.approx(at32)
    # log t linear in log B: B = 8 is halfway between 2 and 32 in log B
    assert m.op_s("dfs", "encode", n, 0.01, 8) == pytest.approx(math.sqrt(at2 * at32))
    # clamped outside; None prices the largest (DFS's default B)
    assert m.op_s("dfs", "encode", n, 0.01, 1) == pytest.approx(at2)
    assert m.op_s("dfs", "encode", n, 0.01, 256) == pytest.approx(at32)
    assert m.op_s("dfs", "encode", n, 0.01) == pytest.approx(at32)
    # ratio is interpolated within each block size as before
    mid = math.sqrt(0.01 * 0.1)
    assert m.op_s("dfs", "encode", n, mid, 2) == pytest.approx(math.sqrt(at2 * 2 * at2))
    # the engine's view: the published B (ctx) wins over the codec's block_size param
    dfs = make_codec(BlockSpec("dfs", {"ratio": 0.01, "block_size": 32}))
    assert m.encode_s(dfs, n, _ctx()) == pytest.approx(at32)
    assert m.encode_s(dfs, n, _ctx(dfs_block_size=2)) == pytest.approx(at2)
    assert m.decode_s(dfs, n, _ctx(dfs_block_size=2)) == pytest.approx(at2)


def test_omnireduce_is_priced_at_its_own_block_size():
    """A tuned block size (a recipe's tune block) is charged what that block size costs."""
    t = _blocked_table()
    t["codec_costs"]["codecs"]["omnireduce"] = [
        _entry(0.01, 8.0, block_size=2),
        _entry(0.01, 1.0, block_size=32),
    ]
    m = CodecCostModel.from_device(device_from_dict(t, "t", source="t"))
    n = 10**5
    at2, at32 = _t(8e-5, 8e-9, n), _t(1e-5, 1e-9, n)
    small = make_codec(BlockSpec("omnireduce", {"block_size": 2, "topk": True, "ratio": 0.01}))
    large = make_codec(BlockSpec("omnireduce", {"block_size": 32, "topk": True, "ratio": 0.01}))
    assert m.encode_s(small, n, _ctx()) == pytest.approx(at2)
    assert m.encode_s(large, n, _ctx()) == pytest.approx(at32)


@pytest.mark.parametrize(
    ("blocks", "match"),
    [
        ([2, None], "every entry has a block_size or none"),
        ([32, 2], "block sizes must ascend"),
        ([2, 32, 2], "block sizes must ascend"),
    ],
)
def test_block_sizes_are_checked(blocks, match):
    t = _table()
    t["codec_costs"]["codecs"]["dfs"] = [
        _entry(0.01 * (i + 1), 1.0, **({} if b is None else {"block_size": b}))
        for i, b in enumerate(blocks)
    ]
    with pytest.raises(ConfigError, match=match):
        device_from_dict(t, "t", source="t")


def test_shipped_cpu_table_prices_small_dfs_blocks_dearer():
    m = CodecCostModel.for_device("cpu-core")
    n = 2**20
    small = m.op_s("dfs", "encode", n, 0.01, 4)
    default = m.op_s("dfs", "encode", n, 0.01, 256)
    assert small > 2 * default  # ranking n / 4 blocks against n / 256
