"""DGC's momentum correction and factor masking: the equations, the wiring, the bad combinations.

The wrapper is checked step by step against a plain NumPy transcription of DGC's equations
(Lin et al., ICLR 2018, section 3.2) around element top-k and DFS's block selection, and by
property (conservation in float64, masked velocity). ``staged_job`` must move the momentum: the
workers' codecs get the workload's, every optimizer applying the averaged update gets none.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sealing import TRAILER

from psml_core.codecs import (
    CODECS,
    CodecContext,
    ErrorFeedback,
    MomentumCorrection,
    TopKCodec,
    make_codec,
)
from psml_core.codecs.dfs import KEY_BLOCK, KEY_REPORT, DFSCodec
from psml_core.codecs.omnireduce import OmniReduceCodec
from psml_core.codecs.sparsify import keep_count
from psml_core.config import BlockSpec, Experiment
from psml_core.errors import ConfigError
from psml_core.recipes import load_methods

M = 0.9

# ---------------------------------------------------------------- the NumPy reference

Select = Callable[[np.ndarray], np.ndarray]


def select_topk(rho: float) -> Select:
    """Element top-k: the ``max(1, floor(rho n))`` largest ``|v|``, ties to the lower index."""

    def select(v32: np.ndarray) -> np.ndarray:
        n = v32.size
        order = np.lexsort((np.arange(n), -np.abs(v32)))
        return np.sort(order[: keep_count(n, rho)])

    return select


def select_blocks(rho: float, b: int) -> Select:
    """DFS at ``lam = 0``, fixed ``B``: the ``ceil(rho n / B)`` blocks of largest energy
    (float64 sums of squares; ties to the lower block), as element indices."""

    def select(v32: np.ndarray) -> np.ndarray:
        n = v32.size
        nblk = -(-n // b)
        k = 1
        while k * b < rho * n and k < nblk:  # the fewest blocks with k B >= rho n
            k += 1
        e = np.array(
            [np.sum(v32[i * b : (i + 1) * b].astype(np.float64) ** 2) for i in range(nblk)]
        )
        blocks = np.lexsort((np.arange(nblk), -e))[:k]
        return np.sort(np.concatenate([np.arange(i * b, min(n, (i + 1) * b)) for i in blocks]))

    return select


def reference_dgc(
    xs: list[np.ndarray], m: float, select: Select
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """DGC per step, in float64: ``(sent, v, u)`` after each step.

    ``u <- m u + g;  v <- v + u;  sent = the kept coordinates of float32(v);  v <- v - sent;
    u[kept] <- 0``.
    """
    n = xs[0].size
    u, v = np.zeros(n), np.zeros(n)
    out = []
    for g in xs:
        u = m * u + g.astype(np.float64)
        v = v + u
        v32 = v.astype(np.float32)
        ids = select(v32)
        sent = np.zeros(n, dtype=np.float32)
        sent[ids] = v32[ids]
        v = v - sent.astype(np.float64)
        u[ids] = 0.0
        out.append((sent, v.copy(), u.copy()))
    return out


def stream(n: int, steps: int, seed: int) -> list[np.ndarray]:
    """Float32 gradients: a persistent mean plus heavy-tailed noise (the residual matters)."""
    rng = np.random.default_rng(seed)
    mean = rng.standard_t(3, n) * 0.2
    return [(mean + rng.standard_t(3, n)).astype(np.float32) for _ in range(steps)]


@pytest.mark.parametrize("m", [0.0, 0.5, 0.9])
@pytest.mark.parametrize(
    ("inner", "select"),
    [
        (lambda: TopKCodec(ratio=0.01), select_topk(0.01)),
        (lambda: TopKCodec(ratio=0.05), select_topk(0.05)),
        (
            lambda: DFSCodec(ratio=0.01, lam=0.0, block_size=8, dynamic=False),
            select_blocks(0.01, 8),
        ),
        (
            lambda: DFSCodec(ratio=0.02, lam=0.0, block_size=16, dynamic=False),
            select_blocks(0.02, 16),
        ),
        (
            lambda: DFSCodec(ratio=0.01, lam=0.0, block_size=1, dynamic=False),
            select_blocks(0.01, 1),
        ),
    ],
    ids=["topk-1%", "topk-5%", "dfs-B8-1%", "dfs-B16-2%", "dfs-B1"],
)
def test_each_step_matches_the_dgc_equations(inner, select, m: float) -> None:
    """Sent vector, accumulation v and velocity u equal the NumPy reference exactly, every step."""
    n = 2153  # a small-tier shard: B does not divide it (a short last block)
    xs = stream(n, 40, seed=int(100 * m) + 1)
    mc = MomentumCorrection(inner(), momentum=m)
    for t, (x, (sent, v, u)) in enumerate(zip(xs, reference_dgc(xs, m, select), strict=True)):
        ctx = CodecContext(step=t)
        got = mc.decode(mc.encode(x, ctx), ctx)
        np.testing.assert_array_equal(got, sent, err_msg=f"step {t}")
        np.testing.assert_array_equal(mc.accumulated, v, err_msg=f"step {t}")
        np.testing.assert_array_equal(mc.velocity, u, err_msg=f"step {t}")


def test_momentum_zero_is_error_feedback() -> None:
    """``m = 0``: ``u = g`` (masked where sent, replaced next step), so ``v`` is EF's residual."""
    xs = stream(1000, 30, seed=5)
    mc = MomentumCorrection(TopKCodec(ratio=0.01), momentum=0.0)
    ef = ErrorFeedback(TopKCodec(ratio=0.01))
    for t, x in enumerate(xs):
        ctx = CodecContext(step=t)
        assert mc.encode(x, ctx).buffer == ef.encode(x, ctx).buffer
        np.testing.assert_array_equal(mc.accumulated, ef.residual)


