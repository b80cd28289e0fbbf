"""DGC's sampled threshold with refinement (Lin et al., ICLR 2018; GRACE's form).

Shared rules (keep count, ratio, wire, server): :mod:`.sparsify`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from psml_core.codecs.base import CODECS, Codec, CodecContext, Payload, check_vector, is_tensor
from psml_core.codecs.formats import encode_sparse
from psml_core.codecs.integrity import seal
from psml_core.codecs.sparsify import (
    F32_MAX,
    all_finite_nonzero,
    check_ratio,
    keep_count,
    magnitude_mask,
    ratio_in_force,
    sparse_dense,
    step_rng,
)

if TYPE_CHECKING:
    import torch

__all__ = ["DGCCodec"]


@CODECS.register("dgc")
class DGCCodec(Codec):
    """Deep Gradient Compression's sampled threshold (Lin et al., ICLR 2018; GRACE ``dgc``).

    Algorithm, with ``k = max(1, floor(n * ratio))`` the target count:

    1. Sample ``s = max(1, floor(n * sample_fraction))`` elements uniformly with replacement
       (indices from a generator seeded by ``(ctx.seed, ctx.step)``, as GRACE's uniform sample,
       so the encoding is deterministic); the threshold ``t`` is the ``max(1, floor(s * ratio))``-th
       largest magnitude of the sample.
    2. Count ``c = #{|x| >= t}``. Up to ``max_rounds`` times: if ``c > upper * k``, ``t *= upper``;
       elif ``c < lower * k``, ``t *= lower``; else stop; recount. Threshold arithmetic is in
       float32.
    3. Send every element with ``|x| >= t`` (all of them: DGC is approximate top-k), except that
       zeros are never sent (this matters only when ``t`` is 0, i.e. the sampled magnitudes are
       mostly zero; GRACE would then send the whole vector).

    When refinement converges the kept count is within ``[lower * k, upper * k]``. Measured on
    1M-element normal, Laplace and Student-t(3) vectors, 20 seeds each: at ratios 0.1 and 0.01 the
    sampled threshold lands in the band at once (0 rounds); at 0.001 (10 sampled elements above
    it) half the draws need 1-10 rounds and 2 of 20 normal draws end outside the band. It fails
    to converge when the x1.3 / x0.7 steps jump over the band every round — light or bounded
    tails (uniform magnitudes oscillate between "nothing" and "too much"), many equal
    magnitudes, a noisy first guess — and ``max_rounds`` runs out: then the last threshold's
    elements are sent whatever their number, as in GRACE: possibly far more than ``k`` (all
    non-zeros when ``t`` is 0) or far fewer (even none). Error feedback keeps what was not sent.

    Wire format: :func:`~psml_core.codecs.formats.encode_sparse` of the ``m`` kept elements:
    ``wire_bytes = sparse_size(n, m) + 4``, the 4 being the CRC-32C trailer and ``sparse_size``
    ``8m`` (COO) while ``m <= floor(ceil(n/8) / 4)``, else ``min(ceil(n/8) + 4m, 4n)``. ``m`` is
    data dependent; the decoder rejects zero or non-finite kept values.

    Server side: the default lossless union of the workers' supports.

    Tuning: DGC relies on error feedback (its paper adds momentum correction and local gradient
    clipping, not implemented here); ``sample_fraction`` trades selection cost against the
    accuracy of the first threshold — below ~1000 sampled elements at small ratios the first
    guess is noisy and refinement does the work.

    Args:
        ratio: Target fraction of elements kept, in (0, 1]; ``None`` (default) = use ``ctx.ratio``.
        sample_fraction: Fraction of elements sampled for the threshold, in (0, 1] (default 0.01).
        max_rounds: Refinement rounds, an integer >= 0 (default 10).
        upper: Count band's upper factor and the threshold's raise factor, > 1 (default 1.3).
        lower: Count band's lower factor and the threshold's cut factor, in (0, 1) (default 0.7).
    """

    def __init__(
        self,
        ratio: float | None = None,
        sample_fraction: float = 0.01,
        max_rounds: int = 10,
        upper: float = 1.3,
        lower: float = 0.7,
    ) -> None:
        self.ratio = None if ratio is None else check_ratio(ratio, "ratio")
        self.sample_fraction = check_ratio(sample_fraction, "sample_fraction")
        if isinstance(max_rounds, bool) or not isinstance(max_rounds, int | np.integer):
            raise ValueError(f"max_rounds must be an integer >= 0, got {max_rounds!r}")
        if max_rounds < 0:
            raise ValueError(f"max_rounds must be an integer >= 0, got {max_rounds!r}")
        self.max_rounds = int(max_rounds)
        try:
            up, lo = float(upper), float(lower)
        except (TypeError, ValueError):
            raise ValueError(
                f"upper must be a number > 1 and lower a number in (0, 1), got {upper!r}, {lower!r}"
            ) from None
        if not (math.isfinite(up) and up > 1.0):
            raise ValueError(f"upper must be a finite number > 1, got {upper!r}")
        if not 0.0 < lo < 1.0:
            raise ValueError(f"lower must be in (0, 1), got {lower!r}")
        self.upper, self.lower = up, lo

    def select(
        self, x: np.ndarray, k: int, ratio: float, ctx: CodecContext
    ) -> tuple[np.float32, np.ndarray]:
        """Refine the sampled threshold for a non-empty float32 ``x`` and target count ``k``.

        Returns:
            ``(t, mask)``: the final threshold and the mask of the elements sent (``|x| >= t``,
            or ``|x| > 0`` when ``t`` is 0).
        """
        n = int(x.size)
        s = max(1, math.floor(n * self.sample_fraction))
        sample = np.abs(x[step_rng(ctx, "dgc").integers(0, n, s)])
        ks = min(s, max(1, math.floor(s * ratio)))
        t = np.float32(np.partition(sample, s - ks)[s - ks])
        up, lo = np.float32(self.upper), np.float32(self.lower)
        mask = magnitude_mask(x, t, strict=False)
        c = int(np.count_nonzero(mask))
        for _ in range(self.max_rounds):
            if c > self.upper * k:
                with np.errstate(over="ignore"):
                    new = np.float32(min(t * up, F32_MAX))
            elif c < self.lower * k:
                new = np.float32(t * lo)
            else:
                break
            if new == t:  # 0, or the largest float32: the count cannot move any more
                break
            t = new
            magnitude_mask(x, t, strict=False, out=mask)
            c = int(np.count_nonzero(mask))
        if t == 0:
            magnitude_mask(x, t, strict=True, out=mask)
        return t, mask

    def encode(self, x: np.ndarray, ctx: CodecContext) -> Payload:
        """Send the elements at or above the refined sampled threshold (on a tensor's device)."""
        if is_tensor(x):
            from psml_core.codecs.sparsify_torch import encode_dgc

            return encode_dgc(self, x, ctx)
        x = check_vector(x)
        n = int(x.size)
        if n == 0:
            return Payload(self.name, 0, seal(b"", ctx.step, n=0))
        ratio = ratio_in_force(self.ratio, ctx)
        _, mask = self.select(x, keep_count(n, ratio), ratio, ctx)
        idx = np.flatnonzero(mask)
        return Payload(self.name, n, seal(encode_sparse(n, idx, x[idx]), ctx.step, n=n))

    def decode(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """The kept elements in place, zeros elsewhere."""
        return sparse_dense(payload, ctx, "dgc", all_finite_nonzero)

    def decode_on(self, payload: Payload, ctx: CodecContext, device: torch.device) -> torch.Tensor:
        """:meth:`decode` onto a torch ``device``, parsed there."""
        from psml_core.codecs.sparsify_torch import decode_dgc

        return decode_dgc(self, payload, ctx, device)
