"""Run a codec's host (NumPy) path and its torch path side by side, step by step.

Shared by the CPU differential tests (``test_codecs_torch*.py``: CPU tensors, so CI covers the
torch paths) and the GPU tests (``test_codecs_cuda.py``). ``run_pair`` gives both paths the same
vectors and contexts for several steps, P workers and one server, and asserts at every step:

* the same payload bytes (kept indices, ties included, and the step-bound trailer);
* the same decoded vector on the device as on the host (bit for bit: within 0 ulp);
* the same server sum, broadcast bytes, decoded broadcast and published state;
* the same codec state (residuals, velocities) afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from psml_core.codecs import CodecContext, make_codec
from psml_core.config import BlockSpec


def host(t: Any) -> np.ndarray:
    """A tensor or array as a host NumPy array."""
    return t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)


def same_bits(a: Any, b: Any, what: str) -> None:
    """Equal shapes, dtypes and values (NaN equals NaN; -0.0 equals 0.0)."""
    a, b = host(a), host(b)
    assert a.shape == b.shape, f"{what}: shapes {a.shape} != {b.shape}"
    assert a.dtype == b.dtype, f"{what}: dtypes {a.dtype} != {b.dtype}"
    differ = a != b
    if a.dtype.kind == "f":
        differ &= ~(np.isnan(a) & np.isnan(b))
    diff = np.flatnonzero(differ)
    assert diff.size == 0, (
        f"{what}: {diff.size} differ, first at {diff[0]}: {a[diff[0]]!r} != {b[diff[0]]!r}"
    )


class _Refused(Exception):
    """Both paths refused the same step with a ValueError: the run ends there."""


def both(host_call: Callable[[], Any], torch_call: Callable[[], Any], what: str) -> tuple[Any, Any]:
    """Both results, or :class:`_Refused` when both raise ValueError (one alone fails)."""
    try:
        a = host_call()
    except ValueError:
        try:
            torch_call()
        except ValueError:
            raise _Refused(what) from None
        raise AssertionError(f"{what}: the host path refused, the torch path did not") from None
    try:
        b = torch_call()
    except ValueError as exc:
        raise AssertionError(f"{what}: the torch path refused, the host did not: {exc}") from None
    return a, b


def _state(codec: Any) -> dict[str, Any]:
    """A codec's carried state (residuals, velocities), unwrapped."""
    out = {}
    for obj in (codec, getattr(codec, "inner", None)):
        if obj is None:
            continue
        for attr in ("residual", "velocity", "accumulated"):
            value = getattr(obj, attr, None)
            if isinstance(value, np.ndarray | torch.Tensor):
                out[f"{type(obj).__name__}.{attr}"] = value
        st = getattr(obj, "_state", None)
        if st is not None and not callable(st) and getattr(st, "residual", None) is not None:
            out[f"{type(obj).__name__}._state"] = st.residual
    return out


def run_pair(*args: Any, **kwargs: Any) -> None:
    """:func:`_run_pair`; a step both paths refuse (an overflow, say) ends the comparison."""
    with contextlib.suppress(_Refused):
        _run_pair(*args, **kwargs)


def _run_pair(
    name: str,
    params: dict[str, Any],
    vectors: Sequence[Sequence[np.ndarray]],
    ctx_of: Callable[[int], CodecContext],
    device: torch.device,
    momentum: float = 0.0,
    server: bool = True,
) -> None:
    """Drive the host and the torch path over ``vectors[step][worker]`` and compare everything.

    Args:
        name: Codec name.
        params: Its recipe params (wrappers included).
        vectors: Per step, one float32 vector per worker (all of one length).
        ctx_of: The step's context (the server's published state is merged into ``extra``).
        device: Where the torch path runs.
        momentum: Momentum of a momentum-correction wrapper.
        server: Also compare the server side (aggregate, broadcast, shared state).
    """
    spec = BlockSpec(name, params)
    workers = len(vectors[0])
    np_codecs = [make_codec(spec, momentum) for _ in range(workers)]
    t_codecs = [make_codec(spec, momentum) for _ in range(workers)]
    for p in range(workers):
        np_codecs[p].for_worker(p)
        t_codecs[p].for_worker(p)
    np_server, t_server = make_codec(spec).server(), make_codec(spec).server()
    extra: dict[str, Any] = {}
    for step, xs in enumerate(vectors):
        base = ctx_of(step)
        ctx = CodecContext(base.step, base.ratio, base.seed, base.lr, {**base.extra, **extra})
        np_pl, t_pl = [], []
        for p, x in enumerate(xs):
            a, b = both(
                lambda p=p, x=x, c=ctx: np_codecs[p].encode(x, c),
                lambda p=p, x=x, c=ctx: t_codecs[p].encode(
                    torch.from_numpy(x.copy()).to(device), c
                ),
                f"{name} step {step} worker {p}: encode",
            )
            assert a.buffer == b.buffer, f"{name} step {step} worker {p}: payload bytes differ"
            assert a.codec == b.codec and a.n == b.n
            same_bits(np_codecs[p].decode(a, ctx), t_codecs[p].decode_on(b, ctx, device), "decode")
            sa, sb = _state(np_codecs[p]), _state(t_codecs[p])
            assert sa.keys() == sb.keys(), f"{name}: state {sa.keys()} vs {sb.keys()}"
            for key in sa:
                same_bits(sa[key], sb[key], f"{name} step {step} worker {p} {key}")
            np_pl.append(a)
            t_pl.append(b)
        if not server:
            continue
        with np.errstate(over="ignore"):
            agg = np_server.aggregate(np_pl, ctx) / np.float32(workers)
        agg_t = t_server.aggregate_on(t_pl, ctx, device) / torch.tensor(
            float(workers), dtype=torch.float32, device=device
        )
        same_bits(agg, agg_t, f"{name} step {step}: aggregate")
        down, down_t = both(
            lambda a=agg, c=ctx: np_server.encode_down(a, c),
            lambda a=agg_t, c=ctx: t_server.encode_down(a, c),
            f"{name} step {step}: broadcast",
        )
        assert down.buffer == down_t.buffer, f"{name} step {step}: broadcast bytes differ"
        same_bits(
            np_server.decode_down(down, ctx),
            t_server.decode_down_on(down_t, ctx, device),
            f"{name} step {step}: decoded broadcast",
        )
        shared, shared_t = np_server.shared(), t_server.shared()
        assert shared[1] == shared_t[1] and shared[0].keys() == shared_t[0].keys()
        for key in shared[0]:
            same_bits(np.asarray(shared[0][key]), np.asarray(shared_t[0][key]), key)
        extra = shared[0]
