"""The sim backend: one process, a deterministic discrete-event simulation on SimPy.

Gradients are real (the model is really trained); time is virtual. Each iteration of worker p:

1. **pull**: a request to every shard (a header-only message); the shard answers when its sync
   policy lets p proceed, with its parameter values encoded by the down codec. In ``touched``
   pull mode the worker first draws its mini-batch, the request carries the shard's keys that
   the batch touches (8 B each, up) and the answer their values as kv entries (12 B each,
   down);
2. **compute**: the gradient on the next mini-batch; its duration comes from the compute model;
3. **push**: one payload per shard, encoded by the up codec; the shard applies it (BSP: when all
   P pushes of the clock are in).

Transfers go through :class:`~psml_core.net.network.FairShareNetwork` (with the scenario's
delay process and cross-traffic). What compression costs is charged to the clock from the
device files' codec cost tables (``compute.codec_costs``;
:class:`~psml_core.devices.codec_cost.CodecCostModel`):

* the worker's device decodes its pull answers, then computes, and encodes each shard's push;
  with the scenario's ``overlap`` (default) a shard's encode and push start as soon as backward
  has produced its gradient (:mod:`psml_core.engine.timeline`), pausing the rest of backward;
* each shard's server thread (one CPU core, :data:`SERVER_DEVICE`) decodes every push into its
  sum, encodes the update broadcast once per round, and encodes params/delta/touched answers;
  a pull queues for the thread, so the server's processing is part of the pull's
  communication time, as a real worker would measure it.

Per iteration the record splits the time exactly: ``compute_s + codec_s + comm_s + wait_s`` is the
iteration's duration, where ``wait_s`` is the longest time a pull request was held by a shard's
sync policy, ``codec_s`` the device's encode and decode time and ``comm_s`` the
communication left on the critical path (pull transfers with the server's processing, and
the part of the pushes that outlasts the device's work). Evaluation of the global model is
offline: it takes no simulated time.

Under a round policy (PCP) step 2 is the round's local steps (as many as shard 0's pull answer
granted), step 3 pushes the accumulated change with the worker's 12-byte round report, and a
record covers one round (``local_steps`` says how many steps it held). With ``lossless: snappy``
every payload is also Snappy-compressed and its size kept in ``lossless_bytes_up/down``, never
in the raw byte columns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import simpy

from psml_core.config import RunSpec
from psml_core.devices.codec_cost import CodecCostModel
from psml_core.engine.backend import BACKENDS, Backend
from psml_core.engine.job import Job
from psml_core.engine.loop import WorkerLoop
from psml_core.engine.progress import NO_PROGRESS, Progress
from psml_core.engine.sim.charges import SERVER_DEVICE
from psml_core.engine.sim.checkpoint import (
    load_checkpoint,
    restore_job,
)
from psml_core.engine.sim.collector import quiet_collector
from psml_core.engine.sim.gradients import BatchedGradients, batch_mode
from psml_core.engine.sim.processes import RunState
from psml_core.engine.sim.transport import SimTransport
from psml_core.engine.step import step_row
from psml_core.errors import ConfigError, Diverged
from psml_core.metrics.records import IterationRecord
from psml_core.net.cross_traffic import make_cross_traffic
from psml_core.net.network import FairShareNetwork

__all__ = ["SERVER_DEVICE", "SimBackend"]


def nic_overrides(job: Job) -> dict[str, dict[int, float]]:
    """Per-machine bandwidth (bytes/s) and latency (s) from the scenario's ``nics`` entries."""
    spec = job.spec
    servers = [int(m) for m in job.shard_machine]
    bandwidth: dict[int, float] = {}
    latency: dict[int, float] = {}
    for nic in spec.scenario.nics:
        if nic.machines == "workers":
            machines = list(range(spec.workers))
        elif nic.machines == "servers":
            machines = servers
        else:
            machines = [int(m) for m in nic.machines]
        bad = [m for m in machines if not 0 <= m < job.machines]
        if bad:
            raise ConfigError(
                f"scenarios.{spec.scenario.name}.nics: machines {bad} do not exist; this run "
                f"has machines 0..{job.machines - 1}"
            )
        for m in machines:
            if nic.bandwidth_gbps is not None:
                bandwidth[m] = nic.bandwidth_gbps * 1e9 / 8
            if nic.latency_us is not None:
                latency[m] = nic.latency_us * 1e-6
    return {"nic_bandwidth": bandwidth, "nic_latency": latency}


