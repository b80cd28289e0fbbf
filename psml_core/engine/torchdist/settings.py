"""Rank layout, backend options and fault injection of the dist backend (all read-only)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from psml_core.engine.rank_entry import env_flag
from psml_core.errors import ConfigError

__all__ = ["BODY_TRANSPORTS", "DistOptions", "Faults", "Layout"]

BODY_TRANSPORTS = ("auto", "gloo", "nccl", "gloo-ordered")
"""``PSML_DIST_BODIES``: where body messages travel (:mod:`.bodies`)."""


@dataclass(frozen=True)
class Layout:
    """Which rank plays which role: ranks ``0..S-1`` are server shards, ``S..S+P-1`` workers.

    Shards first, so rank 0 — the rank that writes results and evaluates — is always a shard,
    whatever P is.

    Attributes:
        shards: S.
        workers: P.
    """

    shards: int
    workers: int

    @property
    def world_size(self) -> int:
        """P + S processes."""
        return self.shards + self.workers

    def is_shard(self, rank: int) -> bool:
        """Whether ``rank`` is a server shard."""
        return rank < self.shards

    def worker_rank(self, worker: int) -> int:
        """The rank of worker ``worker``."""
        return self.shards + worker

    def index(self, rank: int) -> int:
        """The shard index or worker index of ``rank``."""
        return rank if self.is_shard(rank) else rank - self.shards

    def describe(self, rank: int) -> str:
        """``"rank 3 (worker 1)"``: how every message names a process."""
        role = "shard" if self.is_shard(rank) else "worker"
        return f"rank {rank} ({role} {self.index(rank)})"

    def check_world(self, world_size: int, run_id: str) -> None:
        """Raise a ConfigError naming the expected count unless ``world_size == P + S``."""
        if world_size != self.world_size:
            raise ConfigError(
                f"run {run_id!r} needs {self.world_size} processes ({self.shards} server "
                f"shards + {self.workers} workers) but the launcher started {world_size}: use "
                f"`torchrun --nproc-per-node={self.world_size}` or `srun -n {self.world_size}`"
            )


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r}: expected a number of seconds") from None
    if value <= 0:
        raise ConfigError(f"{name}={raw!r}: must be > 0")
    return value


def _bodies(raw: str) -> str:
    if raw not in BODY_TRANSPORTS:
        raise ConfigError(f"PSML_DIST_BODIES={raw!r}: expected one of {', '.join(BODY_TRANSPORTS)}")
    return raw


@dataclass(frozen=True)
class DistOptions:
    """Settings of the dist backend; every one has an environment variable.

    Attributes:
        count_header: Count protocol bytes (64-byte headers, codec-state framing) in the
            records' byte columns (``PSML_DIST_COUNT_HEADER``). Off by default, so the records
            hold the codec bytes, exactly what the sim backend counts with ``header_bytes: 0``.
        heartbeat_s: Heartbeat period of the watchdog (``PSML_DIST_HEARTBEAT_S``).
        dead_after_s: A rank whose heartbeat has not moved for this long is declared dead
            (``PSML_DIST_DEAD_AFTER_S``).
        start_timeout_s: How long ranks wait for each other to join (``PSML_DIST_START_TIMEOUT_S``).
        op_timeout_s: Gloo's per-operation timeout (``PSML_DIST_OP_TIMEOUT_S``), a last resort:
            gloo cannot tell a slow peer from a dead one, so it must exceed the longest
            legitimate wait (a shard waits for a worker's whole compute step); a timed-out
            gloo operation leaves the group unusable, so it is fatal.
        bodies: Where the parts beyond the header slot travel (``PSML_DIST_BODIES``): ``auto``
            (NCCL where every rank has a GPU of its own, else gloo), ``gloo``, ``nccl``, or
            ``gloo-ordered`` (NCCL's matching rules over gloo, to check them on a CPU); see
            :mod:`.bodies`.
    """

    count_header: bool = False
    heartbeat_s: float = 1.0
    dead_after_s: float = 10.0
    start_timeout_s: float = 60.0
    op_timeout_s: float = 1800.0
    bodies: str = "auto"

    def __post_init__(self) -> None:
        _bodies(self.bodies)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> DistOptions:
        """Read the ``PSML_DIST_*`` variables; unset ones keep their defaults."""
        env = os.environ if env is None else env
        d = cls()
        return cls(
            count_header=env_flag(env, "PSML_DIST_COUNT_HEADER", d.count_header),
            heartbeat_s=_seconds(env, "PSML_DIST_HEARTBEAT_S", d.heartbeat_s),
            dead_after_s=_seconds(env, "PSML_DIST_DEAD_AFTER_S", d.dead_after_s),
            start_timeout_s=_seconds(env, "PSML_DIST_START_TIMEOUT_S", d.start_timeout_s),
            op_timeout_s=_seconds(env, "PSML_DIST_OP_TIMEOUT_S", d.op_timeout_s),
            bodies=env.get("PSML_DIST_BODIES") or d.bodies,
        )


@dataclass(frozen=True)
class Faults:
    """Fault and delay injection for tests, read from the environment of every rank.

    * ``PSML_DIST_KILL_RANK=r PSML_DIST_KILL_STEP=t``: rank r calls ``os._exit(1)`` — a crash,
      no cleanup — when a worker starts iteration t, or when a shard receives a push of
      iteration >= t.
    * ``PSML_DIST_DELAY="r=seconds[,r=seconds]"``: worker rank r sleeps that long in every
      compute step (a straggler; the sleep counts as compute time).
    """

    kill_rank: int | None = None
    kill_step: int = 0
    delays: dict[int, float] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Faults:
        """Parse the variables above; malformed values are a ConfigError."""
        env = os.environ if env is None else env
        try:
            kill = env.get("PSML_DIST_KILL_RANK")
            step = int(env.get("PSML_DIST_KILL_STEP", "0") or 0)
            delays = {}
            for item in filter(None, env.get("PSML_DIST_DELAY", "").split(",")):
                r, s = item.split("=")
                delays[int(r)] = float(s)
        except ValueError:
            raise ConfigError(
                "PSML_DIST_KILL_RANK / PSML_DIST_KILL_STEP must be integers and "
                "PSML_DIST_DELAY a list like '2=0.5,3=0.1'"
            ) from None
        return cls(int(kill) if kill not in (None, "") else None, step, delays)

    def maybe_kill(self, rank: int, step: int) -> None:
        """Crash here if this is the injected fault's rank and step."""
        if self.kill_rank == rank and step >= self.kill_step:
            print(
                f"psml dist: fault injection: rank {rank} crashes at step {step} "
                f"(unix time {time.time():.3f})",
                flush=True,
            )
            sys.stderr.flush()
            os._exit(1)

    def delay(self, rank: int) -> None:
        """Sleep for the injected straggler delay of ``rank``, if any."""
        if rank in self.delays:
            time.sleep(self.delays[rank])
