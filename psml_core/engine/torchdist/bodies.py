"""Where a dist message's body messages travel: gloo by tag, or a pair-ordered link (NCCL).

A message's header always goes over gloo (the shard's inbox waits on header slots posted per
peer, :mod:`.inbox`). Its body messages — the parts beyond the header slot (:mod:`.wire`) —
go between a known pair, and both ends know their sizes from the header, so they can take
another transport. ``PSML_DIST_BODIES`` (:class:`~.settings.DistOptions`) picks it:

* ``gloo``: the default group, tag ``c + 1`` for bodies and ``c + 2`` for receives pre-posted
  with a capacity (a large payload flows after one latency, see :mod:`.wire`).
* ``nccl``: a :class:`PairLink` over NCCL groups, between GPUs. NCCL has no tags and no
  receive larger than its message: the two ends of a pair match sends and receives in posting
  order, and a receive's size must equal the send's. So nothing is pre-posted: every body is
  received, exactly sized, once its header is in. The sender's first chunks go ahead into the
  pair's connection buffer (a part of ``NCCL_BUFFSIZE``, 4 MiB by default), the rest once the
  receive is posted, so a body beyond that pays the wait for its receive, as an unposted gloo
  receive does.
* ``gloo-ordered``: the same :class:`PairLink` over gloo groups at one fixed tag, where gloo
  matches a pair's messages in posting order as NCCL does, with each body's size sent first and
  checked: NCCL's matching rules (order, exact sizes) on any machine, which is how the CPU
  tests check the messages NCCL carries. NCCL's progress rules (a communicator opened at its
  first message, streams) only a GPU run checks.
* ``auto`` (default): ``nccl`` where the run is on GPUs and every rank has a GPU of its own,
  else ``gloo``; one line says why a GPU run keeps gloo.

Direction groups. PyTorch's NCCL groups run both directions of a pair on one communicator and
one CUDA stream, so a shard's receive of a push queued before its answer to that worker,
against the worker's receive of the answer queued before its push, would wait on each other.
:class:`PairLink` therefore opens two groups, one for messages to a higher rank and one for
messages to a lower rank: on each, a pair carries one direction only, and the receiver's
posting order (the sender's order, which :mod:`.wire` keeps) is the only order that matters.
Every communicator a run uses is opened before it starts (:meth:`PairLink.connect`), in one
order all ranks share: opened mid-run, two first messages could wait on each other through a
third rank.

Copies. Payloads are host bytes (the codecs' exact wire format), so on NCCL a body is copied
to the sender's GPU, sent, and copied back to the receiver's host: the bytes counted are the
bytes sent, and a wait on either end returns once the transfer is complete (the stream is
synchronised), so the wall clock measures it as it does gloo's.
"""

from __future__ import annotations

import contextlib
import socket
import sys
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from psml_core.engine.torchdist.header import ProtocolError
from psml_core.engine.torchdist.settings import Layout
from psml_core.errors import ConfigError

__all__ = [
    "BodyChoice",
    "PairLink",
    "Seat",
    "choose_bodies",
    "open_bodies",
    "used_pairs",
    "why_not_nccl",
]

_TAG = 0  # the one tag of a pair-ordered link (NCCL ignores tags)


@dataclass(frozen=True)
class Seat:
    """Where a rank runs: its host, and its GPU's UUID (None: on the CPU)."""

    host: str
    gpu: str | None


@dataclass(frozen=True)
class BodyChoice:
    """The body transport every rank uses, and why a GPU run does not use NCCL (or "")."""

    name: str
    why_not_nccl: str = ""


def choose_bodies(setting: str, seats: list[Seat], nccl_built: bool) -> BodyChoice:
    """The body transport of a run, the same on every rank (they all see the same seats).

    Args:
        setting: ``PSML_DIST_BODIES``, one of :data:`~.settings.BODY_TRANSPORTS` (checked by
            :class:`~.settings.DistOptions`).
        seats: Every rank's seat, by rank.
        nccl_built: Whether this torch has NCCL (``dist.is_nccl_available()``).

    Raises:
        ConfigError: ``nccl`` where it cannot run, naming why and the fix.
    """
    if setting in ("gloo", "gloo-ordered"):
        return BodyChoice(setting)
    why = why_not_nccl(seats, nccl_built)
    if setting == "nccl" and why:
        raise ConfigError(
            f"PSML_DIST_BODIES=nccl: {why}; use PSML_DIST_BODIES=auto (NCCL where it can run, "
            "else gloo) or gloo"
        )
    if why and all(s.gpu is None for s in seats):
        return BodyChoice("gloo")  # a CPU run: nothing to say
    return BodyChoice("gloo", why) if why else BodyChoice("nccl")


