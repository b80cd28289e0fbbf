"""Body messages on a pair-ordered link (NCCL's rules), checked on the CPU.

NCCL matches a pair's sends and receives in posting order, ignores tags, and needs a receive
exactly as large as its message. Three levels check that the dist protocol keeps those rules:

* the choice of transport from every rank's seat (pure);
* the wire over an in-process fake that enforces NCCL's rules (every part arrives once, in
  order, exactly sized; nothing pre-posted);
* real runs with ``PSML_DIST_BODIES=gloo-ordered``: the same link over gloo groups at one
  fixed tag, where gloo matches in posting order as NCCL does, on payloads beyond the header
  slot: the parameters and bytes of sim and of tagged gloo, bit for bit.

NCCL itself needs a GPU per rank: ``test_engine_device.py`` runs it where there are two.
"""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from psml_core.config import BlockSpec
from psml_core.data.store import load_prepared
from psml_core.engine import DistBackend, SimBackend, staged_job
from psml_core.engine.torchdist import DistOptions
from psml_core.engine.torchdist import wire as wire_mod
from psml_core.engine.torchdist.bodies import PairLink, Seat, choose_bodies
from psml_core.engine.torchdist.header import HEADER_BYTES, INLINE_BYTES, Channel, Header, Kind
from psml_core.engine.torchdist.wire import ProtocolError, Wire
from psml_core.errors import ConfigError

REPO = Path(__file__).resolve().parents[3]
GPU = [Seat("node1", f"GPU-{i}") for i in range(4)]


# --------------------------------------------------------------------------- the choice


def test_gpus_of_their_own_take_nccl_and_a_cpu_run_keeps_gloo_quietly() -> None:
    assert choose_bodies("auto", GPU, nccl_built=True).name == "nccl"
    assert choose_bodies("nccl", GPU, nccl_built=True).name == "nccl"
    cpu = [Seat("node1", None)] * 4
    assert choose_bodies("auto", cpu, nccl_built=True) == choose_bodies("gloo", GPU, True)
    assert choose_bodies("auto", cpu, nccl_built=True).why_not_nccl == ""
    assert choose_bodies("gloo-ordered", cpu, nccl_built=False).name == "gloo-ordered"
    # The same GPU index on two hosts is two GPUs.
    two_hosts = [Seat("node1", "GPU-0"), Seat("node2", "GPU-0")]
    assert choose_bodies("auto", two_hosts, nccl_built=True).name == "nccl"


@pytest.mark.parametrize(
    ("seats", "built", "why"),
    [
        ([*GPU[:2], GPU[0]], True, "ranks 0 and 2 share one GPU on node1"),
        ([GPU[0], Seat("node1", None)], True, "rank 1 runs on the CPU"),
        (GPU, False, "built without NCCL"),
    ],
)
def test_where_nccl_cannot_run_auto_says_why_and_nccl_refuses(seats, built, why) -> None:
    choice = choose_bodies("auto", seats, nccl_built=built)
    assert choice.name == "gloo" and why in choice.why_not_nccl
    with pytest.raises(ConfigError, match=f"PSML_DIST_BODIES=nccl: .*{why}.*auto"):
        choose_bodies("nccl", seats, nccl_built=built)


def test_the_setting_is_checked_where_it_is_read() -> None:
    assert DistOptions.from_env({"PSML_DIST_BODIES": "gloo-ordered"}).bodies == "gloo-ordered"
    assert DistOptions.from_env({}).bodies == "auto"
    with pytest.raises(ConfigError, match="PSML_DIST_BODIES='mpi': expected one of auto, gloo"):
        DistOptions.from_env({"PSML_DIST_BODIES": "mpi"})


def test_each_direction_of_a_pair_has_its_own_group() -> None:
    """NCCL runs a pair's two directions on one stream per group: split them (see bodies)."""
    link = PairLink("nccl", 1, ("up", "down"), None)
    assert link.group(1, 3) == link.group(0, 1) == "up"
    assert link.group(3, 1) == link.group(1, 0) == "down"


# --------------------------------------------------------------------------- NCCL's rules


