"""How large a tier's runs may be: workers against the data each run splits among them.

The schema bounds ``workers`` from below only. A run gives every worker a share of the training
samples (the placement gives each at least one), so a workload cannot have more workers than
its data set has training rows. Where the data set knows its rows before it is built (digits,
the generators), :func:`check_scale` refuses such a tier when the config loads, with one line
naming the key, the bound and the fix, instead of a partition or training job failing or
building a hundred thousand model replicas later.
"""

from __future__ import annotations

from psml_core.config import Experiment
from psml_core.data import DATASETS
from psml_core.errors import ConfigError

__all__ = ["check_scale"]


def check_scale(exp: Experiment) -> None:
    """Every workload of the tier's grid has at most as many workers as training rows.

    Raises:
        ConfigError: naming the workers key, the data set's training rows and the fix.
    """
    for w in sorted({cell[0] for cell in exp.grid()}):
        workers, _shards = exp.cluster(w)
        ds = exp.datasets[exp.workloads[w].dataset]
        rows = DATASETS.get(ds.source).planned_train_rows(ds)
        if rows is not None and workers > rows:
            key = f"workloads.{w}.workers" if exp.workloads[w].workers else "workers"
            raise ConfigError(
                f"invalid config: key {key!r}: {workers} workers, but data set {ds.name!r} "
                f"(workload {w!r}) has {rows} training rows and each worker needs at least "
                f"one; set {key} <= {rows}"
            )
