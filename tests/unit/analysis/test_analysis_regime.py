"""Regimes: the paper's as data, ours measured from the runs, and the matching bounds.

Includes a case built to be off-regime (a comm/compute 10x the paper's), which must be NOT
COMPARABLE (regime) whatever its effect, and never REPRODUCED or NOT REPRODUCED.
"""

from __future__ import annotations

import pandas as pd
import pytest

from psml_core.analysis.claim_result import NOT_COMPARABLE
from psml_core.analysis.claims import evaluate_claims, load_papers
from psml_core.analysis.regime import (
    REGIME_FIELDS,
    check_regime,
    density_class,
    measure_regime,
    paper_regime,
)

CONFIG = {
    "workloads": {"w": {"model": "mlp", "hidden": [8], "dataset": "d", "batch_size": 10}},
    "scenarios": {"a": {"bandwidth_gbps": 1.0, "latency_us": 40.0, "message_overhead_us": 10.0}},
}


def run(method, seed, comm_s, bytes_total, **kw):
    # 2 workers x 5 steps of batch 10: 100 samples, 10 worker-steps.
    return {"method": method, "seed": seed, "scenario": "a", "workload": "w", "workers": 2,
            "shards": 2, "compute_s": 1.0, "comm_s": comm_s, "wait_s": 0.0,
            "samples_processed": 100, "bytes_up": bytes_total / 2, "bytes_total": bytes_total,
            "target_accuracy": 0.9, "final_test_accuracy": 0.9, **kw}  # fmt: skip


def table(comm=10.0, method_bytes=100.0):
    rows = [run("dense_bsp", s, comm, 4000.0) for s in range(3)]
    rows += [run("m", s, comm / 4, method_bytes) for s in range(3)]
    return pd.DataFrame(rows)


def claim(regime=None, **measure):
    out = {
        "id": "c", "statement": "s", "source": "abs", "setup": "x",
        "reported": {"kind": "reduction", "value": 97.5},
        "measure": {"experiment": "e", "method": "m", "baseline": "dense_bsp",
                    "metrics": ["bytes_total"], "scenarios": ["a"], **measure},
    }  # fmt: skip
    if regime:
        out["regime"] = regime
    return out


def test_density_classes():
    assert density_class(1.0) == "dense" and density_class(0.5) == "dense"
    assert density_class(0.2455) == density_class(0.143) == "~10%"
    assert density_class(0.01) == "~1%" and density_class(0.001) == "~0.1%"
    assert density_class(1e-5) == "<0.05%"


def test_ours_is_measured_from_the_dense_reference_and_the_scenario():
    ours = measure_regime(claim(), table(), CONFIG, "a")
    assert ours["reference"] == "dense_bsp"
    assert ours["gradient_bytes"] == pytest.approx(200.0)  # 2000 B up over 10 worker-steps
    assert ours["params"] == pytest.approx(50.0)
    assert ours["compute_s"] == pytest.approx(0.1)
    assert ours["comm_compute"] == pytest.approx(10.0)
    # 1 s of communication per worker-step against a 100 us latency floor (2 x (40 + 10) us).
    assert ours["bandwidth_share"] == pytest.approx(1 - 100e-6 / 1.0)
    assert ours["density"] == pytest.approx(100.0 / 4000.0)
    assert (ours["workers"], ours["servers"], ours["batch_size"]) == (2, 2, 10)
    assert ours["bandwidth_gbps"] == 1.0 and ours["delay_variation"] == "none"
    assert ours["model"] == "mlp, hidden 8 on d"
    assert set(ours) == {k for k, _, _ in REGIME_FIELDS} | {"reference", "density_up"}


def test_the_bounds_apply_only_to_fields_the_paper_gives():
    ours = {"comm_compute": 10.0, "bandwidth_share": 0.9, "density": 0.02}
    unknown = paper_regime({}, {})
    assert check_regime(unknown, ours) == ("unknown", [])
    near = {"comm_compute": {"status": "reported", "value": 5.7, "source": "abs"}}
    assert check_regime({**unknown, **near}, ours)[0] == "matched"  # 10 / 5.7 = 1.75 < 2
    far = {"comm_compute": {"status": "derived", "value": 1.0, "how": "x"}}
    status, notes = check_regime({**unknown, **far}, ours)
    assert status == "off" and "10x the paper's 1" in notes[0]
    side = {"bandwidth_share": {"status": "derived", "value": 0.2, "how": "x"}}
    status, notes = check_regime({**unknown, **side}, ours)
    assert status == "off" and "bandwidth-bound" in notes[0]
    dens = {"density": {"status": "derived", "value": 0.2455, "how": "x"}}
    status, notes = check_regime({**unknown, **dens}, ours)
    assert status == "off" and "~1%" in notes[0] and "~10%" in notes[0]
    assert check_regime({**unknown, **dens}, {**ours, "density": 0.14})[0] == "matched"


def test_the_claims_regime_overrides_the_papers():
    paper = {"regime": {"workers": {"status": "reported", "value": 16, "source": "fig"}}}
    mine = {"workers": {"status": "derived", "value": 2, "how": "y"}}
    merged = paper_regime(paper, {"regime": mine})
    assert merged["workers"]["value"] == 2 and merged["density"] == {"status": "unknown"}


