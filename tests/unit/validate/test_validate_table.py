"""The validation table, its plan and its place in the report (no root needed)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from psml_core.errors import ConfigError, DataError
from psml_core.report.format import fmt_bandwidth, fmt_seconds
from psml_core.report.validation import validation_block
from psml_core.validate.harness import Plan, _spec, _zero_scenario, link_scenario
from psml_core.validate.netns import Link
from psml_core.validate.table import Row, ValidationTable, covering_link, read_table


def make_table(rows: list[Row] | None = None) -> ValidationTable:
    return ValidationTable(
        date="2026-11-26T05:00:00Z",
        commit="0123456789abcdef",
        dirty=False,
        machine={"host": "vm", "cpu": "EPYC", "cores": 2, "kernel": "6.1", "load_before": [1.5]},
        command="psml validate",
        settings={
            "workload": "digits_mlp",
            "workers": 1,
            "shards": 1,
            "iterations": 60,
            "repeats": 3,
            "max_error": 0.1,
        },  # fmt: skip
        testbed={
            "shaping": "tbf",
            "delay": "delay line",
            "congestion_control": "cubic",
            "rank_scheduling": "SCHED_FIFO 5",
        },  # fmt: skip
        links=[{"label": "100mbit_2ms", "rate_mbit": 100.0, "delay_us": 2000.0}],
        rows=rows
        or [
            Row(
                "100mbit_2ms",
                "dense_bsp",
                [0.010, 0.0095, 0.011],
                0.008,
                [0.002, 0.0015],
                0.0003,
                0.0096,
            ),
            Row("100mbit_2ms", "topk_ef", [0.010], 0.005, [0.001], 0.0, 0.006),
        ],
    )


def test_a_row_derives_medians_errors_and_the_calibrated_error() -> None:
    r = Row("l", "m", [0.010, 0.0095, 0.011], 0.008, [0.002, 0.0015], 0.0003, 0.0096)
    assert r.real_median_s == 0.010
    assert r.error == pytest.approx(-0.2)
    assert r.overhead_s == pytest.approx(0.00175 - 0.0003)
    assert r.message_overhead_us == pytest.approx(1e6 * 0.00145 / 3)
    assert r.calibrated_error == pytest.approx(-0.04)
    bare = Row("l", "m", [1.0], 1.1)  # no calibration: the sim as it is
    assert (bare.overhead_s, bare.calibrated_error) == (0.0, pytest.approx(0.1))


def test_the_table_round_trips_and_holds_rows_to_the_bound(tmp_path: Path) -> None:
    table = make_table()
    table.write(tmp_path / "v.json")
    back = read_table(tmp_path / "v.json")
    assert [r.as_dict() for r in back.rows] == [r.as_dict() for r in table.rows]
    assert [back.within(r) for r in back.rows] == [True, False]  # -4 % and -40 %
    md = back.markdown()
    assert "| 100mbit_2ms | dense_bsp | 0.0100 |" in md and "(outside)" in md
    assert "got" not in md  # no goodput measured: no line about it
    back.links[0].update(goodput_mbit=91.5, wire_efficiency=1448 / 1500)
    assert (
        md + "\n\n100mbit_2ms: shaped to 100 Mbit/s; one TCP flow got 91.5 Mbit/s of "
        "goodput (the sim's model: 97)" == back.markdown()
    )


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (None, "does not exist"),
        ("{nope", "not readable JSON"),
        ('{"format": 2}', "not a `psml validate` table"),
        ('{"format": 1, "rows": []}', "malformed"),
    ],
)
def test_a_bad_table_is_one_line_naming_the_file(tmp_path: Path, text, fragment) -> None:
    path = tmp_path / "v.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(DataError, match=fragment) as info:
        read_table(path)
    assert str(path) in str(info.value)


def test_a_row_without_positive_times_is_malformed(tmp_path: Path) -> None:
    make_table([Row("l", "m", [0.01], 0.01)]).write(tmp_path / "v.json")
    obj = json.loads((tmp_path / "v.json").read_text())
    obj["rows"][0]["sim_s"] = 0
    (tmp_path / "v.json").write_text(json.dumps(obj))
    with pytest.raises(DataError, match="no positive times"):
        read_table(tmp_path / "v.json")


def test_scenarios_are_matched_to_links_by_rate_and_latency() -> None:
    table = make_table()
    assert covering_link(table, {"bandwidth_gbps": 0.1, "latency_us": 2000})["label"] == (
        "100mbit_2ms"
    )
    assert covering_link(table, {"bandwidth_gbps": 0.1, "latency_us": 50}) is None
    assert covering_link(table, {"bandwidth_gbps": 10, "latency_us": 2000}) is None


def test_the_report_says_plainly_when_the_simulator_is_unvalidated(smoke) -> None:
    experiment = {"scenarios": {k: dataclasses.asdict(v) for k, v in smoke.scenarios.items()}}
    block = validation_block(None, None, experiment)
    assert block["text"].startswith("The simulator is unvalidated for this tier's links")
    slow = f"slow_100m ({fmt_bandwidth(0.1)}, {fmt_seconds(0.002)}): unvalidated"
    assert slow in block["text"] and not block["tables"]


def test_the_report_gives_the_table_its_provenance_and_coverage(smoke) -> None:
    experiment = {"scenarios": {k: dataclasses.asdict(v) for k, v in smoke.scenarios.items()}}
    block = validation_block(make_table(), "config/validation/smoke.json", experiment)
    text = block["text"]
    assert "smoke.json: 2026-11-26T05:00:00Z, commit 0123456789ab, on vm" in text
    slow = f"slow_100m ({fmt_bandwidth(0.1)}, {fmt_seconds(0.002)})"
    assert f"{slow}: validated by link 100mbit_2ms" in text
    assert f"dc_10g ({fmt_bandwidth(10)}, {fmt_seconds(50e-6)}): unvalidated" in text
    assert "1 of 2 rows are within ±10 %" in text
    (table,) = block["tables"]
    assert table.rows[0][:2] == ["100mbit_2ms", "dense_bsp"] and table.rows[1][-1] == "-40.0 %"


def test_links_come_from_scenarios_or_rate_and_delay(smoke) -> None:
    link, sc = link_scenario(smoke, "slow_100m", by_name=True)
    assert link == Link(100.0, 2000.0) and sc is smoke.scenarios["slow_100m"]
    link, sc = link_scenario(smoke, "500:1", by_name=False)
    assert link == Link(500.0, 1000.0) and (sc.bandwidth_gbps, sc.latency_us) == (0.5, 1000.0)
    assert sc.wire_efficiency == pytest.approx(1448 / 1500)  # the schema's other defaults
    with pytest.raises(ConfigError, match="has cross_traffic, which a shaped link does not"):
        link_scenario(smoke, "dc_cross_high", by_name=True)
    with pytest.raises(ConfigError, match="expected RATE_MBIT:DELAY_MS"):
        link_scenario(smoke, "fast", by_name=False)
    with pytest.raises(ConfigError, match="not in tier 'smoke'"):
        link_scenario(smoke, "nowhere", by_name=True)


def test_both_backends_run_the_same_spec_on_the_validation_layout(smoke) -> None:
    link, sc = link_scenario(smoke, "slow_100m", by_name=True)
    plan = Plan(((link, sc),), ("dense_bsp",), "digits_mlp", 2, 1, 30, 1, 0, 0.1)
    dist, sim = (
        _spec(smoke, plan, sc, "dense_bsp", "dist"),
        _spec(smoke, plan, sc, "dense_bsp", "sim"),
    )
    assert dataclasses.replace(dist, backend="sim") == sim
    assert (dist.workers, dist.shards, dist.colocated, dist.workload.iterations) == (
        2,
        1,
        False,
        30,
    )
    zero = _zero_scenario()
    assert (zero.latency_us, zero.message_overhead_us) == (0.0, 0.0)
    # on the testbed's measured goodput: payload bits, so carried at wire efficiency 1
    probe = _zero_scenario(1.2e9)
    assert (probe.bandwidth_gbps, probe.wire_efficiency, probe.latency_us) == (1.2, 1.0, 0.0)


def test_without_root_psml_validate_says_so_in_one_line(monkeypatch, capsys) -> None:
    from psml_core.cli import main

    monkeypatch.setattr("psml_core.validate.netns.os.geteuid", lambda: 1000)
    assert main(["validate"]) == 4
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "psml validate: error: cannot build the shaped testbed: needs root (network namespaces, "
        "TUN devices and tc); run it as root"
    ]


def test_without_tun_psml_validate_says_so(monkeypatch) -> None:
    from psml_core.validate import netns

    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)
    real = netns.Path.exists
    monkeypatch.setattr(
        netns.Path, "exists", lambda p: False if str(p) == "/dev/net/tun" else real(p)
    )
    assert (
        netns.preflight()
        == "no TUN device (/dev/net/tun): load the tun module or run where it exists"
    )
