"""Keep a sim run's vectors on its GPU: replicas, gradients, shard values, aggregates.

With ``device: cuda`` the model computes on the GPU. Without this, every gradient crossed the
model interface as a NumPy vector on the host and the codecs, the shards and the aggregation
ran there: for ResNet-18's 11.2M parameters that is a copy per gradient and host-side encoding
at host speed. :func:`keep_on_device` instead moves the workers' replicas and optimizer
replicas and the shards' values and optimizer state to the device: a worker hands its gradient
tensor to its codecs, whose torch paths (:mod:`psml_core.codecs`) pack each payload there and
copy only its bytes to the host; a shard decodes and sums the pushes there
(``ServerCodec.aggregate_on``) and encodes its broadcast from there. The bytes are the host
path's exactly, and the simulated clock charges the device profile whatever ran, so a sim run
on the GPU measures the same bytes and time as on the CPU; only the model's float rounding
(a GPU's kernels) differs.

Not moved (the host path, as before, with the gradient copied to the host) where the protocol
needs host state the device path does not keep: round policies (PCP's local rounds), moving
keys (the dynamic placement) and per-key pulls (``touched``). Only the sim backend: the dist and
horovod ranks compute their gradients on their GPUs and hand host payloads to their transports
(dist: gloo, or NCCL for the bodies; Horovod: NCCL where it is built with it).
"""

from __future__ import annotations

import torch

from psml_core.engine.job import Job

__all__ = ["keep_on_device", "refusal"]


def refusal(job: Job) -> str | None:
    """Why ``job`` keeps its vectors on the host (None: it can keep them on its device)."""
    if job.spec.method.pull == "touched":
        return "its per-key pulls ('touched') are served from host key lists"
    if job.shards[0].policy.rounds:
        return f"the round policy {job.shards[0].policy.name!r} runs local rounds on the host"
    if job.dynamic is not None:
        return "its placement moves keys between shards on the host"
    return None


def keep_on_device(job: Job, device: torch.device, force: bool = False) -> str | None:
    """Move ``job``'s vectors to ``device`` where its model computes there; say why not.

    Args:
        job: A job whose model is already on ``device`` (``Model.to``).
        device: The run's device.
        force: Move them even to the CPU (tests: the torch paths against the host path).

    Returns:
        None when moved (or nothing to do on the CPU); else the reason they stay on the host.
    """
    on_gpu = getattr(job.model, "device", torch.device("cpu")).type != "cpu"
    if not force and (device.type == "cpu" or not on_gpu):
        return None if device.type == "cpu" else "its model computes on the host"
    reason = refusal(job)
    if reason is not None:
        return reason
    for worker in job.workers:
        worker.to(device)
    for shard in job.shards:
        shard.to(device)
    return None
