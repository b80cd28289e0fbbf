"""The dist backend: real processes over torch.distributed (gloo) on loopback.

Runs use the local spawner (forkserver children), P = 2 workers and S = 1 or 2 shards, and a
few dozen digits-MLP iterations; the launcher tests start real processes (torchrun, a fake
srun) and are the slow part.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from psml_core.codecs import CodecContext, make_codec
from psml_core.codecs.base import CODECS, Payload
from psml_core.config import BlockSpec
from psml_core.data.store import load_prepared
from psml_core.engine import DistBackend, SimBackend, staged_job
from psml_core.engine.torchdist import DistOptions, Faults, Layout
from psml_core.engine.torchdist.env import RankEnv, first_host, rank_env
from psml_core.engine.torchdist.header import INLINE_BYTES
from psml_core.engine.torchdist.launch import main as launch_main
from psml_core.engine.torchdist.state import decode_state, encode_state
from psml_core.engine.torchdist.wire import (
    HEADER_BYTES,
    BufferPool,
    Header,
    Kind,
    Prepost,
    ProtocolError,
    Wire,
)
from psml_core.errors import ConfigError, RunError

REPO = Path(__file__).resolve().parents[3]


def dist_spec(smoke, iterations=12, workers=2, shards=2, **method):
    run = smoke.run("digits_mlp", "dense_bsp", "dc_10g", smoke.seeds[0])
    wl = dataclasses.replace(run.workload, iterations=iterations)
    return dataclasses.replace(
        run,
        workload=wl,
        workers=workers,
        shards=shards,
        backend="dist",
        method=dataclasses.replace(run.method, **method),
    )


def run_both(spec, prepared, options=None):
    ds = load_prepared(prepared[spec.dataset.name])
    sim_job = staged_job(spec, ds)
    sim = SimBackend().run(sim_job)
    job = staged_job(spec, ds)
    backend = DistBackend(options or DistOptions())
    recs = backend.run(job)
    return sim_job, sim, job, recs, backend


def by_worker(recs, p):
    return sorted((r for r in recs if r.worker == p), key=lambda r: r.iteration)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- pure pieces


def test_layout_names_roles_and_checks_world_size():
    lay = Layout(shards=2, workers=3)
    assert [lay.describe(r) for r in (0, 1, 2, 4)] == [
        "rank 0 (shard 0)",
        "rank 1 (shard 1)",
        "rank 2 (worker 0)",
        "rank 4 (worker 2)",
    ]
    assert lay.worker_rank(1) == 3 and lay.world_size == 5
    with pytest.raises(ConfigError, match=r"needs 5 processes \(2 server shards \+ 3 workers\)"):
        lay.check_world(4, "r")


def test_torchrun_variables():
    env = {
        "RANK": "3",
        "WORLD_SIZE": "4",
        "LOCAL_RANK": "3",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29500",
        "TORCHELASTIC_RUN_ID": "x",
        "TORCHELASTIC_USE_AGENT_STORE": "True",
        "TORCHELASTIC_RESTART_COUNT": "2",
        "SLURM_PROCID": "0",  # torchrun inside an allocation: torchrun's variables win
    }
    e = rank_env(env)
    assert e == RankEnv(3, 4, 3, "10.0.0.1", 29500, "torchrun", "agent", 2)
    assert not e.hosts_store
    e = rank_env({**env, "RANK": "0", "TORCHELASTIC_USE_AGENT_STORE": "False"})
    assert e.store_host == "rank0" and e.hosts_store and e.launcher == "torchrun"
    spawned = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}
    assert rank_env({**spawned, "PSML_DIST_STORE": "external"}).store_host == "spawner"
    with pytest.raises(ConfigError, match="MASTER_ADDR or MASTER_PORT"):
        rank_env({"RANK": "0", "WORLD_SIZE": "2"})
    with pytest.raises(ConfigError, match="RANK=.* is not an integer"):
        rank_env({**spawned, "RANK": "x"})


def test_slurm_variables():
    env = {
        "SLURM_PROCID": "5",
        "SLURM_NTASKS": "6",
        "SLURM_LOCALID": "1",
        "SLURM_JOB_ID": "1234",
        "SLURM_STEP_ID": "2",
        "SLURM_JOB_NODELIST": "gpu[07-09],cpu1",
        "SLURM_STEP_NODELIST": "gpu[08-09]",
    }
    seen = []
    e = rank_env(env, resolve_host=lambda nodes: seen.append(nodes) or "gpu08")
    assert seen == ["gpu[08-09]"]  # the step's nodes, not the whole allocation's
    assert e == RankEnv(5, 6, 1, "gpu08", 10000 + (31 * 1234 + 2) % 50000, "slurm", "rank0", 0)
    e = rank_env({**env, "MASTER_ADDR": "n1", "MASTER_PORT": "4000"}, resolve_host=None)
    assert (e.master_addr, e.master_port) == ("n1", 4000)
    del env["SLURM_NTASKS"]
    assert rank_env({**env, "SLURM_NPROCS": "6"}, resolve_host=first_host).world_size == 6
    with pytest.raises(ConfigError, match="SLURM_NTASKS"):
        rank_env(env, resolve_host=first_host)
    with pytest.raises(ConfigError, match="neither RANK/WORLD_SIZE .* nor SLURM_PROCID"):
        rank_env({})


@pytest.mark.parametrize(
    "nodelist, host",
    [
        ("node1", "node1"),
        ("node[001-004,007],gpu05", "node001"),
        ("gpu[12,03-05]", "gpu12"),
        ("rack[2-3]-n[08-09]", "rack2-n08"),
        ("a,b[1-2]", "a"),
    ],
)
def test_first_host_of_a_nodelist(nodelist, host):
    assert first_host(nodelist) == host


def test_options_and_faults_from_env():
    o = DistOptions.from_env({"PSML_DIST_COUNT_HEADER": "yes", "PSML_DIST_DEAD_AFTER_S": "3"})
    assert o.count_header and o.dead_after_s == 3 and o.op_timeout_s == DistOptions().op_timeout_s
    with pytest.raises(ConfigError, match="PSML_DIST_DEAD_AFTER_S"):
        DistOptions.from_env({"PSML_DIST_DEAD_AFTER_S": "-1"})
    f = Faults.from_env({"PSML_DIST_KILL_RANK": "2", "PSML_DIST_DELAY": "3=0.5,4=1"})
    assert f == Faults(2, 0, {3: 0.5, 4: 1.0})
    assert Faults.from_env({}) == Faults()
    with pytest.raises(ConfigError):
        Faults.from_env({"PSML_DIST_DELAY": "3:0.5"})


def test_header_round_trip_and_accounting():
    h = Header(Kind.ANSWER, worker=3, clock=7, payload_len=100, state_len=40, state_codec=9)
    h2 = dataclasses.replace(h, staleness=2, blocked_ns=123)
    assert Header.from_tensor(h2.tensor()) == h2 and h2.tensor().numel() * 8 == HEADER_BYTES
    assert (h.codec_bytes, h.protocol_bytes) == (109, HEADER_BYTES + 31)
    p = Header(Kind.PUSH, 1, 2, payload_len=8, ratio=0.01)
    assert Header.from_tensor(p.tensor()).ratio == 0.01
    assert Header(Kind.ANSWER).codec_bytes == 0  # payload_len -1: nothing to apply
    with pytest.raises(ProtocolError, match="unknown message kind"):
        Header.from_tensor(torch.tensor([99, 0, 0, 0, 0, 0, 0, 0]))


def test_codec_state_is_bit_packed_and_exact():
    mask = np.random.default_rng(0).random(1001) < 0.3
    extra = {"dfs_block_size": 64, "dfs_mask": mask, "bounds": np.arange(5, dtype=np.int64)}
    blob = encode_state(extra)
    back = decode_state(memoryview(blob))
    assert back["dfs_block_size"] == 64 and back["dfs_mask"].dtype == np.bool_
    np.testing.assert_array_equal(back["dfs_mask"], mask)
    np.testing.assert_array_equal(back["bounds"], extra["bounds"])
    # The mask costs ceil(n/8) bytes, as codecs declare; the rest is (small) framing.
    assert (1001 + 7) // 8 + 40 < len(blob) < (1001 + 7) // 8 + 40 + 150
    assert encode_state({}) == b"" and decode_state(b"") == {}
    with pytest.raises(TypeError, match="codec state 'f'"):
        encode_state({"f": object()})


def test_buffer_pool_reuses_a_buffer_once_its_views_are_gone():
    pool = BufferPool(min_bytes=1024)
    a = pool.take(5000)
    base = a.base
    view = memoryview(a)
    del a
    b = pool.take(5000)
    assert b.base is not base  # still referenced through the memoryview
    del view
    assert pool.take(4000).base is base  # same 1 MiB size class, returned
    assert b.base is not base


def test_a_pre_posted_payload_keeps_its_buffer_until_it_is_dropped():
    """A shard holds a barrier round's pushes; their pre-posted buffers must not be reused.

    The payload is a slice of the pre-posted buffer: a NumPy slice references only the base
    array, so the pool would take the buffer back while the payload still points into it.
    """

    class Done:
        def wait(self) -> None:
            pass

    n = INLINE_BYTES + 100  # beyond the header slot: a pre-posted payload
    pool = BufferPool(min_bytes=1024)
    wire = Wire(0, pool)
    pre = Prepost(Done(), pool.take(n + 8000), n + 8000)
    base = pre.buf.base
    pre.buf[:n] = 7
    payload, _ = wire.recv_parts(1, Header(Kind.PUSH, payload_len=n), pre=pre)
    assert payload is not None and len(payload) == n
    del pre
    fresh = pool.take(n + 8000)
    assert fresh.base is not base  # the held payload still owns it
    fresh[:] = 0
    assert bytes(payload) == b"\x07" * n
    del payload
    assert pool.take(n + 8000).base is base  # returned once the payload is gone


@pytest.mark.parametrize("name", CODECS.names())
def test_codecs_decode_memoryview_buffers(name):
    """Received parts reach codecs as memoryviews (zero-copy); every codec must accept them."""
    codec = make_codec(BlockSpec(name))
    ctx = CodecContext(step=0, ratio=0.1, seed=3, lr=0.1)
    x = np.random.default_rng(1).standard_normal(2000).astype(np.float32)
    p = codec.encode(x, ctx)
    mv = Payload(p.codec, p.n, memoryview(bytearray(p.buffer)))
    np.testing.assert_array_equal(codec.decode(mv, ctx), codec.decode(p, ctx))
    srv = codec.server()
    d = srv.encode_down(codec.decode(p, ctx), ctx)
    dmv = Payload(d.codec, d.n, memoryview(bytearray(d.buffer)))
    np.testing.assert_array_equal(srv.decode_down(dmv, ctx), srv.decode_down(d, ctx))


def test_launcher_rejects_a_wrong_world_size(smoke, monkeypatch, capsys, tmp_path):
    spec = dist_spec(smoke)
    for k in ("SLURM_PROCID", "TORCHELASTIC_USE_AGENT_STORE"):
        monkeypatch.delenv(k, raising=False)
    env = {"RANK": "0", "WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    code = launch_main(["--run", spec.to_json(), "--data", "x", "--out", str(tmp_path / "o")])
    assert code == 2
    assert "needs 4 processes (2 server shards + 2 workers) but the launcher started 3" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "o").exists()


# --------------------------------------------------------------------------- runs


def test_bsp_dense_same_parameters_and_bytes_as_sim(smoke, prepared, one_thread):
    """Differential: same seed, same float operations in the same order: bit-identical."""
    spec = dist_spec(smoke)
    sim_job, sim, job, recs, backend = run_both(spec, prepared)
    np.testing.assert_array_equal(job.global_params(), sim_job.global_params())

    def key(r):
        return (r.iteration, r.worker, r.loss, r.bytes_up, r.bytes_down, r.remote_bytes_up,
                r.remote_bytes_down, r.shard_bytes_up, r.shard_bytes_down, r.staleness,
                r.ratio)  # fmt: skip

    assert [key(r) for r in recs] == [key(r) for r in sim]
    evaluated = [(r.test_loss, r.test_accuracy) for r in sim if not math.isnan(r.test_loss)]
    assert evaluated and evaluated == [
        (r.test_loss, r.test_accuracy) for r in recs if not math.isnan(r.test_loss)
    ]
    assert backend.clock == "wall-clock" and {r.clock for r in recs} == {"wall-clock"}
    for p in range(spec.workers):
        prev = 0.0
        for r in by_worker(recs, p):
            step = r.compute_s + r.codec_s + r.comm_s + r.wait_s
            assert step == pytest.approx(r.time_s - prev, abs=1e-9)
            assert r.compute_s > 0 and r.wait_s >= 0 and r.comm_s > 0
            prev = r.time_s
        # Counted (codec) bytes == bytes handed to gloo minus the protocol's own bytes.
        wire = backend.result.wire[spec.shards + p]
        assert sum(r.bytes_up for r in by_worker(recs, p)) == (
            wire.bytes_sent() - wire.protocol_sent()
        )


@pytest.mark.parametrize(
    "codec",
    [
        # DFS: codec state (block size, mask bitmap) travels with every answer.
        BlockSpec("dfs", {"ratio": 0.05, "block_size": 64, "dynamic": False}),
        # top-k with error feedback: variable-size broadcasts of the supports' union.
        BlockSpec("topk", {"ratio": 0.02, "error_feedback": True}),
    ],
    ids=["dfs", "topk_ef"],
)
def test_counted_bytes_equal_bytes_sent(smoke, prepared, one_thread, codec):
    """Compressed broadcasts (aggregate mode), protocol bytes counted: exact and identical."""
    spec = dist_spec(smoke, codec=codec, pull="aggregate")
    sim_job, sim, job, recs, backend = run_both(spec, prepared, DistOptions(count_header=True))
    np.testing.assert_array_equal(job.global_params(), sim_job.global_params())
    wire = backend.result.wire
    shards = range(spec.shards)
    # Up: everything each worker passed to send (pull requests and pushes).
    for p in range(spec.workers):
        mine = by_worker(recs, p)
        assert sum(r.bytes_up for r in mine) == wire[spec.shards + p].bytes_sent()
        assert sum(r.bytes_up for r in mine) - wire[spec.shards + p].protocol_sent() == sum(
            r.bytes_up for r in by_worker(sim, p)
        )
        # 2 S headers per iteration: S pull requests, S pushes.
        assert all(
            r.bytes_up - 2 * spec.shards * HEADER_BYTES == s.bytes_up
            for r, s in zip(mine, by_worker(sim, p), strict=True)
        )
    # Down: everything the shards passed to send as answers.
    down = sum(r.bytes_down for r in recs)
    assert down == sum(wire[s].bytes_sent() for s in shards)
    assert down - sum(wire[s].protocol_sent() for s in shards) == sum(r.bytes_down for r in sim)
    # Codec state really travelled (DFS): framing beyond the bare headers.
    answers = sum(wire[s].sent["ANSWER"][0] for s in shards)
    framing = sum(wire[s].protocol_sent() for s in shards) - answers * HEADER_BYTES
    assert (framing > 0) == (codec.name == "dfs")
    assert all(
        len(r.shard_bytes_up) == spec.shards
        and (sum(r.shard_bytes_up), sum(r.shard_bytes_down)) == (r.bytes_up, r.bytes_down)
        for r in recs
    )


@pytest.mark.parametrize("s", [1, 3])
def test_ssp_never_exceeds_its_bound(smoke, prepared, monkeypatch, s):
    spec = dist_spec(smoke, iterations=16, shards=1, sync=BlockSpec("ssp", {"staleness": s}))
    monkeypatch.setenv("PSML_DIST_DELAY", f"{spec.shards + 1}=0.05")  # worker 1 straggles
    recs = DistBackend(DistOptions()).run(staged_job(spec, load_prepared(prepared["digits"])))
    assert len(recs) == 2 * 16
    assert max(r.staleness for r in recs) == s  # the fast worker runs ahead, exactly up to s
    assert sum(r.wait_s for r in by_worker(recs, 0)) > 0.3  # ...and is held there
    fast = by_worker(recs, 0)
    slow = by_worker(recs, 1)
    # Independent check from the records: the fast worker's pull for iteration t was served
    # (before it ended t) only once the slow one had pushed t - s iterations, so had started
    # them (each start is 50 ms before its push lands: cross-process clock skew is harmless).
    starts = [q.time_s - q.compute_s - q.comm_s - q.wait_s for q in slow]
    for r in fast:
        started = sum(1 for b in starts if b <= r.time_s)
        assert r.iteration - started <= s, (r, started)


def test_asp_fast_worker_progresses_past_a_stalled_one(smoke, prepared, monkeypatch):
    spec = dist_spec(smoke, iterations=10, shards=1, sync=BlockSpec("asp"))
    monkeypatch.setenv("PSML_DIST_DELAY", f"{spec.shards + 1}=0.4")
    recs = DistBackend(DistOptions()).run(staged_job(spec, load_prepared(prepared["digits"])))
    fast, slow = by_worker(recs, 0), by_worker(recs, 1)
    end_fast = fast[-1].time_s
    assert sum(1 for r in slow if r.time_s <= end_fast) <= 2
    assert all(r.wait_s == 0 for r in recs)
    assert max(r.staleness for r in fast) >= 6
    assert slow[-1].iteration == 9  # and the stalled worker still finishes


@pytest.mark.parametrize(("rank", "role"), [(2, "worker 0"), (0, "shard 0")])
def test_killed_rank_fails_cleanly_from_psml_train(smoke, prepared, tmp_path, rank, role):
    """A worker or a shard process crashes mid-run: the run fails within 60 s naming it."""
    spec = dist_spec(smoke, iterations=400)
    out = tmp_path / "run"
    env = {**os.environ, "PSML_DIST_KILL_RANK": str(rank), "PSML_DIST_KILL_STEP": "5"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "psml_core", "train", "--run", spec.to_json()]
    cmd += ["--data", str(prepared["digits"]), "--out", str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    end = time.time()
    crash = float(re.search(r"crashes at step 5 \(unix time ([\d.]+)\)", proc.stdout).group(1))
    assert proc.returncode == RunError.exit_code, proc.stderr
    assert f"failed: rank {rank} ({role}) exited with code 1" in proc.stderr
    assert f"each rank's log is in {out.with_name('run.ranks')}/" in proc.stderr
    assert "frame #" not in proc.stderr and "Traceback" not in proc.stderr
    assert end - crash < 60
    assert not out.exists() or not any(out.iterdir())


def _start_rank(rank, world, spec_json, data, out, env, logs):
    e = {**env, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank)}
    e["SLURM_NTASKS"] = str(world)
    log = open(logs / f"rank{rank}.log", "w")  # noqa: SIM115 - closed by the caller
    cmd = [sys.executable, "-m", "psml_core.engine.torchdist.launch", "--run", spec_json]
    cmd += ["--data", str(data), "--out", str(out)]
    return subprocess.Popen(cmd, env=e, stdout=log, stderr=subprocess.STDOUT), log


def test_killed_worker_stops_every_rank_without_a_supervisor(smoke, prepared, tmp_path):
    """Like srun: no parent watches the ranks; the heartbeat watchdog stops them."""
    spec = dist_spec(smoke, iterations=400, shards=1)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    env.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])),
        SLURM_JOB_NODELIST="localhost",
        SLURM_JOB_ID="77",
        MASTER_PORT=str(free_port()),
        PSML_DIST_KILL_RANK="2",
        PSML_DIST_KILL_STEP="5",
        PSML_DIST_DEAD_AFTER_S="5",
    )
    out = tmp_path / "run"
    started = [
        _start_rank(r, 3, spec.to_json(), prepared["digits"], out, env, tmp_path) for r in range(3)
    ]
    ended: dict[int, float] = {}
    deadline = time.time() + 240
    while len(ended) < 3 and time.time() < deadline:
        for r, (p, _) in enumerate(started):
            if r not in ended and p.poll() is not None:
                ended[r] = time.time()
        time.sleep(0.05)
    for p, log in started:
        if p.poll() is None:
            p.kill()
        log.close()
    logs = {r: (tmp_path / f"rank{r}.log").read_text() for r in range(3)}
    crash = float(re.search(r"unix time ([\d.]+)", logs[2]).group(1))
    for r in (0, 1):
        assert started[r][0].returncode == 1, logs[r]
        assert "rank 2 (worker 1) stopped: no heartbeat" in logs[r], logs[r]
        # the one line names the rank's log, where torch's C++ output went
        assert f"details in {out.with_name('run.ranks') / f'rank{r}.log'}" in logs[r], logs[r]
        assert ended[r] - crash < 60
    assert not out.exists() or not any(out.iterdir())


def test_torchrun_launch_writes_results_once(smoke, prepared, tmp_path):
    # torchrun's entry point as a module: always there with torch, whatever the bin layout.
    torchrun = [sys.executable, "-m", "torch.distributed.run"]
    spec = dist_spec(smoke, iterations=12, shards=1)
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    cmd = [*torchrun, "--standalone", "--nproc-per-node=3"]
    # "--": torchrun's parser would read --run as an abbreviation of its own --run-path.
    cmd += ["-m", "psml_core.engine.torchdist.launch", "--", "--run", spec.to_json()]
    cmd += ["--data", str(prepared["digits"]), "--out", str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["metrics.parquet", "summary.json"]
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["backend"], summary["clock"]) == ("dist", "wall-clock")
    import pandas as pd

    df = pd.read_parquet(out / "metrics.parquet")
    assert len(df) == 2 * 12 and set(df["clock"]) == {"wall-clock"}


def test_a_failed_torchrun_launch_is_quiet(smoke, prepared, tmp_path):
    """`psml train --launcher torchrun` with a crashing rank: psml's lines, torch's in files."""
    psml = Path(sys.executable).parent / "psml"
    # `pip install -e .` puts both console scripts next to the interpreter (torch brings torchrun)
    assert psml.exists() and (psml.parent / "torchrun").exists(), psml.parent
    spec = dist_spec(smoke, iterations=12, shards=1)
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["PATH"] = os.pathsep.join([str(psml.parent), env.get("PATH", "")])
    env.update(PSML_DIST_KILL_RANK="2", PSML_DIST_KILL_STEP="2")
    cmd = [str(psml), "train", "--run", spec.to_json(), "--data", str(prepared["digits"])]
    cmd += ["--out", str(out), "--launcher", "torchrun"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text and "ChildFailedError" not in text, text
    assert len(text.strip().splitlines()) <= 3, text  # the crash, psml's error line
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("psml train: error: dist run") and "run.ranks/" in last, last
    agent = (tmp_path / "run.ranks" / "torchrun.log").read_text()
    assert "ChildFailedError" in agent  # torchrun's report is kept, in the file
    assert not out.exists() or not any(out.iterdir())


# --------------------------------------------------------------------------- PCP, DSSP, DC2


def test_pcp_one_step_rounds_same_parameters_and_bytes_as_sim(smoke, prepared, one_thread):
    """Rounds of one local step: reports and budgets travel, the merge is bit-identical."""
    spec = dist_spec(smoke, iterations=6, sync=BlockSpec("pcp", {"s_max": 1}))
    sim_job, sim, job, recs, backend = run_both(spec, prepared)
    np.testing.assert_array_equal(job.global_params(), sim_job.global_params())

    def key(r):
        return (r.iteration, r.worker, r.loss, r.bytes_up, r.bytes_down, r.local_steps)

    assert [key(r) for r in recs] == [key(r) for r in sim]
    for p in range(spec.workers):
        wire = backend.result.wire[spec.shards + p]
        assert sum(r.bytes_up for r in by_worker(recs, p)) == (
            wire.bytes_sent() - wire.protocol_sent()
        )


def test_pcp_grants_a_fast_worker_local_steps(smoke, prepared, monkeypatch):
    spec = dist_spec(smoke, iterations=8, shards=1, sync=BlockSpec("pcp", {"s_max": 8}))
    monkeypatch.setenv("PSML_DIST_DELAY", f"{spec.shards + 1}=0.05")  # worker 1 straggles
    recs = DistBackend(DistOptions()).run(staged_job(spec, load_prepared(prepared["digits"])))
    fast, slow = by_worker(recs, 0), by_worker(recs, 1)
    assert fast[0].local_steps == 1 and all(r.local_steps == 1 for r in slow)
    # A 50 ms step against a few ms: the fast worker's budget runs up to the cap s_max = 8
    # (wall-clock noise on a loaded machine may cost a step), so it does several times the
    # slow worker's work per round instead of idling through it.
    assert all(4 <= r.local_steps <= 8 for r in fast[2:])
    assert sum(r.local_steps for r in fast) >= 4 * sum(r.local_steps for r in slow)


def test_dssp_staleness_within_its_range(smoke, prepared, monkeypatch):
    sync = BlockSpec("dssp", {"s_low": 1, "r_max": 2})
    spec = dist_spec(smoke, iterations=16, shards=1, sync=sync)
    monkeypatch.setenv("PSML_DIST_DELAY", f"{spec.shards + 1}=0.05")
    recs = DistBackend(DistOptions()).run(staged_job(spec, load_prepared(prepared["digits"])))
    assert 1 < max(r.staleness for r in recs) <= 3


def test_adaptive_controller_runs_on_shard_zero(smoke, prepared):
    """DC2 on dist: one ratio per step shared by every worker, fed by the workers' figures."""
    ctl = BlockSpec("dc2", {"law": "aimd", "warmup": 2, "r0": 0.01})
    spec = dist_spec(
        smoke,
        iterations=12,
        codec=BlockSpec("topk", {"ratio": 0.01, "error_feedback": True}),
        pull="aggregate",
        controller=ctl,
    )
    recs = DistBackend(DistOptions()).run(staged_job(spec, load_prepared(prepared["digits"])))
    per_step = {}
    for r in recs:
        per_step.setdefault(r.iteration, set()).add(r.ratio)
    assert all(len(v) == 1 for v in per_step.values())  # shared by all workers
    ratios = [next(iter(per_step[t])) for t in sorted(per_step)]
    assert ratios[0] == pytest.approx(0.01)
    # AIMD moves the ratio every step after warm-up (+0.01, or halving on a delay spike):
    # the workers' figures reached it.
    assert len(set(ratios[4:])) > 1, ratios
    # The figures (8 B per pull) and the ratio (4 B per shard-0 answer) are counted bytes.
    t1 = [r for r in recs if r.iteration == 1]
    assert all(r.shard_bytes_up[0] - r.shard_bytes_up[1] >= 8 for r in t1)


