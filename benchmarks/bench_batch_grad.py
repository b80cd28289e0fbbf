"""P replicas' gradients on one device: psml's paths against plain module copies and the floor.

P replicas of one model, each with its own parameters and its own batch of B rows, forward and
backward, milliseconds of wall-clock time per iteration (all P replicas):

- ``psml per-replica``: ``Model.loss_grads(batched=False)``, one ``loss_grad`` per replica (the
  sim backend's path today; tensor parameters on a GPU, as the run keeps them there);
- ``module copies``: P plain copies of the module, their parameters loaded once, forward and
  backward one after another (no flat vector in or out);
- ``psml batched fp32``: ``Model.loss_grads(batched=True)``, ``torch.func.vmap`` over the
  replicas' stacked parameters (``psml_core/models/torch_net.py``);
- ``psml batched, one shared replica``: the same call with one parameter vector for every
  replica (the sim's batched step under a barrier, ``engine/sim/gradients.py``): ``vmap`` over
  the batches only, each layer running once on all P x B rows;
- ``batched bf16 autocast``: the same call inside ``torch.autocast(bfloat16)``: what bf16 would
  buy; not a psml setting (it changes the numerics);
- ``floor``: one module on all P x B rows at once, the FLOPs of the work without the replicas.

Each path runs once untimed (allocations, cuDNN's choice of kernels), then ``--trials`` times in
turn; the table gives each path's median and the median of its per-trial ratio to the floor of
the same trial. It also gives how far the batched gradients are from the per-replica ones
(per replica, the largest difference over the largest entry; median and largest). Default:
the paper tier's ResNet-18 (width 64, 32 GroupNorm groups, 32x32 images) at P = 16, B = 32;
smaller with the flags. ``--workers`` is another name for ``--replicas``.

``--json FILE`` writes ``device``, ``setting`` (the flags), ``n_params``, ``tf32`` (on a GPU:
whether convolutions and matrix products may use TF32), ``batched_deviation`` (one number per
replica) and ``rows``: one ``{"path", "ms", "x_floor"}`` per line of the table, in its order.

Usage: python benchmarks/bench_batch_grad.py [--device cpu|cuda|auto] [--model resnet18|cnn|mlp]
       [--replicas 16] [--batch 32] [--width 64] [--groups 32] [--side 32] [--trials 5]
       [--threads 1] [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import statistics
import sys
import time
from collections.abc import Callable, Iterator

import numpy as np
import torch
from torch import nn

from psml_core.atomic import write_json
from psml_core.config import WorkloadSpec
from psml_core.engine.torch_device import device_provenance, resolve_device
from psml_core.errors import ConfigError
from psml_core.models import ResNet18, make_model
from psml_core.models.torch_net import TorchNet

PATHS = (
    "psml per-replica",
    "module copies, one after another",
    "psml batched fp32",
    "psml batched, one shared replica (the sim's step)",
    "batched bf16 autocast (not a psml setting)",
    "floor: one module on all P x B rows",
)


def build(args: argparse.Namespace) -> tuple[TorchNet, int]:
    """The model and its input width for ``--model``."""
    if args.model == "resnet18":
        features = 3 * args.side * args.side
        wl = WorkloadSpec(
            name="w", dataset="d", model="resnet18", batch_size=args.batch, lr=0.1, iterations=1
        )
        return ResNet18(features, 10, wl, width=args.width, groups=args.groups), features
    hidden, features = ((16, 32, 640), 784) if args.model == "cnn" else ((128, 64), 784)
    wl = WorkloadSpec(
        name="w", dataset="d", model=args.model, hidden=hidden, batch_size=args.batch, lr=0.1,
        iterations=1,
    )  # fmt: skip
    return make_model(wl, features, 10), features  # type: ignore[return-value]


def sync(device: torch.device) -> None:
    """Wait for the device's queued work, so that the clock times it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def paths(
    model: TorchNet, params: list, Xs: list[np.ndarray], ys: list[np.ndarray]
) -> dict[str, Callable[[], object]]:
    """One callable per path, each doing one iteration's P forward and backward passes."""
    device = model.device
    copies = []
    for p in params:
        net = copy.deepcopy(model.net)
        flat = torch.as_tensor(p, dtype=torch.float32).to(device)
        nn.utils.vector_to_parameters(flat.clone(), net.parameters())
        copies.append(net)
    xs = [model._x(X) for X in Xs]
    ts = [model._t(y) for y in ys]
    x_all, t_all = torch.cat(xs), torch.cat(ts)
    floor_net = copies[0]

    def one(net: nn.Module, x: torch.Tensor, t: torch.Tensor) -> None:
        net.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(net(x), t).backward()

    def bf16() -> object:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            return model.loss_grads(params, Xs, ys, batched=True)

    return {
        PATHS[0]: lambda: model.loss_grads(params, Xs, ys),
        PATHS[1]: lambda: [one(n, x, t) for n, x, t in zip(copies, xs, ts, strict=True)],
        PATHS[2]: lambda: model.loss_grads(params, Xs, ys, batched=True),
        PATHS[3]: lambda: model.loss_grads([params[0]] * len(params), Xs, ys, batched=True),
        PATHS[4]: bf16,
        PATHS[5]: lambda: one(floor_net, x_all, t_all),
    }


