from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from psml_core.errors import ConfigError, DataError
from psml_core.net.delay import make_delay


def test_none_is_zero():
    assert make_delay(None, 0).delay_s(5) == 0.0


def test_normal_matches_its_parameters_and_is_seeded():
    d = make_delay({"kind": "normal", "mean_ms": 5, "std_ms": 1}, 3)
    xs = np.array([d.delay_s(t) for t in range(5000)])
    assert abs(xs.mean() - 0.005) < 0.0001 and abs(xs.std() - 0.001) < 0.0001
    assert (xs >= 0).all()
    again = make_delay({"kind": "normal", "mean_ms": 5, "std_ms": 1}, 3)
    assert [again.delay_s(t) for t in (4999, 0, 17)] == [xs[4999], xs[0], xs[17]]


def test_markov_two_states_and_switch_rate():
    d = make_delay({"kind": "markov", "low_ms": 1, "high_ms": 100, "switch_prob": 0.05}, 1)
    xs = np.array([d.delay_s(t) for t in range(20000)])
    assert set(np.round(xs * 1e3, 6)) == {1.0, 100.0}
    switches = np.count_nonzero(np.diff(xs))
    assert 0.04 < switches / 20000 < 0.06
    assert xs[0] in (0.001, 0.1)


def test_trace(tmp_path: Path):
    p = tmp_path / "t.csv"
    p.write_text("step,delay_ms\n0,1\n10,50\n20,2\n")
    d = make_delay({"kind": "trace", "path": str(p)}, 0)
    assert [d.delay_s(t) for t in (0, 9, 10, 25)] == [0.001, 0.001, 0.05, 0.002]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a,b\n1,2\n", "header 'step,delay_ms'"),
        ("step,delay_ms\n1,x\n", "line 2"),
        ("step,delay_ms\n", "empty"),
        ("step,delay_ms\n2,1\n1,1\n", "line 3"),
    ],
)
def test_bad_traces_name_file_and_line(tmp_path: Path, text, fragment):
    p = tmp_path / "t.csv"
    p.write_text(text)
    with pytest.raises(DataError, match=fragment):
        make_delay({"kind": "trace", "path": str(p)}, 0)


def test_missing_trace_and_bad_kind(tmp_path: Path):
    with pytest.raises(DataError, match="does not exist"):
        make_delay({"kind": "trace", "path": str(tmp_path / "none.csv")}, 0)
    with pytest.raises(ConfigError, match="unknown delay process 'wobbly'"):
        make_delay({"kind": "wobbly"}, 0)
