"""A worker's device timeline for one step: backward, per-shard encodes, and when pushes start.

The worker's device (a GPU or a CPU core) does one thing at a time: the forward pass, the
backward pass and the encoding of each shard's gradient share it. With **overlap** (wait-free
backpropagation, as MXNet's PS-lite kvstore and Horovod do: a layer's gradient is handed to
the communication library as soon as backward has produced it), a shard's gradient is ready
when backward has passed every layer holding one of its keys; its encode then runs (pausing the
rest of backward) and its push starts while backward continues. Without overlap, every encode
and push waits for the end of backward.

Assumptions [ours]: the forward pass is one third of a step (backward about twice the forward);
backward visits the model's tensors in reverse order and spends on each a share of its time
proportional to the tensor's parameter count.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["FORWARD_SHARE", "DeviceTimeline", "key_ready_fraction", "shard_ready", "step_timeline"]

FORWARD_SHARE = 1.0 / 3.0
"""Share of a step's compute time spent in the forward pass [ours]."""


def key_ready_fraction(tensor_sizes: Sequence[int]) -> np.ndarray:
    """Per key of the flat parameter vector: the share of a step done when its gradient is ready.

    Tensors are laid out in forward order; backward produces the last tensor's gradient first.
    A key of tensor ``i`` is ready after the forward pass and the backward of tensors
    ``i..end``: ``FORWARD_SHARE + (1 - FORWARD_SHARE) * sum(sizes[i:]) / sum(sizes)``.
    """
    sizes = np.asarray(tensor_sizes, dtype=np.float64)
    if sizes.size == 0 or sizes.sum() <= 0:
        raise ValueError("a model needs at least one parameter tensor")
    tail = np.cumsum(sizes[::-1])[::-1] / sizes.sum()  # sum(sizes[i:]) / total
    per_tensor = FORWARD_SHARE + (1.0 - FORWARD_SHARE) * tail
    return np.repeat(per_tensor, sizes.astype(np.int64))


def shard_ready(ready: np.ndarray, keys: np.ndarray) -> float:
    """The share of a step done when every key of ``keys`` has its gradient (1.0 if none).

    ``ready`` (:func:`key_ready_fraction`) never increases along the keys, exactly (a cumulative
    sum of non-negative sizes, then monotone arithmetic, each rounding monotone), so the latest
    key is the smallest: one reduction over ``keys`` instead of gathering every key's value.
    """
    return float(ready[keys.min()]) if keys.size else 1.0


class DeviceTimeline:
    """The outcome of :func:`step_timeline` (all times absolute, seconds).

    Attributes:
        push_start: Per shard, when its encoded push is handed to the network.
        device_end: When the device is free (backward and every encode done).
        encode_s: Device time spent encoding, summed over shards.
    """

    def __init__(self, push_start: list[float], device_end: float, encode_s: float) -> None:
        self.push_start = push_start
        self.device_end = device_end
        self.encode_s = encode_s


def step_timeline(
    start: float,
    compute_s: float,
    ready: Sequence[float],
    encode_s: Sequence[float],
    overlap: bool,
) -> DeviceTimeline:
    """Schedule one step's compute and encodes on the worker's device.

    Args:
        start: When the step's compute starts.
        compute_s: The forward + backward time.
        ready: Per shard, the share of the step done when its gradient is ready
            (:func:`shard_ready`); ignored without overlap (all ready at the end).
        encode_s: Per shard, the device time of its encode.
        overlap: Whether pushes may start before backward has finished.

    Returns:
        When each push starts and when the device is free. Shards are encoded in the order
        their gradients become ready (ties: shard order); an encode delays the rest of backward.
    """
    n = len(encode_s)
    at = [float(r) for r in ready] if overlap else [1.0] * n
    order = sorted(range(n), key=lambda s: (at[s], s))
    now, done = start, 0.0  # device clock; compute seconds done so far
    push = [0.0] * n
    for s in order:
        need = min(max(at[s], 0.0), 1.0) * compute_s
        if need > done:
            now += need - done
            done = need
        now += encode_s[s]
        push[s] = now
    now += compute_s - done
    return DeviceTimeline(push, now, float(sum(encode_s)))