def test_compensated_is_what_the_next_encode_compresses() -> None:
    """``compensated(x)`` is exactly the float32 vector the inner codec receives, without
    changing the state; before the first encode it is ``x``."""
    seen: list[np.ndarray] = []

    class Spy(TopKCodec):
        def encode(self, x, ctx):
            seen.append(x.copy())
            return super().encode(x, ctx)

    mc = MomentumCorrection(Spy(ratio=0.02), momentum=M)
    for t, x in enumerate(stream(500, 12, seed=3)):
        before = (None if mc.velocity is None else mc.velocity.copy(), mc.accumulated)
        comp = mc.compensated(x)
        assert comp.dtype == np.float32
        if before[0] is not None:
            np.testing.assert_array_equal(mc.velocity, before[0])  # untouched
        mc.encode(x, CodecContext(step=t))
        np.testing.assert_array_equal(seen[-1], comp)


def test_dfs_cost_report_sees_the_corrected_vector() -> None:
    """Dynamic DFS: the report leading a push is ``predicted_costs(compensated(g))``."""
    n = 3000
    mc = make_codec(
        BlockSpec("dfs", {"ratio": 0.01, "lam": 0.0, "candidates": [4, 8, 16, 32],
                          "block_size": 16, "momentum_correction": True}),
        momentum=M,
    )  # fmt: skip
    assert isinstance(mc, MomentumCorrection) and mc.momentum == M
    for t, g in enumerate(stream(n, 10, seed=8)):
        ctx = CodecContext(step=t, extra={KEY_BLOCK: 8, KEY_REPORT: t % 2 == 1})
        report = mc.predicted_costs(mc.compensated(g), ctx)  # reached through the wrapper
        payload = mc.encode(g, ctx)
        if t % 2:
            assert payload.buffer[:16] == report.to_bytes()
            assert payload.wire_bytes == 16 + report.costs[8] + TRAILER
        else:
            assert payload.wire_bytes == report.costs[8] + TRAILER


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from(["topk", "dfs", "omnireduce"]),
    st.integers(1, 400),
    st.integers(1, 10),
    st.floats(0.001, 1.0),
    st.sampled_from([0.0, 0.5, 0.9, 0.99]),
    st.integers(0, 2**32 - 1),
)
def test_conservation_and_masking_property(
    name: str, n: int, steps: int, ratio: float, m: float, seed: int
) -> None:
    """Per step, in float64: ``v_old + (m u_old + g) == sent + v_new`` exactly; ``u_new`` is 0
    where something was sent and ``m u_old + g`` elsewhere."""
    rng = np.random.default_rng(seed)
    inner = {
        "topk": lambda: TopKCodec(ratio=ratio),
        "dfs": lambda: DFSCodec(ratio=ratio, lam=0.0, block_size=int(rng.integers(1, 40)),
                                dynamic=False),
        "omnireduce": lambda: OmniReduceCodec(block_size=16, topk=True, ratio=ratio),
    }[name]()  # fmt: skip
    mc = MomentumCorrection(inner, momentum=m)
    u_old, v_old = np.zeros(n), np.zeros(n)
    for t in range(steps):
        g = (rng.standard_normal(n) * rng.choice([1e-4, 1.0, 1e3])).astype(np.float32)
        g[rng.random(n) < 0.2] = 0.0  # dead coordinates, as in the digits MLP's first layer
        ctx = CodecContext(step=t)
        sent = mc.decode(mc.encode(g, ctx), ctx).astype(np.float64)
        u = m * u_old + g.astype(np.float64)
        np.testing.assert_array_equal(v_old + u, sent + mc.accumulated)
        hit = sent != 0
        assert not mc.velocity[hit].any()
        np.testing.assert_array_equal(mc.velocity[~hit], u[~hit])
        u_old, v_old = mc.velocity.copy(), mc.accumulated.copy()


