"""What a stateful wrapper codec (error feedback, momentum correction) hands to its inner codec."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from psml_core.codecs.base import Codec, CodecContext, Payload, ServerCodec

if TYPE_CHECKING:
    import torch

__all__ = ["WrapperCodec"]


class WrapperCodec(Codec):
    """A codec around ``self.inner``, which decodes, serves, and takes the rank and layout.

    The inner codec's own methods stay reachable through the wrapper. Subclasses set ``inner``
    and implement ``encode`` with their state (a residual, a velocity).
    """

    inner: Codec

    def decode(self, payload: Payload, ctx: CodecContext) -> np.ndarray:
        """Decoding is the inner codec's."""
        return self.inner.decode(payload, ctx)

    def decode_on(self, payload: Payload, ctx: CodecContext, device: torch.device) -> torch.Tensor:
        """Decoding onto a device is the inner codec's."""
        return self.inner.decode_on(payload, ctx, device)

    def __getattr__(self, attr: str) -> object:
        # Codec-specific methods (DFS's predicted_costs, ...) stay reachable through the wrapper.
        if attr == "inner":  # not yet set (copy/pickle): no recursion
            raise AttributeError(attr)
        return getattr(self.inner, attr)

    def server(self) -> ServerCodec:
        """The inner codec's server side (a wrapper's state lives on the workers)."""
        return self.inner.server()

    def for_worker(self, rank: int) -> None:
        """Pass the rank to the inner codec."""
        self.inner.for_worker(rank)

    def set_layout(self, bounds: np.ndarray) -> None:
        """Pass the tensor layout on to the wrapped codec."""
        self.inner.set_layout(bounds)
