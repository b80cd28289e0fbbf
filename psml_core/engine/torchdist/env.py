"""Who am I: rank, world size and rendezvous address from whichever launcher started us.

Pure functions of an environment mapping (unit-tested without launching anything):

* **torchrun** (and the local spawner) set ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
  ``MASTER_ADDR``, ``MASTER_PORT``. Under torchrun the elastic agent hosts the rendezvous
  store (``TORCHELASTIC_USE_AGENT_STORE=True``); the local spawner hosts it in the parent
  (``PSML_DIST_STORE=external``); otherwise rank 0 hosts it.
* **srun** sets ``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID`` and the node list. The
  store is hosted by rank 0 on the first host of ``SLURM_STEP_NODELIST`` (else
  ``SLURM_JOB_NODELIST``), expanded by ``scontrol show hostnames`` or, without scontrol, by
  :func:`first_host`. ``MASTER_ADDR`` / ``MASTER_PORT`` override; the default port is
  ``10000 + (31 * SLURM_JOB_ID + SLURM_STEP_ID) % 50000``, the same on every task of a step.

RANK/WORLD_SIZE win over SLURM variables (torchrun inside an sbatch allocation).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from psml_core.errors import ConfigError

__all__ = ["RankEnv", "first_host", "rank_env", "scontrol_first_host"]


@dataclass(frozen=True)
class RankEnv:
    """This process's place in the job.

    Attributes:
        rank: Global rank.
        world_size: Number of processes.
        local_rank: Rank on this host.
        master_addr: Host of the rendezvous store.
        master_port: Its port.
        launcher: ``torchrun``, ``spawn``, ``env`` (RANK/WORLD_SIZE set by hand) or ``slurm``.
        store_host: Who hosts the store: ``rank0``, ``agent`` (torchrun) or ``spawner``.
        attempt: Restart count (torchrun), used to namespace the store's keys.
    """

    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int
    launcher: str
    store_host: str = "rank0"
    attempt: int = 0

    @property
    def hosts_store(self) -> bool:
        """Whether this process must start the store's server."""
        return self.store_host == "rank0" and self.rank == 0


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except KeyError:
        raise ConfigError(f"the launcher did not set {name}") from None
    except ValueError:
        raise ConfigError(f"{name}={env[name]!r} is not an integer") from None


def first_host(nodelist: str) -> str:
    """The first host of a SLURM node list, e.g. ``"gpu[07-09,12],cpu1"`` -> ``"gpu07"``.

    Each bracket group is replaced by its first element (zero padding kept).
    """
    depth, end = 0, len(nodelist)
    for i, ch in enumerate(nodelist):
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            end = i
            break
    first = re.sub(
        r"\[([^\]]*)\]", lambda m: m.group(1).split(",")[0].split("-")[0], nodelist[:end]
    )
    if not first:
        raise ConfigError(f"cannot read a host from the SLURM node list {nodelist!r}")
    return first


def scontrol_first_host(nodelist: str) -> str:
    """``scontrol show hostnames`` first line; :func:`first_host` where scontrol is missing."""
    exe = shutil.which("scontrol")
    if exe:
        try:
            out = subprocess.run(
                [exe, "show", "hostnames", nodelist],
                capture_output=True,
                text=True,
                timeout=20,
                check=True,
            ).stdout.split()
            if out:
                return out[0]
        except (OSError, subprocess.SubprocessError):
            pass
    return first_host(nodelist)


def rank_env(
    env: Mapping[str, str], resolve_host: Callable[[str], str] = scontrol_first_host
) -> RankEnv:
    """Read the launcher's variables (see the module docstring).

    Args:
        env: The environment (``os.environ``).
        resolve_host: Node list -> first host (injectable for tests).

    Raises:
        ConfigError: when no launcher variables are set, or they are malformed.
    """
    if "RANK" in env and "WORLD_SIZE" in env:
        if env.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
            store, launcher = "agent", "torchrun"
        elif env.get("PSML_DIST_STORE") == "external":
            store, launcher = "spawner", "spawn"
        else:
            store, launcher = "rank0", "torchrun" if "TORCHELASTIC_RUN_ID" in env else "env"
        if "MASTER_ADDR" not in env or "MASTER_PORT" not in env:
            raise ConfigError("RANK and WORLD_SIZE are set but MASTER_ADDR or MASTER_PORT is not")
        return RankEnv(
            rank=_int(env, "RANK"),
            world_size=_int(env, "WORLD_SIZE"),
            local_rank=int(env.get("LOCAL_RANK", "0") or 0),
            master_addr=env["MASTER_ADDR"],
            master_port=_int(env, "MASTER_PORT"),
            launcher=launcher,
            store_host=store,
            attempt=int(env.get("TORCHELASTIC_RESTART_COUNT", "0") or 0),
        )
    if "SLURM_PROCID" in env:
        world = "SLURM_NTASKS" if "SLURM_NTASKS" in env else "SLURM_NPROCS"
        if world not in env:
            raise ConfigError("srun set SLURM_PROCID but not SLURM_NTASKS (nor SLURM_NPROCS)")
        if "MASTER_ADDR" in env:
            addr = env["MASTER_ADDR"]
        else:
            nodes = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST")
            if not nodes:
                raise ConfigError(
                    "srun set SLURM_PROCID but neither SLURM_STEP_NODELIST nor "
                    "SLURM_JOB_NODELIST; set MASTER_ADDR to the first task's host"
                )
            addr = resolve_host(nodes)
        if "MASTER_PORT" in env:
            port = _int(env, "MASTER_PORT")
        else:
            job = _int(env, "SLURM_JOB_ID") if "SLURM_JOB_ID" in env else 0
            step = int(env.get("SLURM_STEP_ID", "0") or 0)
            port = 10000 + (31 * job + step) % 50000
        return RankEnv(
            rank=_int(env, "SLURM_PROCID"),
            world_size=_int(env, world),
            local_rank=int(env.get("SLURM_LOCALID", "0") or 0),
            master_addr=addr,
            master_port=port,
            launcher="slurm",
        )
    raise ConfigError(
        "not started by a launcher: neither RANK/WORLD_SIZE (torchrun) nor SLURM_PROCID (srun) "
        "is set; use `psml train` (local spawner), torchrun or srun"
    )
