"""The Codec ABC, its payload and its registry.

A codec turns a dense float vector into one contiguous byte buffer (its wire format) and back.
``Payload.wire_bytes`` is the buffer's length, so every byte count in psml is the size of what
would really be sent. The server side of a codec (``aggregate``) is part of the codec, so that
down-direction bytes are exact too.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from psml_core.config import BlockSpec
from psml_core.errors import ConfigError
from psml_core.registry import Registry

__all__ = ["CODECS", "Codec", "CodecContext", "Payload", "make_codec"]


@dataclass(frozen=True)
class Payload:
    """An encoded message.

    Attributes:
        codec: Name of the codec that wrote it.
        n: Number of elements of the dense vector it encodes.
        buffer: The exact bytes on the wire.
    """

    codec: str
    n: int
    buffer: bytes

    @property
    def wire_bytes(self) -> int:
        """Exact size on the wire: the buffer's length."""
        return len(self.buffer)


@dataclass
class CodecContext:
    """What a codec may know besides the vector.

    Attributes:
        step: Training iteration.
        ratio: Compression ratio in force (from the controller); 1.0 = dense.
        seed: Seed shared by all workers for this step (random-k needs it).
        extra: Codec-specific shared state (e.g. the previous aggregate's block mask for DFS).
    """

    step: int = 0
    ratio: float = 1.0
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class Codec(ABC):
    """Encodes dense float32 vectors into an exact wire format and decodes them back."""

    name: ClassVar[str]

    @abstractmethod
    def encode(self, x: np.ndarray, ctx: CodecContext) -> Payload:
        """Encode a 1-D vector; non-finite values are rejected with a ValueError."""

    @abstractmethod
    def decode(self, payload: Payload) -> np.ndarray:
        """Decode a payload to a dense float32 vector of length ``payload.n``."""

    def aggregate(self, payloads: list[Payload]) -> np.ndarray:
        """Server side: the sum of the decoded payloads (float32)."""
        out = np.zeros(payloads[0].n, dtype=np.float32)
        for p in payloads:
            out += self.decode(p)
        return out

    @staticmethod
    def _check(x: np.ndarray) -> np.ndarray:
        if x.ndim != 1:
            raise ValueError(f"codecs encode 1-D vectors, got shape {x.shape}")
        if not np.all(np.isfinite(x)):
            bad = int(np.flatnonzero(~np.isfinite(x))[0])
            raise ValueError(f"cannot encode a non-finite value ({x[bad]!r} at index {bad})")
        return x


CODECS: Registry[type[Codec]] = Registry("codec")


def make_codec(spec: BlockSpec) -> Codec:
    """Instantiate a codec from its recipe block; unknown parameters are a ConfigError."""
    cls = CODECS.get(spec.name, where="codec.name")
    try:
        return cls(**spec.params)
    except TypeError as exc:
        raise ConfigError(f"codec {spec.name!r}: bad params {spec.params!r} ({exc})") from None
