"""Ratatouille / PF: the dynamic value-bounded filter, on push and on broadcast.

See :class:`ValueBoundedCodec` for the algorithm, the wire formats and the byte formulas, and
:class:`ValueBoundedServer` for the server's broadcast filter. The lossless Snappy size that
PF's code adds on top is :mod:`psml_core.codecs.lossless`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from numbers import Real
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from psml_core.codecs.base import (
    CODECS,
    Codec,
    CodecContext,
    Payload,
    ServerCodec,
    check_vector,
    is_tensor,
)
from psml_core.codecs.formats import decode_sparse, encode_sparse
from psml_core.codecs.integrity import seal, unseal
from psml_core.codecs.value_bounded_keys import (
    check_decoded,
    check_sent,
    decode_keys,
    filter_keys,
    key_bounds,
)

if TYPE_CHECKING:
    import torch

__all__ = ["ValueBoundedCodec", "ValueBoundedServer"]

_F32 = np.dtype("<f4")
_CHUNK = 1 << 16  # elements per pass of the element filter: its temporaries stay in cache
_MODES = ("element", "key")
_SCHEDULES = ("decay", "lr", "fixed")
_RESIDUAL_DTYPES = ("float64", "float32")


class _Filter:
    """One end's filter state: the residual carried over between steps (worker or server)."""

    def __init__(self, dtype: np.dtype) -> None:
        self.dtype = dtype
        self.residual: np.ndarray | torch.Tensor | None = None  # a tensor on the torch path
        self.last_sent = 0

    def accumulate(self, u: np.ndarray) -> np.ndarray:
        """The residual buffer, allocated at the first call (its length is then fixed)."""
        if self.residual is None:
            self.residual = np.zeros(u.size, dtype=self.dtype)
        elif not isinstance(self.residual, np.ndarray):  # a device residual (a run moved here)
            self.residual = self.residual.cpu().numpy()
        if self.residual.size != u.size:
            raise ValueError(
                f"value_bounded keeps a residual of {self.residual.size} elements but got a "
                f"vector of {u.size}: use one codec instance per vector (per worker and shard)"
            )
        return self.residual


