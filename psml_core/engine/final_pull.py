"""The last pull of a round policy's run: no iteration of its own, so it joins the last record.

A round policy (PCP) ends when its step budget is spent; the workers learn it from the pull
that brings them the merged model (a budget of 0 steps). That pull moved bytes and took time,
so both are added to the worker's last record: byte totals stay exact and ``time_s`` ends when
the worker does, with ``compute_s + codec_s + comm_s + wait_s`` still its duration.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["fold_final_pull"]


def fold_final_pull(
    row: dict[str, Any],
    *,
    up: Sequence[int],
    down: Sequence[int],
    remote: Sequence[bool],
    end: float,
    comm: float,
    wait: float,
    codec: float = 0.0,
    lossless_up: int | None = None,
    lossless_down: int | None = None,
) -> None:
    """Add the final pull to ``row`` (the worker's last record), in place.

    Args:
        row: The record's fields (``IterationRecord`` keywords).
        up: Bytes of the pull requests, per shard.
        down: Bytes of the answers, per shard.
        remote: Per shard, whether it is on another machine.
        end: The time the pull ended (the record's new ``time_s``).
        comm: Its communication time.
        wait: Its time held by a sync policy.
        codec: Its decoding time on the worker's device.
        lossless_up: The requests' Snappy-coded size (None when not measured).
        lossless_down: The answers' Snappy-coded size.
    """
    row["shard_bytes_up"] = tuple(a + b for a, b in zip(row["shard_bytes_up"], up, strict=True))
    row["shard_bytes_down"] = tuple(
        a + b for a, b in zip(row["shard_bytes_down"], down, strict=True)
    )
    row["bytes_up"] += sum(up)
    row["bytes_down"] += sum(down)
    row["remote_bytes_up"] += sum(b for b, r in zip(up, remote, strict=True) if r)
    row["remote_bytes_down"] += sum(b for b, r in zip(down, remote, strict=True) if r)
    if row.get("lossless_bytes_up") is not None and lossless_up is not None:
        row["lossless_bytes_up"] += lossless_up
    if row.get("lossless_bytes_down") is not None and lossless_down is not None:
        row["lossless_bytes_down"] += lossless_down
    row["time_s"] = end
    row["comm_s"] += comm
    row["wait_s"] += wait
    row["codec_s"] = row.get("codec_s", 0.0) + codec
