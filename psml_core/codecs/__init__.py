"""Codecs: what goes on the wire. Each has an exact wire format; see :mod:`.base`."""

from psml_core.codecs.base import CODECS, Codec, CodecContext, Payload, make_codec
from psml_core.codecs.dense import DenseCodec

__all__ = ["CODECS", "Codec", "CodecContext", "DenseCodec", "Payload", "make_codec"]
