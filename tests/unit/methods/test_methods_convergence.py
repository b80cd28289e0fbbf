"""With compression on, each method still learns, and saves what it claims to save.

Each method runs from its recipe with the smoke settings (P = 4, S = 2, seed 0): 80 iterations
(rounds for PCP; 240 for dfs, whose 1% budget needs them) of digits_mlp, or 60 of rcv1_logreg
for jpdc. Bars were set from measured
values with a margin; the measurements (seed 0, and seeds 1-2 where stated) are in each case's
``note``. Two tests per method, so that a method that saves bytes but does not learn shows as
exactly that:

* ``test_method_learns``: final test accuracy >= the bar (and the dense baseline of the same
  workload reaches its own, so a broken workload cannot pass for a broken method);
* ``test_method_saves_traffic``: the method's traffic is below its main baseline's by the stated
  factor, in the metric the paper claims (total bytes, remote bytes, bytes per gradient step).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import pytest
from conformance import SimRun, final_eval, run_spec, simulate, traffic

from psml_core.config import Experiment

HETERO = (1.0, 1.0, 1.0, 4.0)  # worker 3 four times slower: what PCP is for


@dataclass(frozen=True)
class Case:
    """One method's convergence run and its byte claim against its main baseline.

    Attributes:
        method: The recipe.
        workload: The smoke workload.
        iterations: Iterations (rounds under PCP).
        scenario: The network scenario.
        multipliers: Worker compute-time multipliers (None: homogeneous).
        bar: The final test accuracy the method must reach.
        baseline: The main baseline, run with the same settings.
        metric: ``total`` bytes, ``remote`` bytes, or ``per_step`` (total bytes per gradient
            step).
        factor: The method's metric must be <= factor x the baseline's.
        note: Measured values behind the bar and factor.
        cross_traffic: The scenario's cross-traffic pinned here (None: the tier's), so that a
            change of the tier's chain does not move the measurements behind the bar.
    """

    method: str
    workload: str
    iterations: int
    scenario: str
    multipliers: tuple[float, ...] | None
    bar: float
    baseline: str
    metric: str
    factor: float
    note: str
    cross_traffic: dict | None = None


CASES = {
    "dense_bsp": Case(
        method="dense_bsp",
        workload="digits_mlp",
        iterations=80,
        scenario="dc_10g",
        multipliers=None,
        bar=0.90,
        baseline="dense_bsp",
        metric="total",
        factor=1.0,
        note="acc 0.956 (seeds 0-2: 0.956, 0.956, 0.956)",
    ),
    "dfs": Case(
        method="dfs",
        workload="digits_mlp",
        iterations=240,
        scenario="dc_10g",
        multipliers=None,
        bar=0.90,
        baseline="omnireduce",
        metric="total",
        factor=0.1,
        note=(
            "rho = 1% with momentum correction, 240 steps (80 are too few for a 1% budget: "
            "0.83/0.91/0.88): acc 0.953 (seeds 1, 2: 0.961, 0.950; dense 0.969); bytes 0.035 x "
            "omnireduce's; with error feedback and server momentum instead 0.87/0.85/0.88"
        ),
    ),
    "ratatouille": Case(
        method="ratatouille",
        workload="digits_mlp",
        iterations=80,
        scenario="dc_10g",
        multipliers=None,
        bar=0.90,
        baseline="snappy_bsp",
        metric="total",
        factor=0.5,
        note="acc 0.956 (seeds 1, 2: 0.944, 0.953); bytes 0.30 x snappy_bsp's raw bytes",
    ),
    "dc2_topk": Case(
        method="dc2_topk",
        workload="digits_mlp",
        iterations=80,
        scenario="dc_cross_high",
        multipliers=None,
        bar=0.88,
        baseline="dense_bsp",
        metric="total",
        factor=0.8,
        note="acc 0.897 (dense 0.956) at the declared point; the target kappa * T_compute "
        "(0.23 ms) lies below this small MLP's latency floor (about 0.37 ms), so DC2 compresses "
        "in both states, near ratio 0.03; bytes 0.157 x dense",
        # 40 ms periods on average, as measured (the smoke tier's chain now dwells 2 ms).
        cross_traffic={
            "kind": "markov",
            "flows": [0, 63],
            "switch_prob": 0.05,
            "period_ms": 2,
            "scope": "shared",
        },  # fmt: skip
    ),
    "pcp": Case(
        method="pcp",
        workload="digits_mlp",
        iterations=80,
        scenario="dc_10g",
        multipliers=HETERO,
        bar=0.90,
        baseline="ssp_2",
        metric="per_step",
        factor=0.6,
        note=(
            "acc 0.969 (seeds 1, 2: 0.972, 0.972) in 1031 local steps; bytes per step 0.31 x "
            "ssp_2's"
        ),
    ),
    "jpdc": Case(
        method="jpdc",
        workload="rcv1_logreg",
        iterations=60,
        scenario="dc_10g",
        multipliers=None,
        bar=0.70,
        baseline="random_partition",
        metric="remote",
        factor=0.85,
        note="acc 0.740 (seeds 1, 2: 0.740, 0.734; chance 0.54, dense 0.848); remote bytes 0.66 x "
        "random_partition's",
    ),
}

DENSE_BARS = {"digits_mlp": 0.90, "rcv1_logreg": 0.80}  # dense_bsp measured 0.956 and 0.848

KNOWN_FAILURES: dict[str, pytest.MarkDecorator] = {}


def run_case(
    smoke: Experiment, prepared: dict[str, Path], case: Case, method: str | None = None
) -> SimRun:
    spec = run_spec(
        smoke,
        method or case.method,
        case.workload,
        case.iterations,
        scenario=case.scenario,
        multipliers=case.multipliers,
    )
    if case.cross_traffic is not None:
        sc = dataclasses.replace(spec.scenario, cross_traffic=case.cross_traffic)
        spec = dataclasses.replace(spec, scenario=sc)
    return simulate(spec, prepared)


def metric(run: SimRun, name: str) -> float:
    t = traffic(run.records)
    if name == "per_step":
        return t["total"] / sum(r.local_steps for r in run.records)
    return float(t[name])


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=KNOWN_FAILURES.get(n, ())) for n in CASES if n != "dense_bsp"]
)
def test_method_learns(smoke: Experiment, prepared: dict[str, Path], name: str) -> None:
    """Final test accuracy >= the case's bar (see ``CASES[name].note`` for the measurements)."""
    case = CASES[name]
    dense = run_case(smoke, prepared, case, "dense_bsp")
    _, dense_acc = final_eval(dense.records)
    assert dense_acc >= DENSE_BARS[case.workload]
    loss, acc = final_eval(run_case(smoke, prepared, case).records)
    print(f"\n{name}: test accuracy {acc:.4f}, loss {loss:.4f} (dense_bsp {dense_acc:.4f})")
    assert math.isfinite(loss)
    assert acc >= case.bar


