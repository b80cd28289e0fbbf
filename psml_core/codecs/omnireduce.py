"""OmniReduce: stream only the non-zero blocks of fixed size (Fei et al., SIGCOMM 2021)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

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
from psml_core.codecs.blocks import block_maxabs, check_block_size, check_fraction
from psml_core.codecs.formats import block_count, decode_blocks, encode_blocks
from psml_core.codecs.integrity import seal, unseal
from psml_core.codecs.select import topk_indices

if TYPE_CHECKING:
    import torch

__all__ = ["OmniReduceCodec", "OmniReduceServer"]


@CODECS.register("omnireduce")
class OmniReduceCodec(Codec):
    """OmniReduce: fixed blocks of ``B`` elements, all-small blocks skipped.

    Source: Fei et al., "Efficient Sparse Collective Communication and its Application to
    Accelerate Distributed Deep Learning", SIGCOMM 2021; code sands-lab/omnireduce.

    Algorithm (as in the authors' code): cut the vector into blocks of ``B`` elements (the last
    may be shorter); a block is *zero* and skipped when every ``|x| <= threshold`` — its values
    are dropped, the decoder sees zeros — and every other block is sent whole. With
    ``threshold = 0`` the codec is lossless. With ``topk = True`` the vector is first sparsified
    element-wise to its ``k = ceil(rho n)`` largest magnitudes (ties to lower indices), the
    "Top-k + OmniReduce blocks" baseline of our DFS design (docs/methods.md, DFS): recipe
    ``topk_omnireduce`` = ``{block_size: 256, topk: true, ratio: rho}`` with DGC's momentum
    correction, the same density as
    the ``topk`` codec (which keeps ``max(1, floor(rho n))``: at most one element fewer) and the
    same correction, so the two differ only in the wire format (8 B per element vs whole
    blocks of ``4B + 4`` bytes). A parameter rather than a separate codec: the selection is one
    line in front of the unchanged block formatting, and the server side is OmniReduce's own.

    Wire format (up): one record per sent block, ascending block id: the block id as a
    little-endian uint32, then the block's ``B`` float32 values (:func:`~psml_core.codecs.formats.
    encode_blocks`), then the 4-byte CRC-32C trailer: ``wire_bytes = nz_blocks (4B + 4) + 4``,
    with ``4r + 4`` instead of ``4B + 4`` when the short last block of ``r = n - (nblk - 1) B``
    elements is sent. No other header: ``n``, ``B``, ``threshold`` and the ratio are known to
    both ends.

    Server side (:class:`OmniReduceServer`): sums the pushes block by block and returns the
    aggregated blocks of the *union* of the workers' blocks to every worker, in the same record
    format: ``|union| (4B + 4) + 4`` bytes per worker (our design's ``P |U blocks| (4B + 4)``
    summed over P workers, plus the CRC-32C trailer), a block summing to zero included, as the
    aggregator of the paper does.

    Tuning: ``B = 256`` is the authors' default (``block_size`` and ``message_size``); smaller
    blocks skip more on sparse data but pay the 4-byte id more often (overhead ``1/B``). On dense
    DNN gradients nothing is skipped (the 4-byte ids make it ``1 + 1/B`` times dense); use it on
    sparse gradients (embeddings, sparse linear models) or after ``topk``.

    Args:
        block_size: ``B``, elements per block (>= 1). Default 256.
        threshold: Blocks whose every ``|x| <= threshold`` are skipped (>= 0). Default 0.0.
        topk: Sparsify element-wise to the top ``ceil(ratio n)`` magnitudes first. Default False.
        ratio: Density for ``topk`` in (0, 1]; None = use ``ctx.ratio``. Default None.
    """

    def __init__(
        self,
        block_size: int = 256,
        threshold: float = 0.0,
        topk: bool = False,
        ratio: float | None = None,
    ) -> None:
        self.block_size = check_block_size(block_size)
        if isinstance(threshold, bool) or not isinstance(threshold, int | float):
            raise ValueError(f"threshold must be a finite number >= 0, got {threshold!r}")
        if not (math.isfinite(threshold) and threshold >= 0):
            raise ValueError(f"threshold must be a finite number >= 0, got {threshold!r}")
        self.threshold = float(threshold)
        if not isinstance(topk, bool):
            raise ValueError(f"topk must be true or false, got {topk!r}")
        self.topk = topk
        self.ratio = None if ratio is None else check_fraction(ratio, "ratio")

    def kept_elements(self, n: int, ctx: CodecContext) -> int:
        """``k = ceil(rho n)`` elements kept by the ``topk`` pre-sparsification (n if off)."""
        if not self.topk:
            return n
        rho = self.ratio if self.ratio is not None else check_fraction(ctx.ratio, "ctx.ratio")
        return min(n, math.ceil(rho * n))

    def encode(self, x: np.ndarray, ctx: CodecContext) -> Payload:
        """Send the blocks with some ``|x| > threshold``, ascending, as block records.

        A tensor is encoded on its device (:mod:`.blocks_torch`), to the same bytes.
        """
        if is_tensor(x):
            from psml_core.codecs.blocks_torch import omni_encode

            return omni_encode(self, x, ctx)
        x = check_vector(x)
        n = int(x.size)
        if self.topk:
            idx = topk_indices(x, self.kept_elements(n, ctx))
            sparse = np.zeros(n, dtype=np.float32)
            sparse[idx] = x[idx]
            x = sparse
        keep = np.flatnonzero(block_maxabs(x, self.block_size) > self.threshold)
        return Payload(self.name, n, seal(encode_blocks(x, keep, self.block_size), ctx.step, n=n))

    def decode_records(self, payload: Payload, ctx: CodecContext) -> tuple[np.ndarray, np.ndarray]:
        """Parse and validate an up payload: ``(block ids, dense float32 vector)``.

        Raises:
            ValueError: for a length no set of records has, unordered or out-of-range ids, a
                block this codec would have skipped, or more non-zeros than ``topk`` keeps.
        """
        n, b = payload.n, self.block_size
        ids, dense = decode_blocks(unseal(payload.buffer, self.name, n, ctx.step), n, b)
        if ids.size:
            nfull = n // b
            full = ids[ids < nfull]
            peak = np.zeros(ids.size, dtype=np.float32)
            if full.size:
                peak[: full.size] = np.abs(dense[: nfull * b].reshape(-1, b)[full]).max(axis=1)
            if full.size < ids.size:
                peak[-1] = np.abs(dense[nfull * b :]).max()
            if np.any(peak <= self.threshold):
                bad = int(ids[np.argmax(peak <= self.threshold)])
                raise ValueError(
                    f"block {bad} has every |x| <= threshold {self.threshold}: "
                    "omnireduce never sends such a block"
                )
        if self.topk and np.count_nonzero(dense) > self.kept_elements(n, ctx):
            raise ValueError("payload has more non-zeros than the top-k pre-sparsification keeps")
        return ids, dense

    def decode(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """The dense vector: the sent blocks' values, zeros in the skipped blocks."""
        return self.decode_records(payload, ctx)[1]

    def decode_on(self, payload: Payload, ctx: CodecContext, device: torch.device) -> torch.Tensor:
        """:meth:`decode` onto a torch ``device``, parsed there."""
        from psml_core.codecs.blocks_torch import omni_records

        return omni_records(self, payload, ctx, device)[1]

    def server(self) -> OmniReduceServer:
        """The OmniReduce aggregator: block sums returned for the union of blocks."""
        return OmniReduceServer(self)


class OmniReduceServer(ServerCodec):
    """OmniReduce's aggregator: sum per block, return the union's aggregated blocks to all.

    Down wire format: block records of the union of the blocks the workers sent in the last
    :meth:`aggregate`, ascending (the same format as the up direction); ``|union| (4B + 4) + 4``
    bytes per worker (``4r + 4`` for a short last block; + 4 for the CRC-32C trailer). If
    :meth:`encode_down` is called on a vector
    that did not come from :meth:`aggregate`, the blocks with a non-zero value are sent.

    Args:
        codec: The worker-side :class:`OmniReduceCodec`.
    """

    codec: OmniReduceCodec

    def __init__(self, codec: OmniReduceCodec) -> None:
        super().__init__(codec)
        self.union: np.ndarray | None = None

    def aggregate(self, payloads: list[Payload], ctx: CodecContext) -> np.ndarray:
        """The sum of the pushes (float32, in the order given); remembers the union of blocks."""
        n = payloads[0].n
        nblk = block_count(n, self.codec.block_size)
        out = np.zeros(n, dtype=np.float32)
        union = np.zeros(nblk, dtype=bool)
        for p in payloads:
            if p.n != n:
                raise ValueError(f"pushes of different lengths ({p.n} and {n}) cannot be summed")
            ids, dense = self.codec.decode_records(p, ctx)
            out += dense
            union[ids] = True
        self.union = union
        return out

    def aggregate_on(
        self, payloads: list[Payload], ctx: CodecContext, device: torch.device
    ) -> torch.Tensor:
        """:meth:`aggregate` on a torch ``device`` (the union kept on the host)."""
        from psml_core.codecs.blocks_torch import omni_aggregate

        return omni_aggregate(self, payloads, ctx, device)

    def encode_down(self, agg: np.ndarray, ctx: CodecContext) -> Payload:
        """Records of the aggregate's blocks in the union of the last pushes."""
        if is_tensor(agg):
            from psml_core.codecs.blocks_torch import omni_encode_down

            return omni_encode_down(self, agg, ctx)
        agg = check_vector(agg)
        n, b = int(agg.size), self.codec.block_size
        if self.union is not None and self.union.size == block_count(n, b):
            ids = np.flatnonzero(self.union)
        else:
            ids = np.flatnonzero(block_maxabs(agg, b) > 0)
        body = encode_blocks(agg, ids, b)
        return Payload(f"{self.codec.name}/down", n, seal(body, ctx.step, down=True, n=n))

    def decode_down(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """The broadcast aggregate (zeros outside the union)."""
        body = unseal(payload.buffer, f"{self.codec.name}/down", payload.n, ctx.step, down=True)
        return decode_blocks(body, payload.n, self.codec.block_size)[1]

    def decode_down_on(
        self, payload: Payload, ctx: CodecContext, device: torch.device
    ) -> torch.Tensor:
        """:meth:`decode_down` onto a torch ``device``."""
        from psml_core.codecs.blocks_torch import omni_decode_down

        return omni_decode_down(self, payload, ctx, device)
