"""Codecs: what goes on the wire, with exact wire formats. See :mod:`.base` and :mod:`.formats`.

Importing this package registers every codec in :data:`CODECS`:

==============  =====================================================  =========================
name            what                                                   up bytes (n elements)
==============  =====================================================  =========================
none            dense fp32                                             4n
fp16            IEEE half precision                                    2n
topk            exact top-k by magnitude                               sparse(n, k)
randomk         k shared-seed random indices (values only)             4k
threshold       |x| > threshold                                        sparse(n, m)
dgc             DGC sampled threshold with refinement                  sparse(n, m)
qsgd            QSGD stochastic rounding to s levels                   4 + ceil(n b / 8)
signsgd         sign, majority vote at the server                      ceil(n / 8)
efsignsgd       scaled sign (EF-signSGD)                               4 + ceil(n / 8)
omnireduce      skip all-small blocks of B                             blocks x (4B + 4)
dfs             DFS block sparsification, dynamic B                    blocks x (4B + 4)
value_bounded   Ratatouille value-bounded filter                       sparse(n, m) or 12 m
topk_matched    top-k, k = what a value-bounded filter would send       sparse(n, k)
kv              PS-lite key/value entries (uint64 key, float32 value)  12 m
==============  =====================================================  =========================

``sparse(n, k)`` is the cheapest of COO (8k), bitmap (ceil(n/8) + 4k) and dense (4n); see
:mod:`.formats`. Every variable-length payload (topk, threshold, dgc, omnireduce, dfs,
value_bounded, topk_matched, kv, and the default broadcast) and random-k's (whose values land
on indices regenerated from the step, the shared seed and the element count) is 4 bytes longer
than its row says: its CRC-32C trailer, bound to the message's step and element count
(:mod:`.integrity`; random-k's also to its seed), so that a payload replayed from another step,
or decoded with another count or seed, is refused. Any codec can be wrapped in
:class:`ErrorFeedback` (``error_feedback: true``);
a sparsifier in :class:`MomentumCorrection` instead (``momentum_correction: true``: DGC's
momentum correction and factor masking, with the workload's momentum moved onto the workers).
"""

from psml_core.codecs.base import (
    CODECS,
    Codec,
    CodecContext,
    Payload,
    ServerCodec,
    check_vector,
)
from psml_core.codecs.build import make_codec
from psml_core.codecs.dense import DenseCodec
from psml_core.codecs.dfs import CostReport, DFSCodec, DFSServer
from psml_core.codecs.dgc import DGCCodec
from psml_core.codecs.error_feedback import ErrorFeedback
from psml_core.codecs.fp16 import FP16Codec
from psml_core.codecs.kv import KVCodec
from psml_core.codecs.matched import MatchedTopKCodec
from psml_core.codecs.momentum_correction import MomentumCorrection
from psml_core.codecs.omnireduce import OmniReduceCodec, OmniReduceServer
from psml_core.codecs.qsgd import QSGDCodec
from psml_core.codecs.randomk import RandomKCodec
from psml_core.codecs.sign import ScaledSignCodec, SignSGDCodec
from psml_core.codecs.threshold import ThresholdCodec
from psml_core.codecs.topk import TopKCodec
from psml_core.codecs.value_bounded import ValueBoundedCodec

__all__ = [
    "CODECS",
    "Codec",
    "CodecContext",
    "CostReport",
    "DFSCodec",
    "DFSServer",
    "DGCCodec",
    "DenseCodec",
    "ErrorFeedback",
    "FP16Codec",
    "KVCodec",
    "MatchedTopKCodec",
    "MomentumCorrection",
    "OmniReduceCodec",
    "OmniReduceServer",
    "Payload",
    "QSGDCodec",
    "RandomKCodec",
    "ScaledSignCodec",
    "ServerCodec",
    "SignSGDCodec",
    "ThresholdCodec",
    "TopKCodec",
    "ValueBoundedCodec",
    "check_vector",
    "make_codec",
]