class NcclRules:
    """In-process pair-ordered messages with NCCL's matching: no tags, exact sizes, in order."""

    def __init__(self) -> None:
        self.queues: dict[tuple[int, int], deque[bytes]] = defaultdict(deque)
        self.sent: list[int] = []

    def link(self, rank: int) -> Any:
        rules = self

        class Link:
            name = "nccl-rules"

            def isend(self, t: torch.Tensor, dst: int) -> Any:
                rules.queues[(rank, dst)].append(t.numpy().tobytes())
                rules.sent.append(t.numel())
                return Done()

            def irecv(self, buf: np.ndarray, src: int) -> Any:
                class Work(Done):
                    def wait(self) -> None:
                        data = rules.queues[(src, rank)].popleft()
                        assert len(data) == len(buf), "NCCL: a receive of another size"
                        buf[:] = np.frombuffer(data, dtype=np.uint8)

                return Work()

        return Link()


class Done:
    def wait(self) -> None:
        pass

    def is_completed(self) -> bool:
        return True


class TaggedGloo:
    """Headers: gloo's matching per tag, in order (bodies must not come here)."""

    def __init__(self) -> None:
        self.queues: dict[int, deque[bytes]] = defaultdict(deque)
        self.tags: list[int] = []

    def isend(self, t: torch.Tensor, dst: int, tag: int = 0) -> Any:
        self.queues[tag].append(t.numpy().tobytes())
        self.tags.append(tag)
        return Done()

    def irecv(self, buf: torch.Tensor, src: int, tag: int = 0) -> Any:
        gloo = self

        class Work(Done):
            def wait(self) -> None:
                data = gloo.queues[tag].popleft()
                buf[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)

        return Work()


SIZES = [-1, 0, 100, INLINE_BYTES, INLINE_BYTES + 1, 100_000]


@settings(max_examples=40, deadline=None)
@given(
    messages=st.lists(
        st.tuples(st.sampled_from(SIZES), st.sampled_from([0, 12, INLINE_BYTES, INLINE_BYTES + 7])),
        min_size=1,
        max_size=4,
    ),
    seed=st.integers(0, 2**16),
)
def test_bodies_on_the_pair_link_arrive_once_in_order_exactly_sized(messages, seed) -> None:
    gloo, rules = TaggedGloo(), NcclRules()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(wire_mod.dist, "isend", gloo.isend)
        mp.setattr(wire_mod.dist, "irecv", gloo.irecv)
        sender, receiver = Wire(0, pairs=rules.link(0)), Wire(1, pairs=rules.link(1))
        assert not sender.preposts
        rng = np.random.default_rng(seed)
        sent = []
        # Every message is sent before any is received: the receiver posts in the sender's order.
        for i, (payload_len, state_len) in enumerate(messages):
            payload = rng.integers(0, 256, max(payload_len, 0), dtype=np.uint8).tobytes()
            state = rng.integers(0, 256, state_len, dtype=np.uint8).tobytes()
            hdr = Header(Kind.PUSH, 1, i, payload_len, state_len, state_len)
            parts = [payload, state] if state_len else ([payload] if payload_len >= 0 else [])
            sender.send(1, hdr, parts)
            sent.append((hdr, payload if payload_len >= 0 else None, state))
        for hdr, payload, state in sent:
            got = receiver.recv_header(0)
            assert got == hdr
            pl, stt = receiver.recv_parts(0, got)
            assert (bytes(pl) if pl is not None else None) == payload and bytes(stt) == state
    # Headers (with inline parts) on gloo's header tag only; every other byte on the pair link.
    assert set(gloo.tags) == {int(Channel.DATA)}
    total = sum(HEADER_BYTES + len(p or b"") + len(s) for _, p, s in sent)
    assert sender.stats.bytes_sent() == total
    assert sender.stats.paired == [len(rules.sent), sum(rules.sent)]
    assert sum(rules.sent) == sum(sum(h.part_lengths) - h.inline_bytes for h, *_ in sent)
    assert not any(rules.queues.values()) and not any(gloo.queues.values())


