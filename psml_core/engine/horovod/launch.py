r"""Entry point of every horovod rank.

One host (P = the run's ``workers``; ``shards`` is ignored by an allreduce)::

    horovodrun -np P -H localhost:P --gloo \\
        python -m psml_core.engine.horovod.launch \\
        --run "$(cat run.json)" --data data/digits --out results/run1 [--partition a.npz]

Several hosts: ``-H host1:4,host2:4`` (horovodrun reaches them over ssh; every host needs the
same environment, data directory and psml checkout).

``--run`` takes the run's JSON (as ``psml train --run``; its ``backend`` must be ``horovod``)
or a path to a file holding it. Rank 0 runs :func:`psml_core.engine.training.train`, which writes
``metrics.parquet`` and ``summary.json`` atomically after a clean finish; the other ranks load
the same data, build the same Job and run their part. ``--spawned DIR`` is internal: a rank of
the local spawner (:mod:`.spawn`), which ships the Job itself.

Exit status: 0 on success; 2 for a configuration error (e.g. a number of ranks other than the
run's workers, or Horovod missing), 3 for bad data, 4 for a failed run. When any rank fails,
horovodrun stops the others and exits non-zero itself.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections.abc import Sequence
from pathlib import Path

from psml_core.engine.horovod.runtime import import_horovod
from psml_core.engine.rank_entry import launched_rank, launched_spec, run_launcher
from psml_core.engine.training import configure_torch
from psml_core.errors import ConfigError

__all__ = ["MODULE", "main"]

MODULE = "psml_core.engine.horovod.launch"


def _init(workers: int, run_id: str) -> int:
    """Initialise Horovod; check the world size; return this rank."""
    hvd = import_horovod()
    hvd.init()
    if hvd.size() != workers:
        raise ConfigError(
            f"run {run_id!r} has {workers} workers but horovodrun started {hvd.size()} ranks; "
            f"use horovodrun -np {workers}"
        )
    return int(hvd.rank())


def _launched(args: argparse.Namespace) -> None:
    """A rank started by horovodrun with the run's JSON and data."""
    from psml_core.engine.horovod.backend import HorovodBackend

    spec = launched_spec(args, "horovod")
    rank = _init(spec.workers, spec.run_id)
    launched_rank(spec, args, rank == 0, HorovodBackend().run)


def _spawned(directory: Path) -> None:
    """A rank of the local spawner: the job and the result go through ``directory``."""
    from psml_core.engine.horovod.backend import HorovodBackend
    from psml_core.engine.horovod.spawn import INPUTS, write_result

    inputs = pickle.loads((directory / INPUTS).read_bytes())
    job = inputs["job"]
    rank = _init(job.spec.workers, job.spec.run_id)
    configure_torch(job.spec)
    backend = HorovodBackend(inputs["options"])
    backend.run(job)
    if rank == 0:
        assert backend.result is not None
        write_result(directory, backend.result)


def main(argv: Sequence[str] | None = None) -> int:
    """Run this rank; see the module docstring for the exit status."""
    return run_launcher("horovod", MODULE, __doc__, argv, _spawned, _launched)


if __name__ == "__main__":
    sys.exit(main())
