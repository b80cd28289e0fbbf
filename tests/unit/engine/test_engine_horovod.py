"""The horovod backend: runs only where Horovod is installed (scripts/install_horovod.sh).

Each horovodrun start costs ~10 s on 2 cores (two ranks importing torch and psml), so the module
starts it four times: dense (spawned, against sim), top-k through the launcher CLI, a
controller run and a run with a failing rank (both spawned).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

hvd = pytest.importorskip(
    "horovod.torch",
    reason="Horovod is not installed (optional extra): run scripts/install_horovod.sh",
)

from psml_core.codecs.formats import sparse_size  # noqa: E402
from psml_core.codecs.integrity import CHECKSUM_BYTES  # noqa: E402
from psml_core.codecs.sparsify import keep_count  # noqa: E402
from psml_core.config import BlockSpec, HeterogeneitySpec  # noqa: E402
from psml_core.data.store import load_prepared  # noqa: E402
from psml_core.engine import BACKENDS, SimBackend, staged_job  # noqa: E402
from psml_core.engine.horovod import HorovodBackend, HorovodOptions  # noqa: E402
from psml_core.engine.horovod import launch as hvd_launch  # noqa: E402
from psml_core.engine.horovod.runtime import horovodrun_path, import_horovod  # noqa: E402
from psml_core.errors import ConfigError, RunError  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
P = 2

# Dense allreduce vs the sim backend's BSP dense run: the same float32 operations except the
# order of the P-term gradient sum (Gloo's ring vs the sim server's worker order). Equal bits for
# P = 2; rtol 1e-5 / atol 1e-6 (a few float32 ulps over 12 momentum steps) covers P > 2.
RTOL, ATOL = 1e-5, 1e-6


def spec_for(smoke, method="dense_bsp", iterations=12, **changes):
    run = smoke.run("digits_mlp", method, "dc_10g", smoke.seeds[0])
    wl = dataclasses.replace(run.workload, iterations=iterations)
    return dataclasses.replace(run, workload=wl, workers=P, backend="horovod", **changes)


def check_time_split(recs):
    for p in range(P):
        prev = 0.0
        for r in sorted((r for r in recs if r.worker == p), key=lambda r: r.iteration):
            step = r.compute_s + r.codec_s + r.comm_s + r.wait_s
            assert step == pytest.approx(r.time_s - prev, abs=1e-9)
            assert min(r.compute_s, r.comm_s, r.wait_s) >= 0 and r.staleness == 0
            prev = r.time_s


def test_registered_and_horovod_found():
    assert BACKENDS.get("horovod", where="backend") is HorovodBackend
    assert HorovodBackend.clock == "wall-clock"
    assert Path(horovodrun_path()).is_file()
    assert import_horovod().gloo_built()


def test_dense_allreduce_matches_sim_bsp(smoke, prepared):
    spec = spec_for(smoke)  # shards = 2: the sim PS has two shards, the allreduce ignores them
    ds = load_prepared(prepared["digits"])
    sim_job = staged_job(dataclasses.replace(spec, backend="sim"), ds)
    sim = SimBackend().run(sim_job)
    job = staged_job(spec, ds)
    backend = HorovodBackend(HorovodOptions())
    recs = backend.run(job)
    assert backend.result is not None and backend.result.collective == "allreduce"

    np.testing.assert_allclose(job.global_params(), sim_job.global_params(), rtol=RTOL, atol=ATOL)
    assert [(r.iteration, r.worker) for r in recs] == [(r.iteration, r.worker) for r in sim]
    np.testing.assert_allclose([r.loss for r in recs], [r.loss for r in sim], rtol=RTOL)
    np.testing.assert_allclose(
        [r.test_accuracy for r in recs], [r.test_accuracy for r in sim], equal_nan=True
    )
    n = job.model.n_params
    for r in recs:
        assert r.clock == "wall-clock"
        assert r.bytes_up == r.bytes_down == r.remote_bytes_up == r.remote_bytes_down == 4 * n
    check_time_split(recs)


def test_topk_ef_through_launcher(smoke, prepared, tmp_path):
    """Top-k 1% + error feedback via horovodrun + the launch module; exact bytes; converges."""
    spec = spec_for(smoke, method="topk_ef", iterations=80)
    run_json = tmp_path / "run.json"
    run_json.write_text(spec.to_json(), encoding="utf-8")
    out = tmp_path / "out"
    cmd = [
        horovodrun_path(),
        *("-np", str(P), "-H", f"localhost:{P}", "--gloo"),
        *(sys.executable, "-m", "psml_core.engine.horovod.launch"),
        *("--run", str(run_json), "--data", str(prepared["digits"]), "--out", str(out)),
    ]
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["metrics.parquet", "summary.json"]

    df = pd.read_parquet(out / "metrics.parquet")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["backend"] == "horovod" and summary["clock"] == "wall-clock"
    assert len(df) == P * 80 and set(df.worker) == set(range(P))
    # Exact bytes: whole-model top-k keeps k = floor(0.01 n) elements in the cheapest format,
    # sealed by its CRC-32 trailer.
    ds = load_prepared(prepared["digits"])
    n = staged_job(spec, ds).model.n_params
    payload = sparse_size(n, keep_count(n, 0.01)) + CHECKSUM_BYTES  # sealed: a CRC-32 trailer
    assert payload == 8 * keep_count(n, 0.01) + 4  # COO at 1%
    assert (df.bytes_up == payload).all() and (df.remote_bytes_up == payload).all()
    assert (df.bytes_down == (P - 1) * payload).all()  # the other rank's payload
    assert summary["bytes_up"] == P * 80 * payload == summary["bytes_down"]
    # Converges: the training loss falls to a third, accuracy far above chance (0.1) ...
    first, last = df[df.iteration == 0].loss.mean(), df[df.iteration >= 70].loss.mean()
    assert last < first / 3
    assert summary["final_test_accuracy"] > 0.6
    # ... and it is the PS semantics: the sim backend's topk_ef with one shard (whole-model top-k,
    # lossless union broadcast) reaches the same losses.
    sim = SimBackend().run(staged_job(dataclasses.replace(spec, backend="sim", shards=1), ds))
    np.testing.assert_allclose(df.loss.to_numpy(), [r.loss for r in sim], rtol=1e-4, atol=1e-5)


CONTROLLER_MODULE = textwrap.dedent(
    """
    import os

    from psml_core.control.base import Controller


    class ScheduleController(Controller):
        name = "test-schedule"

        def __init__(self, schedule):
            self.schedule = list(schedule)
            self.asked = []
            self.seen = []

        def ratio(self, step):
            self.asked.append(step)
            return self.schedule[step % len(self.schedule)]

        def observe(self, obs):
            self.seen.append(obs)


    class CrashController(ScheduleController):
        name = "test-crash"

        def ratio(self, step):
            if step == 3 and os.environ.get("HOROVOD_RANK") == "1":
                raise RuntimeError("injected failure of rank 1")
            return super().ratio(step)
    """
)


@pytest.fixture
def controllers(tmp_path, monkeypatch):
    """The test controllers' module, importable here and in the ranks (which unpickle the job)."""
    (tmp_path / "psml_hvd_test_controller.py").write_text(CONTROLLER_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    )
    import psml_hvd_test_controller

    return psml_hvd_test_controller