@CODECS.register("value_bounded")
class ValueBoundedCodec(Codec):
    """The dynamic value-bounded filter of Ratatouille / PF (cap-ntu), with residual carry-over.

    Source: cap-ntu/Ratatouille ("PF"): PF-MxNet's kvstore ``Push_`` (per-key filter,
    ``theta_t = theta_0 / t^(1/3)``, 8 warm-up pushes), ps-lite's ``KVWorker::Push``
    (``theta_0 / sqrt(t)``) and PF-Caffe's element-wise ``SGDUpdate`` (constant ``tau``, whose log
    prints ``tau * lr_t / lr_0``); docs/measurement.md and the paper file
    ``config/papers/ratatouille.yaml`` give our reading. The paper's text is not available;
    this follows the code.

    Algorithm (worker, step ``ctx.step``; the residual ``r`` starts at zero)::

        v = u + r                          # u: this step's update or gradient
        element mode: keep i   iff |v_i| > theta_t
        key mode:     keep key iff mean(|v|) over the key >= theta_t   (whole keys)
        push the kept part;  r = v - sent

    The residual is the filter's own state — the PF-MxNet buffer of unsent keys, which adds new
    values to buffered ones and sends them once their mean passes the bound; the PF-Caffe history
    ``h_i := u_i / mu`` that carries a dropped update over in full. It lives inside the codec
    rather than in :class:`~psml_core.codecs.error_feedback.ErrorFeedback` because it is part of
    the filter's definition (the keep test is made on ``v = u + r``, not on ``u``), so the codec
    is complete unwrapped. Never wrap it in ``ErrorFeedback`` (``error_feedback: true``): that
    wrapper would keep the unsent part too, and it would be carried over twice
    (:attr:`carries_residual` marks codecs like this one). The invariant
    ``u + r_old == sent + r_new`` holds exactly: a kept element is sent as ``float32(v_i)`` and
    the residual keeps ``v_i - float32(v_i)`` (exact in float64, zero in float32); an unsent one
    stays in the residual whole.

    Threshold schedules, with ``t = ctx.step + 1`` (steps count from 0, iterations from 1):

    * ``"decay"``: ``theta_t = theta0 / t^(1/a)``; ``a = 3`` is the MXNet cube root, ``a = 2``
      the ps-lite square root. With ``a = 3``: ``theta0`` at t = 1 (step 0), ``theta0 / 2`` at
      t = 8, ``theta0 / 3`` at t = 27, ``theta0 / 4`` at t = 64.
    * ``"lr"``: ``theta_t = tau * lr_t / lr0``, ``lr_t = ctx.lr`` (the learning rate in force,
      which the engine must set: ``ctx.lr = 0`` gives ``theta_t = 0``, i.e. no filtering).
    * ``"fixed"``: ``theta_t = theta0`` (the fixed-threshold baseline, no decay).

    Warm-up: for ``ctx.step < warmup`` the filter is off (``theta = 0``: element mode sends every
    non-zero of ``v``, key mode every key); the first filtered step is ``ctx.step = warmup`` with
    the schedule's value at ``t = warmup + 1`` (the schedule is not restarted after warm-up).
    :meth:`threshold` gives the effective bound of a context, :meth:`theta_at` the schedule.

    The comparison is made in the residual's dtype (``theta_t`` rounded to it); key means are
    float64 sums divided by the key's size.

    Keys (key mode): a key is a tensor (or a slice of one) in MXNet's kvstore. With ``keys:
    tensors`` the keys are the model's tensors as the shard holds them (the engine tells both
    ends the layout, :meth:`~psml_core.codecs.base.Codec.set_layout`); with ``keys: fixed``
    (default) the flat vector is cut into keys of ``key_size`` elements (the last may be
    shorter). ``ctx.extra["key_bounds"]`` — an integer array ``0 = b_0 < b_1 < ... < b_K = n``,
    key j being ``[b_j, b_{j+1})`` — overrides both; both ends must see the same bounds.

    Wire format (no header; ``n``, the params and the context are known to both ends):

    * element mode: the kept entries in the cheapest sparse format of
      :func:`~psml_core.codecs.formats.encode_sparse` — COO (int32 indices, then float32
      values) while ``k <= floor(ceil(n/8) / 4)``, else bitmap (``ceil(n/8)`` presence bytes,
      then the values) while shorter than dense, else dense float32. With ``k`` kept elements:
      ``wire_bytes = 8k`` if ``k <= floor(ceil(n/8)/4)``, else ``min(ceil(n/8) + 4k, 4n)``,
      plus the 4-byte CRC-32C trailer of every sealed payload
      (:func:`~psml_core.codecs.formats.sparse_size`). Our design's "8 B per kept element, or
      bitmap if cheaper".
    * key mode: MXNet's kvstore message for dense keys (ps-lite ``KVPairs``: one uint64 key per
      sent key, its values whole): a little-endian uint32 count ``s`` of the sent keys, their
      ``s`` uint64 key numbers (ascending, into the key bounds), then the values of every sent
      key back to back as float32: ``wire_bytes = 4 + 8 s + 4 m + 4`` for ``m`` elements sent
      (the last 4: the CRC-32C trailer). Both ends know each key's size from the bounds, so no
      lengths travel; a whole tensor costs what a dense push of it costs, plus 8 bytes. The
      decoder rejects a body whose length does not match its keys, unordered or out-of-range
      key numbers, and a count beyond the keys.

    Decoders also reject non-finite values. ``ctx.ratio`` is not used: the amount sent follows
    from the bound, not from a ratio.

    Server side (:class:`ValueBoundedServer`, the "broadcast filter", steps 5–6 above): the
    aggregate is the sum of the pushes; the engine divides it by P and passes the *average*
    ``U`` to ``encode_down``, which filters ``V = U + R`` with the same ``theta_t`` and mode,
    broadcasts the kept part in the same wire format and keeps ``R = V - broadcast``. Down bytes
    per worker are the broadcast's length (total down = P x broadcast size).

    Tuning: ``theta0`` is in the units of the vector the codec is given (gradient or update);
    the PF-MxNet MNIST-MLP grid is {0, 0.2, ..., 1.2} on gradients, PF-Caffe used
    ``tau`` = 5e-5..1.8e-4 on momentum updates (AlexNet, base lr 0.01). Pick ``theta0`` so that
    the share of early ``|u|`` above ``theta_t`` is near the share of elements you can afford to
    send; the residual then sends the rest later. ``a = 2`` lowers the bound faster than
    ``a = 3``, so it sends more late in training. The same bound means different things in the
    two modes (one element's magnitude vs a key's mean magnitude): tune them separately. Key
    mode is the MXNet code's behaviour, element mode the PF-Caffe one. ``residual_dtype=
    "float32"`` matches the code's float32 buffers and encodes up to twice as fast; ``"float64"``
    keeps long runs' accumulated residuals exact to float64 rounding.

    Args:
        mode: ``"element"`` (default) or ``"key"``.
        schedule: ``"decay"`` (default), ``"lr"`` or ``"fixed"``.
        theta0: Initial bound for ``"decay"`` and ``"fixed"``, >= 0. Default 0.0: the filter is
            off (the code's ``INIT_THRESHOLD`` default), which is lossless.
        a: Converging factor of ``"decay"``, > 0. Default 3 (MXNet's cube root).
        tau: Bound of ``"lr"`` at the base learning rate, >= 0. Default 0.0 (off).
        lr0: Base learning rate of ``"lr"``, > 0; required for that schedule. Default None.
        warmup: Steps with the filter off, >= 0. Default 8 (the code's 8 warm-up pushes).
        key_size: Elements per key in key mode with ``keys: fixed``, >= 1. Default 4096.
        keys: ``"fixed"`` (default: keys of ``key_size`` elements) or ``"tensors"`` (the
            model's tensors, MXNet's keys: the engine sets the layout).
        residual_dtype: ``"float64"`` (default) or ``"float32"``, for worker and server residuals.
    """

    carries_residual: ClassVar[bool] = True  # its own residual: never wrap in ErrorFeedback

    def __init__(
        self,
        mode: str = "element",
        schedule: str = "decay",
        theta0: float = 0.0,
        a: float = 3.0,
        tau: float = 0.0,
        lr0: float | None = None,
        warmup: int = 8,
        key_size: int = 4096,
        residual_dtype: str = "float64",
        keys: str = "fixed",
    ) -> None:
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
        if schedule not in _SCHEDULES:
            raise ValueError(f"schedule must be one of {_SCHEDULES}, got {schedule!r}")
        if residual_dtype not in _RESIDUAL_DTYPES:
            raise ValueError(
                f"residual_dtype must be one of {_RESIDUAL_DTYPES}, got {residual_dtype!r}"
            )
        _check_real("theta0", theta0, "a finite number >= 0", lambda v: v >= 0)
        _check_real("a", a, "a finite number > 0", lambda v: v > 0)
        _check_real("tau", tau, "a finite number >= 0", lambda v: v >= 0)
        if lr0 is not None:
            _check_real("lr0", lr0, "a finite number > 0", lambda v: v > 0)
        elif schedule == "lr":
            raise ValueError("lr0 (the base learning rate, > 0) is required with schedule='lr'")
        _check_int("warmup", warmup, 0)
        _check_int("key_size", key_size, 1)
        if keys not in ("fixed", "tensors"):
            raise ValueError(f"keys must be 'fixed' or 'tensors', got {keys!r}")
        self.keys = keys
        self._layout: np.ndarray | None = None
        self.mode = mode
        self.schedule = schedule
        self.theta0 = float(theta0)
        self.a = float(a)
        self.tau = float(tau)
        self.lr0 = None if lr0 is None else float(lr0)
        self.warmup = int(warmup)
        self.key_size = int(key_size)
        self.residual_dtype = np.dtype(residual_dtype)
        self._state = _Filter(self.residual_dtype)

    # -- the bound ---------------------------------------------------------------------------

    def theta_at(self, t: int, lr: float = 0.0) -> float:
        """The schedule's bound at iteration ``t`` (1-based), ignoring warm-up.

        Args:
            t: Iteration number, >= 1 (``ctx.step + 1``).
            lr: Learning rate in force (used by ``"lr"`` only), finite and >= 0.
        """
        if t < 1:
            raise ValueError(f"iteration t counts from 1, got {t}")
        if self.schedule == "fixed":
            return self.theta0
        if self.schedule == "decay":
            return self.theta0 / t ** (1.0 / self.a)
        if not math.isfinite(lr) or lr < 0:
            raise ValueError(f"schedule='lr' needs a finite ctx.lr >= 0, got {lr!r}")
        assert self.lr0 is not None  # checked in __init__
        return self.tau * lr / self.lr0

    def threshold(self, ctx: CodecContext) -> float:
        """The bound in force at ``ctx``: 0.0 during warm-up, else ``theta_at(ctx.step + 1)``."""
        if ctx.step < 0:
            raise ValueError(f"ctx.step counts from 0, got {ctx.step}")
        if ctx.step < self.warmup:
            return 0.0
        return self.theta_at(ctx.step + 1, ctx.lr)

    # -- worker side -------------------------------------------------------------------------

    @property
    def residual(self) -> np.ndarray | torch.Tensor | None:
        """The worker's residual ``r`` (None before the first encode; a tensor on the device)."""
        return self._state.residual

    @property
    def last_sent(self) -> int:
        """Elements sent by the last encode (its dropped fraction is ``1 - last_sent / n``)."""
        return self._state.last_sent

    def encode(self, x: np.ndarray, ctx: CodecContext) -> Payload:
        """Filter ``x`` plus the residual; send the kept part and keep the rest.

        A tensor in element mode is filtered on its device (:mod:`.value_bounded_torch`), its
        residual kept there; key mode filters a host copy.
        """
        if is_tensor(x) and self.mode == "element":
            from psml_core.codecs.value_bounded_torch import filter_elements

            return filter_elements(self, self._state, x, ctx, down=False)
        x = check_vector(x)
        return Payload(
            self.name, int(x.size), seal(self._filter(self._state, x, ctx), ctx.step, n=int(x.size))
        )

    def reset(self) -> None:
        """Forget the carried-over residual (a new run; benchmarks of one vector)."""
        if self._state.residual is not None:
            self._state.residual[:] = 0

    def decode(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """Decode to a dense float32 vector (zeros where nothing was sent)."""
        body = unseal(payload.buffer, self.name, payload.n, ctx.step)
        return self._decode_buffer(body, payload.n, ctx)

    def decode_on(self, payload: Payload, ctx: CodecContext, device: torch.device) -> torch.Tensor:
        """:meth:`decode` onto a torch ``device`` (element mode parsed there)."""
        if self.mode != "element":
            return super().decode_on(payload, ctx, device)
        from psml_core.codecs.value_bounded_torch import decode_elements

        return decode_elements(self, payload, ctx, device)

    def server(self) -> ValueBoundedServer:
        """The broadcast filter, with its own residual."""
        return ValueBoundedServer(self)

    # -- shared machinery (worker and server) -----------------------------------------------

    def _filter(self, state: _Filter, u: np.ndarray, ctx: CodecContext) -> bytes:
        """Add ``u`` to ``state``'s residual, send what passes the bound, keep the rest."""
        theta = self.threshold(ctx)
        r = state.accumulate(u)
        n = int(u.size)
        if self.mode == "element":
            idx, vals = self._filter_elements(r, u, theta)
            state.last_sent = int(idx.size)
            return encode_sparse(n, idx, vals)
        buf, state.last_sent = filter_keys(r, u, theta, self._bounds(n, ctx))
        return buf

    def _filter_elements(
        self, r: np.ndarray, u: np.ndarray, theta: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Element mode over cache-sized chunks: returns (ascending indices, float32 values)."""
        n = int(u.size)
        th = r.dtype.type(theta)
        exact = r.dtype == np.float64
        absbuf = np.empty(min(n, _CHUNK), dtype=r.dtype)
        maskbuf = np.empty(min(n, _CHUNK), dtype=bool)
        idx_parts: list[np.ndarray] = []
        val_parts: list[np.ndarray] = []
        with np.errstate(over="ignore"):
            for start in range(0, n, _CHUNK):
                rc = r[start : start + _CHUNK]
                np.add(rc, u[start : start + _CHUNK], out=rc)
                mask = maskbuf[: rc.size]
                if th == 0:
                    np.not_equal(rc, 0, out=mask)
                else:
                    np.greater(np.abs(rc, out=absbuf[: rc.size]), th, out=mask)
                i = np.flatnonzero(mask)
                if not i.size:
                    continue
                v = rc[i]
                v32 = v.astype(_F32)
                check_sent(v32)
                rc[i] = v - v32 if exact else 0
                idx_parts.append(i + start if start else i)
                val_parts.append(v32)
        if not idx_parts:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=_F32)
        return np.concatenate(idx_parts), np.concatenate(val_parts)

    def _decode_buffer(self, buf: bytes | memoryview, n: int, ctx: CodecContext) -> np.ndarray:
        """Parse an element- or key-mode buffer of an ``n``-vector into a dense float32 vector."""
        if self.mode != "element":
            return decode_keys(buf, n, self._bounds(n, ctx))
        if len(buf) == 4 * n:
            out = np.frombuffer(buf, dtype=_F32).astype(np.float32)
            check_decoded(out)
            return out
        idx, vals = decode_sparse(buf, n)
        check_decoded(vals)
        out = np.zeros(n, dtype=np.float32)
        out[idx] = vals
        return out

    def set_layout(self, bounds: np.ndarray) -> None:
        """The model's tensors in this instance's vectors (used with ``keys: tensors``)."""
        self._layout = np.asarray(bounds, dtype=np.int64)

    def _bounds(self, n: int, ctx: CodecContext) -> np.ndarray:
        """Key boundaries: ``ctx.extra["key_bounds"]``, the tensors, or ``key_size`` elements."""
        given = ctx.extra.get("key_bounds")
        if given is None and self.keys == "tensors":
            if self._layout is None or int(self._layout[-1]) != n:
                raise ValueError(
                    "keys: tensors needs the model's tensor layout of this vector, which the "
                    "engine sets (Codec.set_layout); use keys: fixed outside a run"
                )
            given = self._layout
        return key_bounds(n, self.key_size, given)


class ValueBoundedServer(ServerCodec):
    """The broadcast filter of PF (spec steps 5–6), with the server's residual ``R``.

    Contract with the engine: :meth:`aggregate` returns the *sum* of the pushes; the engine
    divides it by P (as ``ServerShard`` does) and passes that **average** ``U`` to
    :meth:`encode_down`. The filter is applied to the average because ``theta_t`` is in the units
    of one worker's update, which an average shares and a sum does not. ``encode_down`` then
    forms ``V = U + R`` (float64, or the codec's ``residual_dtype``), keeps what passes the same
    ``theta_t`` in the same mode as the workers (same warm-up, same key bounds), returns that
    kept part in the up direction's wire format, and sets ``R = V - broadcast``. ``R`` is shared
    by all workers, so their replicas stay identical. Down bytes per worker are the payload's
    length; every worker receives the same payload (P x its size in all).

    Call ``encode_down`` once per step with the step's context: its residual advances each call.

    Args:
        codec: The worker-side codec (its params define the filter).
    """

    codec: ValueBoundedCodec

    def __init__(self, codec: ValueBoundedCodec) -> None:
        super().__init__(codec)
        self._state = _Filter(codec.residual_dtype)

    @property
    def residual(self) -> np.ndarray | torch.Tensor | None:
        """The broadcast residual ``R`` (None before the first broadcast; may be a tensor)."""
        return self._state.residual

    @property
    def last_sent(self) -> int:
        """Elements in the last broadcast."""
        return self._state.last_sent

    def encode_down(self, agg: np.ndarray, ctx: CodecContext) -> Payload:
        """Filter the averaged update ``U`` plus ``R``; broadcast the kept part."""
        if is_tensor(agg) and self.codec.mode == "element":
            from psml_core.codecs.value_bounded_torch import filter_elements

            return filter_elements(self.codec, self._state, agg, ctx, down=True)
        u = check_vector(agg)
        buf = self.codec._filter(self._state, u, ctx)
        return Payload(
            f"{self.codec.name}/down", int(u.size), seal(buf, ctx.step, down=True, n=int(u.size))
        )

    def decode_down(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """Decode a broadcast (same format as the push)."""
        body = unseal(payload.buffer, f"{self.codec.name}/down", payload.n, ctx.step, down=True)
        return self.codec._decode_buffer(body, payload.n, ctx)

    def decode_down_on(
        self, payload: Payload, ctx: CodecContext, device: torch.device
    ) -> torch.Tensor:
        """:meth:`decode_down` onto a torch ``device`` (element mode parsed there)."""
        if self.codec.mode != "element":
            return super().decode_down_on(payload, ctx, device)
        from psml_core.codecs.value_bounded_torch import decode_elements

        return decode_elements(self.codec, payload, ctx, device, down=True)

    def shared(self) -> tuple[dict[str, Any], int]:
        """Nothing is published besides the broadcast."""
        return {}, 0


def _check_real(name: str, value: Any, allowed: str, ok: Callable[[float], bool]) -> None:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    if not math.isfinite(value) or not ok(value):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")


def _check_int(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