def jpdc_dist_spec(smoke, recipe="jpdc", iterations=8, **method):
    """A shipped jpdc recipe (pull: touched, kv codec) on the sparse smoke workload."""
    from psml_core.config import config_root
    from psml_core.recipes import load_methods

    recipes = load_methods(config_root() / "methods.yaml")
    run = smoke.run("rcv1_logreg", "dense_bsp", "dc_10g", smoke.seeds[0])
    return dataclasses.replace(
        run,
        workload=dataclasses.replace(run.workload, iterations=iterations),
        workers=2,
        shards=2,
        backend="dist",
        method=dataclasses.replace(recipes[recipe], **method),
    )


def test_bsp_touched_jpdc_same_parameters_and_bytes_as_sim(smoke, prepared, one_thread):
    """Key lists up, kv entries down: bit-identical to sim, the placement in the bytes."""
    spec = jpdc_dist_spec(smoke)
    assert (spec.method.pull, spec.method.codec.name) == ("touched", "kv")
    sim_job, sim, job, recs, backend = run_both(spec, prepared)
    np.testing.assert_array_equal(job.global_params(), sim_job.global_params())

    def key(r):
        return (r.iteration, r.worker, r.loss, r.bytes_up, r.bytes_down, r.remote_bytes_up,
                r.remote_bytes_down, r.shard_bytes_up, r.shard_bytes_down, r.staleness)  # fmt: skip

    assert [key(r) for r in recs] == [key(r) for r in sim]
    evaluated = [(r.test_loss, r.test_accuracy) for r in sim if not math.isnan(r.test_loss)]
    assert evaluated and evaluated == [
        (r.test_loss, r.test_accuracy) for r in recs if not math.isnan(r.test_loss)
    ]
    for p in range(spec.workers):
        mine = by_worker(recs, p)
        # Colocated: worker p's own shard is local, the other one remote.
        other = 1 - p
        assert all(r.remote_bytes_up == r.shard_bytes_up[other] > 0 for r in mine)
        assert all(r.remote_bytes_down == r.shard_bytes_down[other] > 0 for r in mine)
        wire = backend.result.wire[spec.shards + p]
        assert sum(r.bytes_up for r in mine) == wire.bytes_sent() - wire.protocol_sent()
    # Every up byte is a key list (8 B) or a kv push (12 B) of the same keys: 20 B per key, and
    # the key list, the push and the answer each end in a 4-byte CRC-32 trailer.
    pairs = [
        (u - 8, d - 4)
        for r in recs
        for u, d in zip(r.shard_bytes_up, r.shard_bytes_down, strict=True)
    ]
    assert all(u % 20 == 0 and d % 12 == 0 and u // 20 == d // 12 for u, d in pairs)


def test_touched_counted_bytes_equal_bytes_sent_beside_controller_figures(
    smoke, prepared, one_thread
):
    """Protocol bytes counted: exact; the key list and the controller figures share a PULL."""
    ctl = BlockSpec("dc2", {"law": "aimd", "warmup": 2, "r0": 0.5})
    spec = jpdc_dist_spec(smoke, "partition_only", iterations=6, controller=ctl)
    sim_job, sim, job, recs, backend = run_both(spec, prepared, DistOptions(count_header=True))
    # kv ignores the ratio, so the controller's dist timing cannot change the model.
    np.testing.assert_array_equal(job.global_params(), sim_job.global_params())
    wire = backend.result.wire
    T, S = spec.workload.iterations, spec.shards
    for p in range(spec.workers):
        mine, ref = by_worker(recs, p), by_worker(sim, p)
        sent = wire[S + p]
        assert sum(r.bytes_up for r in mine) == sent.bytes_sent()
        # Protocol: exactly the 2 S headers per iteration (figures are codec bytes, no framing).
        assert sent.protocol_sent() == 2 * S * T * HEADER_BYTES
        # Codec bytes: sim's key lists and pushes, plus 8 B of figures per pull to shard 0
        # after the first step.
        codec_up = sum(r.bytes_up for r in mine) - sent.protocol_sent()
        assert codec_up == sum(r.bytes_up for r in ref) + 8 * (T - 1)
        assert [r.shard_bytes_up[1] - 2 * HEADER_BYTES for r in mine] == [
            r.shard_bytes_up[1] for r in ref
        ]
    down = sum(r.bytes_down for r in recs)
    assert down == sum(wire[s].bytes_sent() for s in range(S))
    assert wire[0].received["PULL"][0] == spec.workers * T
