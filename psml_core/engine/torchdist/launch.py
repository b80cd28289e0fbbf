r"""Entry point of every dist rank.

One host, torchrun::

    torchrun --standalone --nproc-per-node=$((P+S)) -m psml_core.engine.torchdist.launch -- \
        --run "$(cat run.json)" --data data/digits --out results/run1 [--partition a.npz]

(the ``--`` keeps torchrun's parser from reading ``--run`` as an abbreviation of its own
``--run-path``; torchrun passes what follows to the launcher unchanged).

SLURM (one task per rank; the allocation's first host runs rank 0 and the store)::

    srun -n $((P+S)) python -m psml_core.engine.torchdist.launch \
        --run "$RUN_JSON" --data ... --out ...

``--run`` takes the run's JSON (as ``psml train --run``) or a path to a file holding it. Rank 0
runs :func:`psml_core.engine.training.train`, which writes ``metrics.parquet`` and ``summary.json``
atomically after a clean finish; the other ranks load the same data, build the same Job and
run their role. ``--spawned DIR`` is internal: a child of the local spawner (:mod:`.spawn`).

Each rank's own output below Python (torch's C++ warnings and backtraces when a peer dies) goes
to ``rank<r>.log`` in ``$PSML_DIST_LOG_DIR``, else in ``<out>.ranks/``; the terminal gets psml's
one line per rank, naming that file (:mod:`.rank_log`).

Exit status: 0 on success; 1 when this or another rank failed after the ranks started to join
(one line on stderr names the failed rank); before that, the error's own status: 2 for a
configuration error (e.g. a world size other than P + S), 3 for bad data.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
from collections.abc import Sequence
from pathlib import Path

from psml_core.atomic import write_bytes
from psml_core.config import RunSpec
from psml_core.engine.job import Job
from psml_core.engine.progress import Progress
from psml_core.engine.rank_entry import launched_rank, launched_spec, run_launcher
from psml_core.engine.torchdist.env import rank_env
from psml_core.engine.torchdist.rank_log import divert_native_stderr, log_dir
from psml_core.engine.torchdist.session import Session
from psml_core.engine.torchdist.settings import DistOptions, Layout
from psml_core.engine.training import configure_torch

__all__ = ["MODULE", "main"]

MODULE = "psml_core.engine.torchdist.launch"


def _launched(args: argparse.Namespace) -> None:
    """A rank started by torchrun or srun."""
    from psml_core.engine.torchdist.rank import check_supported, run_rank

    spec = launched_spec(args, "dist")
    env = rank_env(os.environ)
    layout = Layout(spec.shards, spec.workers)
    layout.check_world(env.world_size, spec.run_id)
    logs = log_dir(os.environ, args.out)
    if logs is not None:  # settings checked (their errors on the terminal); now the C++ layers
        divert_native_stderr(logs, env.rank)
    session = Session(env, layout, DistOptions.from_env())

    def run_job(job: Job) -> None:
        check_supported(job)
        run_rank(job, session)

    try:
        session.open()
        launched_rank(spec, args, env.rank == 0, run_job)
    except BaseException as exc:  # noqa: BLE001 - any failure of a joined rank stops them all
        session.fail(exc)


def _spawned(directory: Path) -> None:
    """A child of the local spawner: inputs and result go through ``directory``."""
    from psml_core.engine.job import build_job
    from psml_core.engine.torchdist.rank import check_supported, run_rank
    from psml_core.engine.torchdist.result import INPUTS, RESULT

    inputs = pickle.loads((directory / INPUTS).read_bytes())
    spec: RunSpec = inputs["spec"]
    env = rank_env(os.environ)
    layout = Layout(spec.shards, spec.workers)
    layout.check_world(env.world_size, spec.run_id)
    logs = log_dir(os.environ, None)
    if logs is not None:  # ``psml train`` names the folder; a library caller keeps stderr
        divert_native_stderr(logs, env.rank)
    session = Session(env, layout, inputs["options"])
    try:
        session.open()
        configure_torch(spec)
        job = build_job(spec, inputs["dataset"], inputs["assignment"])
        check_supported(job)
        progress = Progress.from_settings(
            spec.run_id, spec.workload.iterations, "wall-clock", inputs.get("progress")
        )
        result = run_rank(job, session, progress if env.rank == 0 else None)
        if env.rank == 0:
            write_bytes(directory / RESULT, pickle.dumps(result))
    except BaseException as exc:  # noqa: BLE001
        session.fail(exc)


def main(argv: Sequence[str] | None = None) -> int:
    """Run this rank; see the module docstring for the exit status."""
    return run_launcher("dist", MODULE, __doc__, argv, _spawned, _launched)


if __name__ == "__main__":
    sys.exit(main())
