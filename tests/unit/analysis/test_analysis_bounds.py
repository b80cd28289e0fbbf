"""Bounds only where the paper's numbers pin them: a regime field with several values.

Used to be INCONSISTENT (paper): Ratatouille's "up to 4.3x" was bounded with the README
table's density 0.2455 (2.79x), although the claim is about other applications and the same
README reports about 0.02 (6.01x).
"""

from __future__ import annotations

import pytest
import yaml
from claim_helpers import claim, seeds, verdict

from psml_core.analysis.claims import load_papers
from psml_core.analysis.consistency import consistency_bound
from psml_core.analysis.regime import check_regime, paper_regime, regime_rows
from psml_core.config import validate
from psml_core.errors import ConfigError

CC = {"status": "derived", "value": 5.7, "how": "abstract"}
BOTH = {"status": "derived", "values": [0.02, 0.2455], "how": "README figure and table"}


def speedup(value):
    c = claim("speedup", value, up_to=True, metrics=("time_to_target_s",))
    c["regime"] = {"comm_compute": CC, "density": BOTH}
    return c


def test_several_values_give_the_range_of_bounds():
    found = consistency_bound(speedup(4.3), {"comm_compute": CC, "density": BOTH})
    assert found.low == pytest.approx(6.7 / (1 + 5.7 * 0.2455))
    assert found.high == pytest.approx(6.7 / (1 + 5.7 * 0.02))
    assert "range 2.79x to 6.01x" in found.text and "= 6.01x" in found.text
    one = consistency_bound(speedup(4.3), {"comm_compute": CC, "density": {**CC, "value": 0.2455}})
    assert one.low == one.high and "(1 + 5.7) / (1 + 5.7 x 0.2455) = 2.79x" in one.text


def test_a_claim_is_inconsistent_only_above_every_bound():
    runs = seeds([1 / 1.3] * 3, [1.0] * 3, metric="time_to_target_s")
    res = verdict(speedup(4.3), runs)
    assert res.verdict != "INCONSISTENT (paper)"
    assert (res.bound_low, res.bound_value) == pytest.approx((2.7924, 6.0144), rel=1e-3)
    res = verdict(speedup(7.0), runs)
    assert res.verdict == "INCONSISTENT (paper)" and res.cause_class == "bound"
    # A time reduction is bounded alike, in percent.
    red = claim("reduction", 90.0, metrics=("time_to_target_s",))
    red["regime"] = {"comm_compute": CC, "density": BOTH}
    res = verdict(red, runs)
    assert res.verdict == "INCONSISTENT (paper)" and "64.2% to 83.4%" in res.bound_text


def test_ours_matches_a_field_with_several_values_where_it_matches_any():
    theirs = {**paper_regime({}, {}), "density": BOTH}
    assert check_regime(theirs, {"density": 0.015}, "time_to_target_s")[0] == "matched"  # ~1%
    assert check_regime(theirs, {"density": 0.2}, "time_to_target_s")[0] == "matched"  # ~10%
    status, notes = check_regime(theirs, {"density": 0.6}, "time_to_target_s")
    assert status == "off" and "none of the paper's 2 values matches" in notes[0]
    # Single values keep working; the rows print every value.
    single = {**paper_regime({}, {}), "density": {**CC, "value": 0.2455}}
    assert check_regime(single, {"density": 0.6}, "time_to_target_s")[0] == "off"
    row = next(r for r in regime_rows(theirs, {"density": 0.2}) if r["field"] == "density")
    assert row["theirs"] == [0.02, 0.2455] and row["ratio"] is None


def test_the_schema_takes_values_instead_of_value(tmp_path):
    base = {"id": "p", "title": "t", "authors": "a", "venue": "v",
            "claims": [claim("reduction", 50.0)]}  # fmt: skip
    ok = {**base, "regime": {"density": BOTH}}
    assert validate(ok, "paper", source="test")["regime"]["density"]["values"] == [0.02, 0.2455]
    for bad in ({**BOTH, "value": 0.02}, {"status": "derived", "values": [0.02], "how": "x"},
                {"status": "derived", "how": "x"}):  # fmt: skip
        (tmp_path / "p.yaml").write_text(yaml.safe_dump({**base, "regime": {"density": bad}}))
        with pytest.raises(ConfigError, match="p.yaml"):
            load_papers(tmp_path)


def test_rat_speedups_density_carries_both_readme_values(repo, tmp_path):
    src = repo / "config/papers/ratatouille.yaml"
    (tmp_path / "ratatouille.yaml").write_text(src.read_text())
    paper = load_papers(tmp_path)["ratatouille"]
    c = next(c for c in paper["claims"] if c["id"] == "rat_speedup")
    density = paper_regime(paper, c)["density"]
    assert density["values"] == [0.02, 0.2455] and "README" in density["how"]
    found = consistency_bound(c, paper_regime(paper, c))
    assert found.low < 4.3 < found.high  # the claim lies inside the range: not INCONSISTENT
