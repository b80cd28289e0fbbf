"""DC2 end to end on the sim backend: top-k + error feedback under a bandwidth drop."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from psml_core.codecs.formats import sparse_size
from psml_core.codecs.sparsify import keep_count
from psml_core.config import BandwidthStep, BlockSpec
from psml_core.data.store import load_prepared
from psml_core.engine import staged_job, train

# digits MLP, 4 workers, 2 shards: an iteration takes ~0.5 ms of simulated time on 10 Gbit/s
# (codec costs charged), so the drop comes ~29 iterations in, after DC2's 20-step warm-up.
STEP_AT_S = 0.015
ITERATIONS = 70


def dc2_spec(smoke, law: str):
    run = smoke.run("digits_mlp", "topk_ef", "dc_10g", smoke.seeds[0])
    scenario = dataclasses.replace(
        run.scenario,
        name="dc_10g_drop",
        bandwidth_steps=(BandwidthStep(at_s=STEP_AT_S, gbps=run.scenario.bandwidth_gbps / 10),),
    )
    method = dataclasses.replace(
        run.method,
        name=f"dc2_{law}_topk",
        codec=BlockSpec("topk", {"error_feedback": True}),  # no ratio: the controller's applies
        controller=BlockSpec("dc2", {"law": law}),
        pull="aggregate",
    )
    workload = dataclasses.replace(run.workload, iterations=ITERATIONS)
    return dataclasses.replace(run, scenario=scenario, method=method, workload=workload)


@pytest.mark.parametrize("law", ["proportional", "aimd"])
def test_dc2_lowers_ratio_and_bytes_after_bandwidth_drop(smoke, prepared, tmp_path, law):
    spec = dc2_spec(smoke, law)
    train(spec, prepared["digits"], tmp_path)
    df = pd.read_parquet(tmp_path / "metrics.parquet")
    assert len(df) == ITERATIONS * spec.workers

    # One ratio per iteration, shared by every worker.
    per_it = df.groupby("iteration")
    assert (per_it["ratio"].nunique() == 1).all()
    ratio = per_it["ratio"].first()
    # An iteration starts when the worker's previous one ended (time_s of its last push).
    started = per_it["time_s"].min().shift(1, fill_value=0.0)

    # Before the drop (and through the warm-up) no compression: the fast link's delay is the
    # baseline. After it, the ratio falls.
    before = ratio[per_it["time_s"].max() < STEP_AT_S]
    assert len(before) >= 25 and (before == 1.0).all()
    after = ratio[started > STEP_AT_S]
    assert len(after) >= 15
    assert after.min() < 0.1 and after.iloc[-5:].max() < 0.5

    # bytes_up follow the ratio exactly: per shard, top-k's wire size for its keep count, plus
    # the payload's 4-byte CRC-32 trailer.
    sizes = [len(s.keys) for s in staged_job(spec, load_prepared(prepared["digits"])).shards]

    def expected_up(r: float) -> int:
        return sum(sparse_size(n, keep_count(n, r)) + 4 for n in sizes)

    assert (df["bytes_up"] == df["ratio"].map(expected_up)).all()
    up = per_it["bytes_up"].mean()
    assert up[after.index[-5:]].mean() < 0.2 * up[before.index].mean()