def test_a_size_mismatch_on_the_link_is_a_protocol_error_not_a_lost_peer(monkeypatch) -> None:
    """The checking link's ProtocolError comes out of recv_parts as itself (not PeerLost)."""

    class Mismatch:
        name = "gloo-ordered"

        def irecv(self, buf: np.ndarray, src: int) -> Any:
            class Work(Done):
                def wait(self) -> None:
                    raise ProtocolError("rank 1 posted a 9-byte receive for a 10-byte body")

            return Work()

    wire = Wire(1, pairs=Mismatch())  # type: ignore[arg-type]
    hdr = Header(Kind.PUSH, payload_len=INLINE_BYTES + 1)
    with pytest.raises(ProtocolError, match="9-byte receive for a 10-byte body"):
        wire.recv_parts(0, dataclasses.replace(hdr, received=memoryview(b"")))


def test_the_links_open_in_one_order_every_rank_shares() -> None:
    """Workers and shards both ways, shards to shard 0; by pair, then direction."""
    from psml_core.engine.torchdist import Layout
    from psml_core.engine.torchdist.bodies import used_pairs

    assert used_pairs(Layout(shards=2, workers=2)) == [
        (1, 0),
        (0, 2), (2, 0), (0, 3), (3, 0),
        (1, 2), (2, 1), (1, 3), (3, 1),
    ]  # fmt: skip


def test_nothing_is_pre_posted_on_a_pair_link() -> None:
    wire = Wire(0, pairs=NcclRules().link(0))
    with pytest.raises(ProtocolError, match="pre-posted receive on the nccl-rules link"):
        wire.prepost(1, 100_000)
    with pytest.raises(ProtocolError, match="pre-posted PUSH on the nccl-rules link"):
        wire.isend(1, Header(Kind.PUSH, payload_len=100_000), [bytes(100_000)], prepost=100_000)


# --------------------------------------------------------------------------- real processes


def big_spec(smoke, **method):
    """Digits MLP with 1,024 hidden units: every dense push, answer and snapshot is ~150 KB."""
    run = smoke.run("digits_mlp", "dense_bsp", "dc_10g", smoke.seeds[0])
    wl = dataclasses.replace(run.workload, iterations=6, hidden=(1024,), eval_every=3)
    m = dataclasses.replace(run.method, **method)
    return dataclasses.replace(run, workload=wl, workers=2, shards=2, backend="dist", method=m)


@pytest.mark.parametrize(
    "method",
    [
        {},
        {"codec": BlockSpec("dfs", {"ratio": 0.05, "block_size": 64}), "pull": "aggregate"},
    ],
    ids=["dense_bsp", "dfs"],
)
def test_gloo_ordered_runs_give_sims_parameters_and_bytes(smoke, prepared, one_thread, method):
    spec = big_spec(smoke, **method)
    ds = load_prepared(prepared["digits"])
    sim_job = staged_job(spec, ds)
    sim = SimBackend().run(sim_job)
    results = {}
    for bodies in ("gloo", "gloo-ordered"):
        job = staged_job(spec, ds)
        backend = DistBackend(DistOptions(bodies=bodies))
        recs = backend.run(job)
        np.testing.assert_array_equal(job.global_params(), sim_job.global_params())

        def key(r):
            test = None if math.isnan(r.test_loss) else (r.test_loss, r.test_accuracy)
            return (r.iteration, r.worker, r.loss, r.bytes_up, r.bytes_down, test)

        assert [key(r) for r in recs] == [key(r) for r in sim]
        assert any(key(r)[-1] is not None for r in recs)  # the snapshots came through
        assert backend.result is not None and backend.result.bodies == bodies
        assert backend.transport() == {"body_messages": bodies}
        results[bodies] = backend.result.wire
    # The bodies really took the link: shard 1's snapshots (~77 KB); dense, also every push and
    # answer (~150 KB; DFS's fit in the header slot).
    ordered, tagged = results["gloo-ordered"], results["gloo"]
    assert all(w.paired == [0, 0] for w in tagged.values())
    assert ordered[1].paired[0] >= 2
    if not method:
        pushes = spec.workload.iterations * spec.shards
        assert ordered[spec.shards].paired[0] == pushes  # a push to each shard per iteration
        assert ordered[0].paired[0] == spec.workload.iterations * spec.workers  # answers
    assert {r: w.sent for r, w in ordered.items()} == {r: w.sent for r, w in tagged.items()}