def tf32() -> dict[str, bool]:
    """Whether cuDNN's convolutions and cuBLAS's matrix products may use TF32."""
    return {
        "convolutions": bool(torch.backends.cudnn.allow_tf32),
        "matmul": bool(torch.backends.cuda.matmul.allow_tf32),
    }


def timed(fn: Callable[[], object], device: torch.device) -> float:
    """Seconds of one call, the device's queue drained before and after."""
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t0


def deviations(model: TorchNet, params: list, Xs: list, ys: list) -> list[float]:
    """Per replica, largest |batched - per-replica| gradient entry over the largest entry."""
    looped = model.loss_grads(params, Xs, ys)
    batched = model.loss_grads(params, Xs, ys, batched=True)
    out = []
    for (_, a), (_, b) in zip(looped, batched, strict=True):
        a64, b64 = torch.as_tensor(a).double(), torch.as_tensor(b).double()
        out.append(float((b64 - a64).abs().max() / a64.abs().max().clamp_min(1e-30)))
    return out


def measure(args: argparse.Namespace, device: torch.device) -> dict:
    """Every path's median milliseconds and median ratio to the floor, with the setting."""
    model, features = build(args)
    rng = np.random.default_rng(0)
    # Initialised on the host, as build_job does, then perturbed: P different replicas.
    host = [
        model.init_params(0) + rng.normal(0, 0.01, model.n_params).astype(np.float32)
        for _ in range(args.replicas)
    ]
    model.to(device)
    # On a GPU the sim keeps parameters there (device_state); on the CPU they are arrays.
    params = [torch.from_numpy(p).to(device) for p in host] if device.type == "cuda" else host
    Xs = [rng.standard_normal((args.batch, features)).astype(np.float32) for _ in host]
    ys = [rng.integers(0, 10, args.batch) for _ in host]
    fns = paths(model, params, Xs, ys)
    for fn in fns.values():
        timed(fn, device)  # warm-up
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(args.trials):
        for name, fn in fns.items():
            times[name].append(timed(fn, device))
    floor = times[PATHS[-1]]
    rows = [
        {
            "path": name,
            "ms": statistics.median(ts) * 1e3,
            "x_floor": statistics.median(t / f for t, f in zip(ts, floor, strict=True)),
        }
        for name, ts in times.items()
    ]
    setting = {k: v for k, v in vars(args).items() if k != "json"}
    return {
        "device": device_provenance(device),
        "setting": setting,
        "n_params": model.n_params,
        # TF32 (a GPU's reduced-precision float32 products) changes every path's numerics.
        "tf32": None if device.type != "cuda" else tf32(),
        "batched_deviation": deviations(model, params, Xs, ys),
        "rows": rows,
    }


def table(result: dict) -> str:
    """The rows as a Markdown table."""
    s = result["setting"]
    lines = [
        f"device: {result['device']}; {s['model']} ({result['n_params']:,} parameters), "
        f"P = {s['replicas']} replicas x B = {s['batch']} rows; median of {s['trials']} "
        "trials, wall-clock" + ("" if result["tf32"] is None else f"; TF32 {result['tf32']}"),
        "",
        "| path | ms per iteration | x floor |",
        "|---|---:|---:|",
    ]
    lines += [f"| {r['path']} | {r['ms']:.1f} | {r['x_floor']:.2f} |" for r in result["rows"]]
    dev = result["batched_deviation"]
    lines.append(
        f"\nbatched against per-replica gradients, relative to the largest entry: median "
        f"{statistics.median(dev):.1e}, largest {max(dev):.1e} (a replica with a ReLU input "
        "within float32 rounding of zero jumps on either path: TorchNet's docstring)"
    )
    return "\n".join(lines)


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """Bad settings end the run with one line, not a traceback."""
    try:
        yield
    except (ConfigError, ValueError) as exc:
        sys.exit(f"bench_batch_grad: {exc}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto", choices=["cpu", "cuda", "auto"])
    ap.add_argument("--model", default="resnet18", choices=["resnet18", "cnn", "mlp"])
    ap.add_argument("--replicas", "--workers", type=int, default=16, help="P")
    ap.add_argument("--batch", type=int, default=32, help="B, rows per replica")
    ap.add_argument("--width", type=int, default=64, help="resnet18: first stage's channels")
    ap.add_argument("--groups", type=int, default=32, help="resnet18: GroupNorm groups")
    ap.add_argument("--side", type=int, default=32, help="resnet18: image side")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (CPU)")
    ap.add_argument("--json", default=None, help="also write the result here")
    args = ap.parse_args()
    if min(args.replicas, args.batch, args.trials, args.threads) < 1:
        ap.error("--replicas, --batch, --trials and --threads must be at least 1")
    if args.model == "resnet18" and (
        args.side < 8 or args.groups < 1 or args.width < 1 or args.width % args.groups
    ):
        ap.error("resnet18 needs --side of at least 8 and --groups dividing --width")
    torch.set_num_threads(args.threads)
    with one_line_errors():
        result = measure(args, resolve_device(args.device))
    print(table(result), flush=True)
    if args.json:
        try:
            write_json(args.json, result)
        except OSError as exc:
            sys.exit(f"bench_batch_grad: --json {args.json}: {exc.strerror}; give a writable path")


if __name__ == "__main__":
    main()