def why_not_nccl(seats: list[Seat], nccl_built: bool) -> str:
    """Why NCCL cannot carry these ranks' bodies ("" if it can)."""
    cpu = [r for r, s in enumerate(seats) if s.gpu is None]
    if cpu:
        return f"rank {cpu[0]} runs on the CPU (NCCL moves data between GPUs only)"
    if not nccl_built:
        return "this torch is built without NCCL"
    first: dict[tuple[str, str | None], int] = {}
    for r, s in enumerate(seats):
        other = first.setdefault((s.host, s.gpu), r)
        if other != r:
            return (
                f"ranks {other} and {r} share one GPU on {s.host} (NCCL refuses two ranks of "
                "a communicator on one GPU; give every rank a GPU of its own)"
            )
    return ""


def _seat(device: torch.device) -> Seat:
    if device.type != "cuda":
        return Seat(socket.gethostname(), None)
    props = torch.cuda.get_device_properties(device)
    uuid = getattr(props, "uuid", None)
    return Seat(socket.gethostname(), str(uuid) if uuid is not None else f"cuda:{device.index}")


def open_bodies(
    setting: str, device: torch.device, rank: int, layout: Layout, timeout_s: float
) -> PairLink | None:
    """Agree on the body transport with every rank (a collective) and open it.

    Args:
        setting: ``PSML_DIST_BODIES`` (:class:`~.settings.DistOptions`).
        device: This rank's device (:func:`~psml_core.engine.torch_device.rank_device`).
        rank: This rank.
        layout: Which rank is which role: the pairs whose links are opened here.
        timeout_s: The groups' operation timeout (``PSML_DIST_OP_TIMEOUT_S``).

    Returns:
        The pair-ordered link (``nccl``, ``gloo-ordered``), or None for tagged gloo.

    Raises:
        ConfigError: ``nccl`` where it cannot run (:func:`choose_bodies`).
    """
    if setting == "gloo":
        return None
    if device.type == "cuda":
        torch.cuda.set_device(device)
    seats: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(seats, _seat(device))
    choice = choose_bodies(setting, seats, dist.is_nccl_available())
    if choice.why_not_nccl and rank == 0:
        print(f"psml dist: body messages go over gloo: {choice.why_not_nccl}", file=sys.stderr)
    if choice.name == "gloo":
        return None
    backend = "nccl" if choice.name == "nccl" else "gloo"
    timeout = timedelta(seconds=timeout_s)
    # Every rank creates both groups, in this order (new_group is a collective).
    groups = (
        dist.new_group(backend=backend, timeout=timeout),
        dist.new_group(backend=backend, timeout=timeout),
    )
    link = PairLink(choice.name, rank, groups, device if backend == "nccl" else None)
    link.connect(used_pairs(layout))
    return link


def used_pairs(layout: Layout) -> list[tuple[int, int]]:
    """Every (sender, receiver) that carries DATA bodies, in one order that all ranks share.

    Workers and shards both ways (pushes, pull key lists; answers), and each shard to shard 0
    (snapshots).
    """
    pairs = [(s, 0) for s in range(1, layout.shards)]
    for s in range(layout.shards):
        for w in range(layout.workers):
            pairs += [(s, layout.worker_rank(w)), (layout.worker_rank(w), s)]
    return sorted(pairs, key=lambda p: (min(p), max(p), p[0] > p[1]))


class _Transfer:
    """One body send or receive on a pair-ordered link.

    ``wait`` returns once the transfer is complete on the host: on a GPU the link's stream is
    synchronised (a NCCL work's ``wait`` only orders the current stream), and a receive's bytes
    are copied into the host buffer.
    """

    def __init__(
        self,
        works: list[Any],
        device_buf: torch.Tensor,
        host: torch.Tensor | None,
        stream: torch.cuda.Stream | None,
    ) -> None:
        self.works, self.device_buf, self.host, self.stream = works, device_buf, host, stream

    def is_completed(self) -> bool:
        """Whether every part has completed (NCCL: its kernels have run)."""
        return all(w.is_completed() for w in self.works)

    def wait(self) -> None:
        """Block the host until the transfer is complete and a receive is in its host buffer."""
        with _on(self.stream):
            for w in self.works:
                w.wait()
            if self.stream is not None:
                self.stream.synchronize()
            if self.host is not None:
                self.host.copy_(self.device_buf)
                self.host = None


