"""Server-side optimizers: how a shard turns an aggregated gradient into a parameter update.

The values, the gradient and the per-key state are NumPy arrays on the host, or torch tensors
on one device once :meth:`ServerOptimizer.to` moved the state there (a run whose vectors stay
on its GPU, :mod:`psml_core.engine.device_state`); the update is the same sequence of float32
operations either way.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

if TYPE_CHECKING:
    import torch

from psml_core.config import WorkloadSpec
from psml_core.registry import Registry

__all__ = [
    "OPTIMIZERS",
    "AdaGrad",
    "ServerOptimizer",
    "SGD",
    "make_optimizer",
    "optimizer_class",
    "warmup_factor",
]


def warmup_factor(iteration: int, warmup: int) -> float:
    """The linear warm-up's multiple of the learning rate at ``iteration`` (from 0).

    ``min(1, (iteration + 1) / warmup)``, and 1 without warm-up (``warmup`` 0). The shards'
    optimizers, the workers' replicas and the codecs' ``ctx.lr`` (:meth:`Job.ctx`) all use it,
    so every copy of the model takes the same step.
    """
    return 1.0 if warmup <= 0 else min(1.0, (iteration + 1) / warmup)


class ServerOptimizer(ABC):
    """Updates one shard's values in place from a gradient; holds its own per-key state."""

    name: ClassVar[str]
    per_key_state: ClassVar[tuple[str, ...]] = ()
    """Attributes holding one value per key (moved with the keys by a dynamic placement)."""
    uses_momentum: ClassVar[bool] = False
    """Whether the workload's ``momentum`` enters the update (what momentum correction moves)."""
    lr: np.float32
    warmup = 0
    """Warm-up length in iterations (0: none); set by :func:`make_optimizer`."""
    updates_per_iteration = 1
    """Updates that make one iteration: P where each push is applied alone (ASP, SSP)."""
    updates = 0
    """Updates applied so far (what the warm-up counts)."""

    @abstractmethod
    def step(self, values: np.ndarray, grad: np.ndarray) -> None:
        """Apply one update to ``values`` (float32, in place)."""

    def next_lr(self) -> np.float32:
        """The learning rate of the update being applied; counts it.

        Without warm-up exactly ``lr`` (runs without one keep their bytes).
        """
        it = self.updates // self.updates_per_iteration
        self.updates += 1
        if self.warmup <= 0 or it >= self.warmup:
            return self.lr
        return np.float32(self.lr * np.float32(warmup_factor(it, self.warmup)))

    def to(self, device: torch.device) -> None:
        """Keep the per-key state on a torch ``device`` from now on (tensor values and grads)."""
        import torch

        for name in self.per_key_state:
            state = getattr(self, name)
            if isinstance(state, np.ndarray):
                setattr(self, name, torch.from_numpy(state).to(device))


OPTIMIZERS: Registry[type[ServerOptimizer]] = Registry("optimizer")


@OPTIMIZERS.register("sgd")
class SGD(ServerOptimizer):
    """SGD with heavy-ball momentum: ``v = mu v + g;  w -= lr v``.

    Args:
        n: Number of keys on the shard.
        lr: Learning rate.
        momentum: Momentum mu in [0, 1).
    """

    per_key_state = ("velocity",)
    uses_momentum = True

    def __init__(self, n: int, lr: float, momentum: float) -> None:
        self.lr, self.momentum = np.float32(lr), np.float32(momentum)
        self.velocity = np.zeros(n, dtype=np.float32)

    def step(self, values: np.ndarray, grad: np.ndarray) -> None:
        """Momentum step."""
        self.velocity *= _scalar(self.momentum, values)
        self.velocity += grad
        values -= _scalar(self.next_lr(), values) * self.velocity


@OPTIMIZERS.register("adagrad")
class AdaGrad(ServerOptimizer):
    """AdaGrad (Duchi et al., 2011): ``G += g^2;  w -= lr g / (sqrt(G) + eps)``.

    The per-key step size suits sparse linear models, whose features differ in frequency by
    orders of magnitude; it is what the PS-lite lineage trains sparse logistic regression with.
    Tuning: lr 0.05-0.3 for L2-normalised sparse rows; momentum is ignored.

    Args:
        n: Number of keys on the shard.
        lr: Learning rate.
        momentum: Unused (accepted so that every optimizer takes the same settings).
    """

    per_key_state = ("accum",)
    eps = np.float32(1e-8)

    def __init__(self, n: int, lr: float, momentum: float) -> None:
        self.lr = np.float32(lr)
        self.accum = np.zeros(n, dtype=np.float32)

    def step(self, values: np.ndarray, grad: np.ndarray) -> None:
        """AdaGrad step."""
        self.accum += grad * grad
        lr = self.next_lr()
        if isinstance(values, np.ndarray):
            values -= lr * grad / (np.sqrt(self.accum) + self.eps)
        else:  # a device tensor: the same float32 operations
            values -= float(lr) * grad / (self.accum.sqrt() + float(self.eps))


def _scalar(x: np.float32, values: Any) -> Any:
    """A float32 constant for an update of ``values`` (a Python float for a tensor)."""
    return x if isinstance(values, np.ndarray) else float(x)


def make_optimizer(
    workload: WorkloadSpec,
    n: int,
    momentum: float | None = None,
    updates_per_iteration: int = 1,
) -> ServerOptimizer:
    """The workload's optimizer for a shard of ``n`` keys, with its warm-up.

    Args:
        workload: The workload (optimizer name, lr, momentum, warm-up).
        n: Number of keys.
        momentum: Overrides the workload's momentum (None: keep it). ``build_job`` passes 0.0
            to the optimizers that apply the averaged update when the workers correct momentum
            themselves (codec ``momentum_correction: true``).
        updates_per_iteration: Updates per iteration: 1 for a barrier's averaged update, a
            replica or local steps; P for a shard that applies each push alone, so that the
            warm-up spans the same iterations everywhere.
    """
    cls = optimizer_class(workload)
    opt = cls(n, workload.lr, workload.momentum if momentum is None else momentum)
    opt.warmup = workload.warmup_iterations
    opt.updates_per_iteration = updates_per_iteration
    return opt


def optimizer_class(workload: WorkloadSpec) -> type[ServerOptimizer]:
    """The class of the workload's optimizer."""
    return OPTIMIZERS.get(workload.optimizer, where=f"workloads.{workload.name}.optimizer")