def test_nccl_on_a_cpu_run_is_one_line_naming_the_fix(smoke, prepared) -> None:
    job = staged_job(big_spec(smoke), load_prepared(prepared["digits"]))
    with pytest.raises(ConfigError, match="PSML_DIST_BODIES=nccl needs device: cuda"):
        DistBackend(DistOptions(bodies="nccl")).run(job)  # refused before any rank starts


_NO_GPU = r"""
import dataclasses, sys
from pathlib import Path
from psml_core.recipes import load_experiment
from psml_core.data.store import load_prepared
from psml_core.engine import DistBackend, staged_job
from psml_core.engine.torchdist import DistOptions
from psml_core.errors import RunError

if __name__ == "__main__":
    smoke = load_experiment({"tier": "smoke"}, Path(sys.argv[1]))
    run = smoke.run("digits_mlp", "dense_bsp", "dc_10g", smoke.seeds[0])
    spec = dataclasses.replace(run, workers=2, shards=2, backend="dist", torch_device="auto")
    job = staged_job(spec, load_prepared(Path(sys.argv[2])))
    try:
        DistBackend(DistOptions(bodies="nccl")).run(job)
    except RunError as exc:
        print(exc)
"""


@pytest.mark.skipif(torch.cuda.is_available(), reason="device auto takes the GPU here")
def test_nccl_where_a_rank_has_no_gpu_stops_every_rank_with_one_line(prepared, tmp_path):
    """Known only to the ranks (their seats): every rank refuses at once, one of them says it."""
    script = tmp_path / "no_gpu.py"
    script.write_text(_NO_GPU)
    args = [sys.executable, str(script), str(REPO / "config"), str(prepared["digits"])]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert "PSML_DIST_BODIES=nccl: rank 0 runs on the CPU" in done.stdout, done
    said = [line for line in done.stderr.splitlines() if "PSML_DIST_BODIES" in line]
    assert len(said) == 1 and "Traceback" not in done.stderr, done.stderr


_PAIR = r"""
import os, sys
from datetime import timedelta
import numpy as np, torch, torch.distributed as dist
from psml_core.engine.torchdist.bodies import PairLink
from psml_core.engine.torchdist.header import ProtocolError

rank, store_path, order = int(sys.argv[1]), sys.argv[2], sys.argv[3]
store = dist.FileStore(store_path, 2)
dist.init_process_group("gloo", store=store, rank=rank, world_size=2, timeout=timedelta(seconds=30))
groups = (dist.new_group(backend="gloo"), dist.new_group(backend="gloo"))
if order == "staged":  # NCCL's path: bodies staged in a separate device buffer, copied back
    link = PairLink("staged", rank, groups, torch.device("cpu"))
else:
    link = PairLink("gloo-ordered", rank, groups, None)
if rank == 0:
    sends = [link.isend(torch.full((n,), n, dtype=torch.uint8), 1) for n in (10, 20)]
    store.wait(["done"])
    os._exit(0)
sizes = (20, 10) if order == "swapped" else (10, 20)
try:
    for n in sizes:
        buf = np.zeros(n, dtype=np.uint8)
        link.irecv(buf, 0).wait()
        assert (buf == n).all()
    print("received in order")
except ProtocolError as exc:
    print(exc)
store.set("done", "1")
sys.stdout.flush()
os._exit(0)
"""


@pytest.mark.parametrize("order", ["same", "swapped", "staged"])
def test_the_checking_link_refuses_receives_out_of_the_senders_order(tmp_path, order) -> None:
    """gloo-ordered fails where NCCL would: a pair's receives posted out of the send order.

    ``staged``: the link's staging path (a receive into its own buffer, copied to the host
    buffer at ``wait``) over gloo, with the CPU standing in for the GPU; the CUDA parts (the
    link's stream, the synchronisation) run only on a GPU (``test_engine_device.py``).
    """
    script = tmp_path / "pair.py"
    script.write_text(_PAIR)
    store = str(tmp_path / "store")
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(r), store, order],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        for r in (0, 1)
    ]
    out = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], out
    if order != "swapped":
        assert "received in order" in out[1]
    else:
        assert (
            "rank 1 posted a 20-byte receive for a 10-byte body from rank 0: the pair's "
            "receives left the sender's order" in out[1]
        )