def _on(stream: torch.cuda.Stream | None) -> Any:
    """The context that makes ``stream`` current (nothing for host bodies)."""
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


class _CheckedReceive:
    """``gloo-ordered``: the sender's size word, checked against the receive, then the body.

    Gloo completes a receive larger than its message without a word (NCCL would wait for the
    missing bytes), so the checking link sends each body's size first. Both are posted at
    ``wait``, in order, so a pair's receives stay in the sender's order.
    """

    def __init__(self, link: PairLink, buf: np.ndarray, src: int) -> None:
        self.link, self.buf, self.src = link, buf, src

    def wait(self) -> None:
        """Receive and check the size, then receive the body (ProtocolError on a mismatch)."""
        link, src, group = self.link, self.src, self.link.group(self.src, self.link.rank)
        size = torch.zeros(1, dtype=torch.int64)
        dist.irecv(size, src, group=group, tag=_TAG).wait()
        if int(size) != len(self.buf):
            raise ProtocolError(
                f"rank {link.rank} posted a {len(self.buf)}-byte receive for a {int(size)}-byte "
                f"body from rank {src}: the pair's receives left the sender's order, where NCCL "
                "would hang or fail"
            )
        dist.irecv(torch.from_numpy(self.buf), src, group=group, tag=_TAG).wait()


class PairLink:
    """Body messages between known pairs, matched in posting order (see the module docstring).

    Args:
        name: ``nccl`` or ``gloo-ordered`` (which also sends each body's size first, and checks
            it at the receiver: NCCL's exact-size rule, not a timing transport).
        rank: This rank.
        groups: The group of messages to a higher rank, and that of messages to a lower one.
        device: Where bodies are staged (the rank's GPU for NCCL; None: they stay on the host).
            On a GPU the link has its own stream, so its copies and waits never queue behind
            the model's kernels (rank 0 evaluates on the default stream meanwhile).
    """

    def __init__(
        self, name: str, rank: int, groups: tuple[Any, Any], device: torch.device | None
    ) -> None:
        self.name, self.rank, self.groups, self.device = name, rank, groups, device
        self.checks = name == "gloo-ordered"
        cuda = device is not None and device.type == "cuda"
        self.stream = torch.cuda.Stream(device) if cuda else None

    def group(self, src: int, dst: int) -> Any:
        """The group of messages from ``src`` to ``dst``: one direction per pair and group."""
        return self.groups[0 if src < dst else 1]

    def connect(self, pairs: list[tuple[int, int]]) -> None:
        """One byte per (sender, receiver) of ``pairs``, each completed before the next.

        NCCL opens a pair's communicator at its first message, and that blocks the host until
        the peer posts the matching one. Mid-run, two such first messages can wait on each
        other through a third rank; opened here, in an order every rank shares, the earliest
        pair not yet open always has both ends at it, so all open.
        """
        for src, dst in pairs:
            if self.rank not in (src, dst):
                continue
            one = torch.zeros(1, dtype=torch.uint8, device=self.device or "cpu")
            with _on(self.stream):
                if self.rank == src:
                    work = dist.isend(one, dst, group=self.group(src, dst), tag=_TAG)
                else:
                    work = dist.irecv(one, src, group=self.group(src, dst), tag=_TAG)
                _Transfer([work], one, None, self.stream).wait()

    def isend(self, t: torch.Tensor, dst: int) -> _Transfer:
        """Send ``t`` (host bytes) to ``dst``; the returned transfer keeps its buffers alive."""
        group = self.group(self.rank, dst)
        works = []
        with _on(self.stream):
            staged = t if self.device is None else t.to(self.device)
            if self.checks:
                size = torch.tensor([t.numel()], dtype=torch.int64)
                works.append(dist.isend(size, dst, group=group, tag=_TAG))
            works.append(dist.isend(staged, dst, group=group, tag=_TAG))
        return _Transfer(works, staged, None, self.stream)

    def irecv(self, buf: np.ndarray, src: int) -> _Transfer | _CheckedReceive:
        """Receive exactly ``len(buf)`` bytes from ``src`` into ``buf``."""
        if self.checks:
            return _CheckedReceive(self, buf, src)
        host = torch.from_numpy(buf)
        with _on(self.stream):
            if self.device is None:
                staged, copy_to = host, None
            else:
                staged = torch.empty(len(buf), dtype=torch.uint8, device=self.device)
                copy_to = host
            work = dist.irecv(staged, src, group=self.group(src, self.rank), tag=_TAG)
        return _Transfer([work], staged, copy_to, self.stream)