@BACKENDS.register("sim")
class SimBackend(Backend):
    """Deterministic discrete-event simulation; see the module docstring.

    Args:
        checkpoint: Where to keep the run's checkpoint (``spec.checkpoint_every`` > 0): it is
            written at every drain and, if it holds this run's settings, resumed from. None:
            no checkpoints.
    """

    clock = "simulated"
    keeps_vectors_on_device = True

    def __init__(self, checkpoint: Path | None = None) -> None:
        self.checkpoint = checkpoint
        self.resumed_at: int | None = None  # the iteration a resumed run started from
        self.gradients: BatchedGradients | None = None  # the last run's, if it batched them

    @classmethod
    def for_run(cls, spec: RunSpec, checkpoint: Path) -> SimBackend:
        """Checkpointing at ``checkpoint`` where ``spec.checkpoint_every`` asks for it."""
        return cls(checkpoint if spec.checkpoint_every > 0 else None)

    def describe_time_model(self, job: Job) -> dict[str, Any]:
        """The scenario's overlap, how the gradients were computed, and the codec costs."""
        spec = job.spec
        out: dict[str, Any] = {"overlap": spec.scenario.overlap, "gradients": self._gradients()}
        if spec.compute.codec_costs:
            m = spec.method
            codecs = [m.codec.name, *([m.codec_down.name] if m.codec_down else [])]
            out["codec_costs"] = {
                "workers": CodecCostModel.for_device(spec.compute.cost_profile).describe(codecs),
                "servers": CodecCostModel.for_device(SERVER_DEVICE).describe(codecs),
            }
        else:
            out["codec_costs"] = "off (compute.codec_costs: false): codec work takes 0 s"
        return out

    def _gradients(self) -> dict[str, Any]:
        """How the workers' gradients were computed (a GPU's batched pass rounds differently)."""
        g = self.gradients
        if g is None:
            return {"computed": "one replica at a time (PSML_SIM_BATCH off, or not on a GPU)"}
        how = "batched: one pass per step" if g.batched else "per replica, a step at a time"
        return {
            "computed": how,
            "calls": len(g.sizes),
            "handed_over": g.hits,  # computed with the step's first worker, the replica checked
            "predictions_missed": g.misses,
        }

    def run(self, job: Job, progress: Progress | None = None) -> list[IterationRecord]:
        """Simulate the whole run (from its checkpoint, if there is one) and return its records.

        ``progress`` hears of every iteration, evaluation and checkpoint; it only reads.
        """
        spec = job.spec
        progress = progress or NO_PROGRESS
        ckpt = None
        if self.checkpoint is not None and spec.checkpoint_every > 0:
            ckpt = load_checkpoint(self.checkpoint, spec.config_hash())
        if ckpt is not None:
            restore_job(job, ckpt)
            self.resumed_at = ckpt.iteration
            progress.resumed(ckpt.iteration, sim_time=ckpt.now)
        env = simpy.Environment(initial_time=ckpt.now if ckpt is not None else 0.0)
        sc = spec.scenario
        net = FairShareNetwork(
            env,
            machines=job.machines,
            bandwidth_Bps=sc.bandwidth_gbps * 1e9 / 8,
            latency_s=sc.latency_us * 1e-6,
            overhead_s=sc.message_overhead_us * 1e-6,
            header_bytes=sc.header_bytes,
            efficiency=sc.wire_efficiency,
            bandwidth_steps=tuple((b.at_s, b.gbps * 1e9 / 8) for b in sc.bandwidth_steps),
            cross_traffic=make_cross_traffic(sc.cross_traffic, spec.seed, job.machines),
            rate_window_s=sc.rate_window * sc.latency_us * 1e-6,
            **nic_overrides(job),
        )
        state = RunState(job, env, net, self.checkpoint, progress)
        state.gradients = gradient_batch(job)
        self.gradients = state.gradients
        iterations, rounds = spec.workload.iterations, state.rounds
        if ckpt is None:
            for p in range(spec.workers):
                loop = WorkerLoop(job.workers[p], SimTransport(state, p), iterations, rounds)
                env.process(loop.run())
        else:
            state.restore(ckpt.run)
            for p in ckpt.order:  # the order they left the drain in the run that was killed
                tr = SimTransport(state, p, arrived=ckpt.arrived[p])
                loop = WorkerLoop(job.workers[p], tr, iterations, rounds)
                env.process(loop.run(ckpt.iteration, ckpt.prev_comm[p]))
        try:
            with quiet_collector():
                env.run()
        except Diverged as exc:
            _end_diverged(state, exc)
        return state.records()


def gradient_batch(job: Job) -> BatchedGradients | None:
    """The run's gradients computed a step at a time (``PSML_SIM_BATCH``), or None."""
    device = job.workers[0].device
    collect, batched = batch_mode(device is not None and device.type != "cpu")
    if not collect or job.shards[0].policy.rounds:  # a round's local steps depend on each other
        return None
    return BatchedGradients(job.workers, job.model, batched)


def _end_diverged(state: RunState, exc: Diverged) -> None:
    """End a run whose step went non-finite: record that step, and evaluate the model as it is.

    The record holds the non-finite loss (so the summary marks the run DIVERGED) and no time
    or bytes: nothing was sent. The evaluation gives the run its last test metrics.
    """
    job = state.job
    state.rows.append(
        step_row(
            iteration=exc.iteration,
            worker=exc.worker,
            time_s=state.env.now,
            compute_s=0.0,
            comm_s=0.0,
            wait_s=0.0,
            up=[0] * len(job.shards),
            down=[0] * len(job.shards),
            remote=[False] * len(job.shards),
            ratio=float("nan"),
            staleness=0,
            loss=exc.loss if exc.loss == exc.loss else float("nan"),
        )
    )
    ds = job.dataset
    with np.errstate(all="ignore"):
        loss, acc = job.model.evaluate(job.global_params(), ds.X_test, ds.y_test)
    state.evals[exc.iteration] = (float(loss), float(acc) if acc == acc else 0.0)