def test_controller_sets_ratio_and_sees_max_over_ranks(smoke, prepared, controllers):
    base = spec_for(smoke, iterations=8)
    method = dataclasses.replace(
        base.method, name="topk_dc2", codec=BlockSpec("topk", {"error_feedback": True})
    )
    compute = dataclasses.replace(
        base.compute, heterogeneity=HeterogeneitySpec(multipliers=(1.0, 4.0))
    )
    spec = dataclasses.replace(base, method=method, compute=compute)
    job = staged_job(spec, load_prepared(prepared["digits"]))
    schedule = [0.01, 0.05, 0.2]
    job.controller = controllers.ScheduleController(schedule)
    backend = HorovodBackend(HorovodOptions(emulate=True))
    recs = backend.run(job)
    result = backend.result
    assert result is not None and result.collective == "allgather"

    n, steps = job.model.n_params, spec.workload.iterations
    ctl = job.controller  # rank 0's controller, sent back
    assert isinstance(ctl, controllers.ScheduleController)
    assert ctl.asked == list(range(steps))
    assert [o.step for o in ctl.seen] == list(range(steps))
    # Every rank's controller saw the same figures: the slowest rank's comm and compute, at
    # the ratio the step was encoded at.
    assert result.observations[0] == result.observations[1] == ctl.seen
    assert [o.ratio for o in ctl.seen] == [schedule[t % len(schedule)] for t in range(steps)]
    by_step = {t: [r for r in recs if r.iteration == t] for t in range(steps)}
    for t, obs in enumerate(ctl.seen):
        assert obs.comm_s == max(r.comm_s for r in by_step[t])
        assert obs.compute_s == max(r.compute_s for r in by_step[t])
    # Rank 1 computes 4x longer (emulated): rank 0's controller sees rank 1's compute time.
    slower = sum(o.compute_s > by_step[o.step][0].compute_s for o in ctl.seen)
    assert slower >= steps - 1
    # The ratio in force each step reached the codec: the payload follows the schedule.
    for r in recs:
        ratio = schedule[r.iteration % len(schedule)]
        assert r.ratio == ratio
        assert r.bytes_up == sparse_size(n, keep_count(n, ratio)) + CHECKSUM_BYTES
        assert r.bytes_down == sum(x.bytes_up for x in by_step[r.iteration] if x is not r)
    check_time_split(recs)