@pytest.mark.parametrize("name", [n for n in CASES if n != "dense_bsp"])
def test_method_saves_traffic(smoke: Experiment, prepared: dict[str, Path], name: str) -> None:
    """The method's traffic metric is <= factor x its main baseline's (same settings)."""
    case = CASES[name]
    run = run_case(smoke, prepared, case)
    base = run_case(smoke, prepared, case, case.baseline)
    mine, theirs = metric(run, case.metric), metric(base, case.metric)
    print(
        f"\n{name}: {case.metric} {mine:.0f} vs {case.baseline} {theirs:.0f} = {mine / theirs:.3f}"
    )
    assert mine <= case.factor * theirs


def test_dc2_controller_compresses_when_the_delay_rises(
    smoke: Experiment, prepared: dict[str, Path]
) -> None:
    """DC2 starts dense and compresses as soon as the delay exceeds the compute it overlaps.

    One ratio per step for every worker; the first step runs at r0 = 1. Its target is the
    delay at which communication fits the compute (kappa * T_compute), not a delay seen while
    dense, so on a link that is slow all the time (100 Mbit/s, no competition) it compresses
    too, where the target it had until 2026-11-28 (the dense warm-up delay) kept it at 1.0
    throughout (measured: dc_cross_high 0.326 at step 4, then 0.033; slow_100m 0.026 at step
    4, then held at 0.005 by the anti-windup).
    """
    run = run_case(smoke, prepared, CASES["dc2_topk"])
    ratio = {r.iteration: r.ratio for r in run.records}
    assert all(r.ratio == ratio[r.iteration] for r in run.records)
    assert ratio[0] == 1.0 and ratio[4] < 0.5
    assert min(ratio.values()) < 0.05
    steady = dataclasses.replace(
        CASES["dc2_topk"], scenario="slow_100m", iterations=40, cross_traffic=None
    )
    slow = {r.iteration: r.ratio for r in run_case(smoke, prepared, steady).records}
    assert slow[0] == 1.0 and max(slow[t] for t in range(4, 40)) < 0.05


def test_pcp_fast_workers_take_more_local_steps(
    smoke: Experiment, prepared: dict[str, Path]
) -> None:
    """PCP's rounds give the three fast workers ~4x the slow one's steps, within the same
    sample budget as the other policies (4 workers x 80 steps)."""
    run = run_case(smoke, prepared, CASES["pcp"])
    steps = [sum(r.local_steps for r in run.records if r.worker == p) for p in range(4)]
    rounds = max(r.iteration for r in run.records) + 1
    assert 4 * 80 <= sum(steps) < 4 * 81
    assert steps[3] == rounds and all(s >= 3 * steps[3] for s in steps[:3])


def test_measured_table(smoke: Experiment, prepared: dict[str, Path]) -> None:
    """Prints accuracy and traffic of every case and its baseline (run with -s to see it).

    Also checks that the dense baseline learns on each workload, so the table is meaningful.
    """
    rows = []
    for name, case in CASES.items():
        for method in dict.fromkeys((case.method, case.baseline)):
            run = run_case(smoke, prepared, case, method)
            loss, acc = final_eval(run.records)
            t = traffic(run.records)
            steps = sum(r.local_steps for r in run.records)
            rows.append(
                f"{name:12s} {method:18s} {case.scenario:9s} acc {acc:.4f} loss {loss:.4f} "
                f"up {t['up']:>9d} down {t['down']:>9d} remote {t['remote']:>9d} steps {steps}"
            )
    print("\n" + "\n".join(rows))
    for workload, bar in DENSE_BARS.items():
        case = next(c for c in CASES.values() if c.workload == workload)
        assert final_eval(run_case(smoke, prepared, case, "dense_bsp").records)[1] >= bar
