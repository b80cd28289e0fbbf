"""Codecs: what goes on the wire, with exact wire formats. See :mod:`.base` and :mod:`.formats`.

Importing this package registers every codec in :data:`CODECS`.
"""

from psml_core.codecs.base import (
    CODECS,
    Codec,
    CodecContext,
    Payload,
    ServerCodec,
    check_vector,
    make_codec,
)
from psml_core.codecs.dense import DenseCodec
from psml_core.codecs.error_feedback import ErrorFeedback

__all__ = [
    "CODECS",
    "Codec",
    "CodecContext",
    "DenseCodec",
    "ErrorFeedback",
    "Payload",
    "ServerCodec",
    "check_vector",
    "make_codec",
]