def test_an_off_regime_claim_is_not_comparable_whatever_its_effect():
    """Built to be off-regime: our dense comm/compute is 10x the paper's reported 1.0."""
    c = claim({"comm_compute": {"status": "reported", "value": 1.0, "source": "abs"}})
    res = evaluate_claims({"p": {"claims": [c]}}, table(), {"e": {}}, config=CONFIG)[0]
    assert res.verdict == NOT_COMPARABLE, res.detail
    assert res.regime_status == "off" and "comm/compute 10" in res.regime_notes
    assert "measured REPRODUCED" in res.detail  # the effect itself is kept, not hidden
    rows = {r["field"]: r for r in res.regime}
    assert rows["comm_compute"]["ratio"] == pytest.approx(10.0)
    # The same runs, matched: the verdict stands.
    ok = claim({"comm_compute": {"status": "reported", "value": 8.0, "source": "abs"}})
    res = evaluate_claims({"p": {"claims": [ok]}}, table(), {"e": {}}, config=CONFIG)[0]
    assert res.verdict == "REPRODUCED" and res.regime_status == "matched"
    # Unknown regime: measured and shown, the verdict untouched.
    res = evaluate_claims({"p": {"claims": [claim()]}}, table(), {"e": {}}, config=CONFIG)[0]
    assert res.verdict == "REPRODUCED" and res.regime_status == "unknown"
    assert res.regime and res.regime[0]["field"] == "model"


def test_every_shipped_claim_states_its_regime(repo):
    papers = load_papers(repo / "config" / "papers")
    for paper in papers.values():
        assert set(paper["regime"]) == {k for k, _, _ in REGIME_FIELDS}, paper["id"]
        for c in paper["claims"]:
            for field in paper_regime(paper, c).values():
                given = "value" in field or len(field.get("values") or []) >= 2
                if field["status"] == "reported":
                    assert field.get("source") and given
                if field["status"] == "derived":
                    assert field.get("how") and given


def test_a_paper_stating_its_workers_bounds_ours():
    unknown = paper_regime({}, {})
    two = {"workers": {"status": "reported", "value": 2, "source": "README"}}
    status, notes = check_regime({**unknown, **two}, {"workers": 8})
    assert status == "off" and "8 workers against the paper's 2" in notes[0]
    assert check_regime({**unknown, **two}, {"workers": 2})[0] == "matched"
    sixteen = {"workers": {"status": "derived", "value": 16, "how": "fig"}}
    assert check_regime({**unknown, **sixteen}, {"workers": 8})[0] == "matched"  # within 2x


def test_the_density_class_does_not_bound_a_traffic_claim():
    """Used to be circular: a claim whose result is the density was bounded by its density."""
    unknown = paper_regime({}, {})
    dens = {"density": {"status": "derived", "value": 0.2455, "how": "x"}}
    ours = {"density": 0.02}
    assert check_regime({**unknown, **dens}, ours, "time_to_target_s")[0] == "off"
    assert check_regime({**unknown, **dens}, ours, "bytes_total") == ("unknown", [])


def test_gradient_bytes_must_be_within_an_order_of_magnitude():
    """Used to be ignored: 69 kB of gradient judged against ResNet-18's 44.7 MB (650x)."""
    unknown = paper_regime({}, {})
    resnet = {"gradient_bytes": {"status": "derived", "value": 44.7e6, "how": "4 B x 11.2 M"}}
    status, notes = check_regime({**unknown, **resnet}, {"gradient_bytes": 68_904.0})
    assert status == "off" and "within 10x" in notes[0]
    assert check_regime({**unknown, **resnet}, {"gradient_bytes": 4.5e6})[0] == "matched"


def test_the_codec_share_of_a_step_is_measured():
    rows = table()
    rows["codec_s"] = [0.0] * 3 + [2.2] * 3  # the method: 0.22 s per worker-step
    ours = measure_regime(claim(), rows, CONFIG, "a")
    # The dense step is 0.1 s compute + 1 s comm per worker-step: 0.22 / 1.1.
    assert ours["codec_share"] == pytest.approx(0.2)


def test_a_papers_density_of_sent_bytes_is_matched_by_ours_of_sent_bytes():
    """PF's 'data sent' counts the workers' pushes; whole pulls must not make ours dense."""
    rows = table()
    # The method sends a fifth of the dense pushes but pulls whole: 400 + 2000 of 4000 bytes.
    rows.loc[rows.method == "m", ["bytes_up", "bytes_total"]] = [400.0, 2400.0]
    ours = measure_regime(claim(), rows, CONFIG, "a")
    assert ours["density"] == pytest.approx(0.6) and ours["density_up"] == pytest.approx(0.2)
    unknown = paper_regime({}, {})
    sent = {"density": {"status": "derived", "value": 0.2455, "how": "x", "direction": "up"}}
    both = {"density": {"status": "derived", "value": 0.2455, "how": "x"}}
    assert check_regime({**unknown, **sent}, ours, "final_test_accuracy") == ("matched", [])
    assert check_regime({**unknown, **both}, ours, "final_test_accuracy")[0] == "off"
