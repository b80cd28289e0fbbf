"""The per-worker, per-iteration record every backend writes to ``metrics.parquet``.

Times are in seconds on the run's clock: ``simulated`` (sim backend, virtual time from the
network and compute models) or ``wall-clock`` (real processes). The ``clock`` column says which,
on every row, so no reader can mistake one for the other.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, fields

import pyarrow as pa

__all__ = ["CLOCKS", "IterationRecord", "METRIC_COLUMNS", "METRICS_SCHEMA", "records_table"]

CLOCKS = ("simulated", "wall-clock")


@dataclass(frozen=True, slots=True)
class IterationRecord:
    """One worker's iteration.

    Attributes:
        iteration: The worker's clock (0-based iteration index).
        worker: Worker rank.
        time_s: Clock time at the end of the iteration (after the pull that ends it).
        compute_s: Time computing the gradient.
        comm_s: Communication time on the iteration's critical path: transfers (push and pull,
            latency included) not hidden behind compute. On the sim backend with overlap, the
            part of a push that runs during backward is not here.
        wait_s: Time blocked by the sync policy (waiting for other workers / the server, whose
            aggregation time it includes).
        bytes_up: Wire bytes this worker sent to the servers (all shards, exact codec sizes).
        bytes_down: Wire bytes this worker received from the servers.
        remote_bytes_up: Part of ``bytes_up`` that crossed the network (not to a colocated shard).
        remote_bytes_down: Part of ``bytes_down`` that crossed the network.
        ratio: Compression ratio in force (1.0 = dense).
        staleness: Clock distance between this worker and the slowest worker when it proceeded.
        loss: Training loss on this worker's mini-batch.
        test_loss: Test loss of the global model after this iteration; NaN if not evaluated.
        test_accuracy: Test accuracy of the global model; NaN if not evaluated.
        clock: "simulated" or "wall-clock".
        shard_bytes_up: ``bytes_up`` split by server shard (shard order).
        shard_bytes_down: ``bytes_down`` split by server shard.
        local_steps: Gradient steps the record covers: 1, or a round policy's (PCP) granted
            local steps, in which case ``iteration`` is the round.
        lossless_bytes_up: ``bytes_up`` with every payload Snappy-compressed (``lossless:
            snappy`` recipes); None where not measured. Never part of ``bytes_up``.
        lossless_bytes_down: The same for ``bytes_down``.
        migration_bytes: Part of ``bytes_down`` that is keys moving to this worker's machine
            (dynamic placement: 4 bytes per migrated key plus the message header); 0 otherwise.
        codec_s: Time the worker's device spent encoding its pushes and decoding its pull
            answers (sim: from the device's codec cost table; real backends measure encoding
            inside ``comm_s``, so 0 there). ``compute_s + codec_s + comm_s + wait_s`` is the
            iteration's duration.
    """

    iteration: int
    worker: int
    time_s: float
    compute_s: float
    comm_s: float
    wait_s: float
    bytes_up: int
    bytes_down: int
    remote_bytes_up: int
    remote_bytes_down: int
    ratio: float
    staleness: int
    loss: float
    test_loss: float
    test_accuracy: float
    clock: str
    shard_bytes_up: tuple[int, ...] = ()
    shard_bytes_down: tuple[int, ...] = ()
    local_steps: int = 1
    lossless_bytes_up: int | None = None
    lossless_bytes_down: int | None = None
    migration_bytes: int = 0
    codec_s: float = 0.0


METRIC_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(IterationRecord))

METRICS_SCHEMA = pa.schema(
    [
        ("iteration", pa.int32()),
        ("worker", pa.int32()),
        ("time_s", pa.float64()),
        ("compute_s", pa.float64()),
        ("comm_s", pa.float64()),
        ("wait_s", pa.float64()),
        ("bytes_up", pa.int64()),
        ("bytes_down", pa.int64()),
        ("remote_bytes_up", pa.int64()),
        ("remote_bytes_down", pa.int64()),
        ("ratio", pa.float64()),
        ("staleness", pa.int32()),
        ("loss", pa.float64()),
        ("test_loss", pa.float64()),
        ("test_accuracy", pa.float64()),
        ("clock", pa.string()),
        ("shard_bytes_up", pa.list_(pa.int64())),
        ("shard_bytes_down", pa.list_(pa.int64())),
        ("local_steps", pa.int32()),
        ("lossless_bytes_up", pa.int64()),
        ("lossless_bytes_down", pa.int64()),
        ("migration_bytes", pa.int64()),
        ("codec_s", pa.float64()),
    ]
)
assert tuple(METRICS_SCHEMA.names) == METRIC_COLUMNS


def records_table(records: list[IterationRecord]) -> pa.Table:
    """Records as an Arrow table, sorted by (iteration, worker), with the fixed schema."""
    rows = sorted(records, key=lambda r: (r.iteration, r.worker))
    cols = (
        list(zip(*(astuple(r) for r in rows), strict=True)) if rows else [()] * len(METRIC_COLUMNS)
    )
    return pa.table(
        {
            name: pa.array(col, type=METRICS_SCHEMA.field(name).type)
            for name, col in zip(METRIC_COLUMNS, cols, strict=True)
        },
        schema=METRICS_SCHEMA,
    )