def test_a_failed_rank_stops_the_run_and_is_named(smoke, prepared, controllers):
    job = staged_job(spec_for(smoke), load_prepared(prepared["digits"]))
    job.controller = controllers.CrashController([1.0])
    with pytest.raises(RunError, match="rank 1 failed first") as err:
        HorovodBackend(HorovodOptions(timeout_s=120)).run(job)
    assert "injected failure of rank 1" in str(err.value)


def test_wrong_world_size_is_a_config_error(smoke, prepared, tmp_path, capsys):
    spec = spec_for(smoke)  # 2 workers; this process is a 1-rank Horovod world
    try:
        rc = hvd_launch.main(
            ["--run", spec.to_json(), "--data", str(prepared["digits"]), "--out", str(tmp_path)]
        )
    finally:
        hvd.shutdown()
    assert rc == 2
    assert "horovodrun -np 2" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_recipes_an_allreduce_cannot_run(smoke, prepared):
    ds = load_prepared(prepared["digits"])
    asp = dataclasses.replace(smoke.recipes["dense_bsp"], sync=BlockSpec("asp"))
    with pytest.raises(ConfigError, match="bulk-synchronous"):
        HorovodBackend().run(staged_job(dataclasses.replace(spec_for(smoke), method=asp), ds))


def test_missing_horovod_names_the_install_script(monkeypatch):
    monkeypatch.setitem(sys.modules, "horovod.torch", None)
    with pytest.raises(ConfigError, match=r"scripts/install_horovod\.sh"):
        import_horovod()


def test_importing_psml_never_imports_horovod():
    code = (
        "import sys; import psml_core.engine.horovod, psml_core.cli; "
        "assert not any(m == 'horovod' or m.startswith('horovod.') for m in sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, timeout=120)


def test_options_from_env():
    opts = HorovodOptions.from_env(
        {"PSML_HOROVOD_COLLECTIVE": "allgather", "PSML_HOROVOD_EMULATE": "0"}
    )
    assert opts == HorovodOptions(collective="allgather", emulate=False)
    with pytest.raises(ConfigError, match="allowed values"):
        HorovodOptions.from_env({"PSML_HOROVOD_COLLECTIVE": "ring"})


def test_failure_names_the_rank_whose_error_caused_the_shutdown(tmp_path):
    """Rank 0 may exit first only because rank 1's error shut Horovod down: name rank 1."""
    from psml_core.engine.horovod.spawn import _failure

    log = tmp_path / "log"
    log.write_text(
        "[1]<stderr>:RuntimeError: injected failure of rank 1\n"
        "[0]<stderr>:horovod.common.exceptions.HorovodInternalError: Horovod has been shut "
        "down. This was caused by an exception on one of the ranks\n"
        "The first process to do so was:\n  Process name: 0\n  Exit code: 1\n",
        encoding="utf-8",
    )
    msg = _failure(log, "r", 2, 1)
    assert "rank 1 failed first (rank 0 exited first" in msg
    assert "injected failure of rank 1" in msg
    log.write_text(
        "[0]<stderr>:ValueError: bad\nThe first process to do so was:\n"
        "  Process name: 0\n  Exit code: 1\n",
        encoding="utf-8",
    )
    assert "rank 0 failed first (exit code 1)" in _failure(log, "r", 2, 1)