def test_wrapper_delegates_and_survives_pickle() -> None:
    """Name, server side, rank and codec-specific methods are the inner codec's; a pickled or
    copied wrapper (checkpoints) carries its state."""
    mc = MomentumCorrection(DFSCodec(ratio=0.01, block_size=8, dynamic=False), momentum=M)
    assert mc.name == "dfs" and type(mc.server()).__name__ == "DFSServer"
    assert mc.budget(2153, 8, CodecContext()) == 3  # DFSCodec.budget through __getattr__
    mc.for_worker(3)
    for t, g in enumerate(stream(2153, 5, seed=2)):
        mc.encode(g, CodecContext(step=t))
    for clone in (pickle.loads(pickle.dumps(mc)), copy.deepcopy(mc)):
        np.testing.assert_array_equal(clone.velocity, mc.velocity)
        np.testing.assert_array_equal(clone.accumulated, mc.accumulated)
        assert clone.momentum == M and clone.inner.block_size == 8
    assert "momentum_correction" not in CODECS.names()  # a wrapper, not a codec


# ---------------------------------------------------------------- make_codec and bad combinations


def test_make_codec_wraps_with_the_given_momentum() -> None:
    spec = BlockSpec("topk", {"ratio": 0.01, "momentum_correction": True})
    validated = make_codec(spec)  # config validation: no momentum given
    assert isinstance(validated, MomentumCorrection) and validated.momentum == 0.0
    built = make_codec(spec, momentum=0.9)
    assert isinstance(built.inner, TopKCodec) and built.momentum == 0.9
    plain = make_codec(BlockSpec("topk", {"ratio": 0.01}), momentum=0.9)
    assert isinstance(plain, TopKCodec)  # momentum is ignored without the switch


@pytest.mark.parametrize(
    ("spec", "momentum", "match"),
    [
        (
            BlockSpec("topk", {"ratio": 0.01, "error_feedback": True, "momentum_correction": True}),
            0.9,
            "accumulates what was not sent itself",
        ),
        (
            BlockSpec("dfs", {"ratio": 0.01, "error_feedback": True, "momentum_correction": True}),
            0.0,
            "remove error_feedback",
        ),
        (
            BlockSpec("value_bounded", {"momentum_correction": True}),
            0.9,
            "keeps its own residual; momentum_correction",
        ),
        (BlockSpec("topk", {"momentum_correction": "yes"}), 0.9, "true or false"),
        (BlockSpec("topk", {"momentum_correction": True}), 1.0, r"momentum must be .* \[0, 1\)"),
        (BlockSpec("topk", {"momentum_correction": True}), -0.1, r"\[0, 1\)"),
    ],
)
def test_bad_combinations_are_config_errors(spec: BlockSpec, momentum: float, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        make_codec(spec, momentum=momentum)


def test_recipes_with_momentum_correction_validate() -> None:
    """The dfs experiment's recipes set the switch and pass config validation (no momentum)."""
    methods = load_methods()
    for name in ("dfs", "dfs_fixed_b", "topk_mc", "topk_omnireduce"):
        codec = methods[name].codec
        assert codec.params.get("momentum_correction") is True, name
        assert "error_feedback" not in codec.params, name
        assert codec.params["ratio"] == 0.01, name
        assert isinstance(make_codec(codec), MomentumCorrection)
    assert methods["topk_ef"].codec.params == {"ratio": 0.01, "error_feedback": True}


# ---------------------------------------------------------------- staged_job moves the momentum


def _job(smoke: Experiment, prepared: dict[str, Path], recipe, **wl):
    from psml_core.data.store import load_prepared
    from psml_core.engine import staged_job

    run = smoke.run("digits_mlp", "dense_bsp", "dc_10g", smoke.seeds[0])
    spec = dataclasses.replace(
        run, method=recipe, workload=dataclasses.replace(run.workload, iterations=2, **wl)
    )
    return staged_job(spec, load_prepared(prepared["digits"]))


@pytest.mark.parametrize("name", ["dfs", "topk_mc"])
def test_build_job_moves_the_momentum_to_the_workers(
    name: str, smoke: Experiment, prepared: dict[str, Path]
) -> None:
    job = _job(smoke, prepared, load_methods()[name])
    assert job.spec.workload.momentum == 0.9
    for w in job.workers:
        assert all(isinstance(c, MomentumCorrection) and c.momentum == 0.9 for c in w.codecs)
        assert w.optimizers is not None and all(o.momentum == 0 for o in w.optimizers)
    assert all(s.optimizer.momentum == 0 for s in job.shards)
    # the server's copy of the codec needs no momentum state; its server side is DFS's/top-k's
    assert all(s.codec_up.momentum == 0.0 for s in job.shards)
    plain = _job(smoke, prepared, load_methods()["topk_ef"])
    assert all(s.optimizer.momentum == np.float32(0.9) for s in plain.shards)
    assert all(o.momentum == np.float32(0.9) for o in plain.workers[0].optimizers)


def test_build_job_without_optimizer_momentum_moves_nothing(
    smoke: Experiment, prepared: dict[str, Path]
) -> None:
    """AdaGrad has no momentum: the workers' correction runs with m = 0 (error feedback)."""
    job = _job(smoke, prepared, load_methods()["topk_mc"], optimizer="adagrad")
    assert all(c.momentum == 0.0 for w in job.workers for c in w.codecs)


def test_build_job_refuses_momentum_correction_where_it_cannot_work(
    smoke: Experiment, prepared: dict[str, Path]
) -> None:
    methods = load_methods()
    mc = {"ratio": 0.01, "momentum_correction": True}
    pcp = dataclasses.replace(methods["pcp"], codec=BlockSpec("topk", mc))
    with pytest.raises(ConfigError, match="local optimizer steps"):
        _job(smoke, prepared, pcp)
    down = dataclasses.replace(methods["dense_bsp"], codec_down=BlockSpec("topk", mc))
    with pytest.raises(ConfigError, match="remove it from codec_down"):
        _job(smoke, prepared, down)
    moving = dataclasses.replace(methods["jpdc_dynamic"], codec=BlockSpec("topk", mc))
    with pytest.raises(ConfigError, match="placement 'dynamic'.*momentum_correction"):
        _job(smoke, prepared, moving)
