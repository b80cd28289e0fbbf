from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from psml_core.report import (
    figure_layout,
    figures,
    figures_learning,
    figures_sync,
    figures_traffic,
    tables,
)


def test_log_scaled_byte_bars_are_drawn(tmp_path: Path, monkeypatch):
    """Bars spanning orders of magnitude use a log axis; none may start at 0 (undrawable)."""
    captured = {}

    def keep(fig, path):
        captured["fig"] = fig

    monkeypatch.setattr(figures, "save_svg", keep)
    long = pd.DataFrame(
        {
            "workload": ["w"] * 4,
            "setting": ["dense", "dense", "topk", "topk"],
            "direction": ["up", "down", "up", "down"],
            "bytes": [6.16e6, 6.16e6, 1.23e5, 3.96e5],
        }
    )
    figures._draw_bytes(long, [("w", ["dense", "topk"])], tmp_path / "f.svg")
    ax = captured["fig"].axes[0]
    assert ax.get_xscale() == "log"
    bars = [p for p in ax.patches if p.get_width() > 0]
    assert len(bars) == 4
    left = ax.get_xlim()[0]
    for bar in bars:
        assert bar.get_x() >= left > 0
    ends = sorted(bar.get_x() + bar.get_width() for bar in bars)
    np.testing.assert_allclose(ends, sorted(long["bytes"]), rtol=1e-9)


# --------------------------------------------------------------------------- experiment figures


def _runs(rows: list[dict]) -> pd.DataFrame:
    base = {"workload": "w", "scenario": "s", "seed": 0, "clock": "simulated", "iterations": 4,
            "bytes_up": 4000, "bytes_down": 8000, "bytes_total": 12000, "remote_bytes_up": 400,
            "remote_bytes_down": 800, "compute_s": 1.0, "comm_s": 1.0, "wait_s": 0.5,
            "time_to_target_s": 2.0, "final_test_accuracy": 0.9, "target_accuracy": 0.85,
            "total_time_s": 3.0}  # fmt: skip
    out = pd.DataFrame([{**base, **r} for r in rows])
    out["run_id"] = [f"{r.workload}/{r.method}/{r.scenario}/seed{r.seed}" for r in out.itertuples()]
    return out


def _metrics(run_id: str, *, ratio: float = 1.0, steps: int = 1, snappy: bool = False):
    rows = [
        {"iteration": it, "worker": w, "ratio": ratio / (1 + it), "staleness": it % 3,
         "local_steps": steps + (it % 2 if steps > 1 else 0),
         "lossless_bytes_up": 300 if snappy else None,
         "lossless_bytes_down": 600 if snappy else None}
        for it in range(4) for w in range(2)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_sync_figure_draws_wait_staleness_and_local_steps(tmp_path: Path) -> None:
    runs = _runs([{"method": "pcp"}, {"method": "ssp_2", "wait_s": 2.0}])
    metrics = {
        runs.run_id[0]: _metrics(runs.run_id[0], steps=3),
        runs.run_id[1]: _metrics(runs.run_id[1]),
    }
    specs = figures_sync.sync_figure(runs, metrics, ["pcp", "ssp_2"], ["pcp"], tmp_path, "x")
    assert [s.file for s in specs] == ["fig_x_1.svg"]
    assert "local steps" in specs[0].caption and (tmp_path / "fig_x_1.svg").is_file()


def test_staleness_maximum_is_drawn_beside_its_label_not_on_it(tmp_path: Path) -> None:
    """A maximum equal or close to its mean: the tick marker and the value label both show."""
    from figure_checks import all_defects

    from psml_core.report.style import recording_figures

    runs = _runs([{"method": "pcp"}, {"method": "ssp_2"}, {"method": "dense_asp"}])
    metrics = {}
    for r, stale in zip(runs.itertuples(), (3, 0, 8), strict=True):
        m = _metrics(r.run_id, steps=3 if r.method == "pcp" else 1)
        metrics[r.run_id] = m.assign(
            staleness=stale + (m["iteration"] == 3) * (r.method == "dense_asp")
        )
    with recording_figures() as kept:
        specs = figures_sync.sync_figure(
            runs, metrics, ["pcp", "ssp_2", "dense_asp"], ["pcp"], tmp_path, "x"
        )
    ((fig, _path),) = kept
    assert all_defects(fig, specs[0].caption) == []
    stale = fig.axes[1]
    assert [t.get_text() for t in stale.texts] == ["3.0 (max 3.0)", "0 (max 0)", "8.2 (max 9.0)"]


def test_the_scale_sentence_follows_the_drawn_axes() -> None:
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2)
    a.set_title("w · fast")
    b.set_title("w · slow")
    b.set_xscale("log")
    assert figures.scale_sentence({"time": [a.xaxis, b.xaxis]}) == (
        "Logarithmic time axis in w · slow; linear in the other panels."
    )
    a.set_visible(False)  # a hidden panel does not count
    assert figures.scale_sentence({"time": [a.xaxis, b.xaxis], "ratio": [b.yaxis]}) == (
        "Logarithmic time axis."
    )
    b.set_yscale("log")
    assert figures.scale_sentence({"time": [b.xaxis], "ratio": [b.yaxis]}) == (
        "Logarithmic time and ratio axes."
    )
    plt.close(fig)


def test_placement_figure_draws_measured_and_predicted(tmp_path: Path, monkeypatch) -> None:
    captured = {}
    for module in (figure_layout, figures_traffic):
        monkeypatch.setattr(module, "save_svg", lambda fig, path: captured.update(f=fig))
    runs = _runs([{"method": "jpdc"}, {"method": "dense", "remote_bytes_up": 40_000}])
    predicted = {("w", "jpdc"): {"remote_bytes_up": 90.0, "remote_bytes_down": 210.0}}
    specs = figures_traffic.placement_traffic_figure(
        runs, predicted, ["jpdc", "dense"], {"jpdc": "parsa", "dense": "range"}, tmp_path, "t"
    )
    assert len(specs) == 1 and "predicted" in specs[0].caption
    ax = captured["f"].axes[0]
    assert ax.get_xscale() == "log"  # 100 B to 10 kB per step
    ends = sorted(round(p.get_x() + p.get_width(), 6) for p in ax.patches)
    # measured per step (bytes / iterations) for both methods, predicted for jpdc only
    assert ends == sorted([100.0, 200.0, 10_000.0, 200.0, 90.0, 210.0])
    left = ax.get_xlim()[0]
    assert left > 0 and all(p.get_x() >= left for p in ax.patches)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["jpdc (parsa)", "dense (range)"]


def test_a_half_width_figure_with_long_bar_names_keeps_its_width(tmp_path: Path) -> None:
    """Bar names up to the half-width limit leave a narrow panel; its x label, wider than the
    panel, must not widen the saved figure (the page would shrink it, fonts and all)."""
    from figure_checks import width_defects

    from psml_core.report.style import recording_figures

    names = ["random_partition", "partition_only"]
    runs = _runs([{"method": m} for m in names])
    with recording_figures() as kept:
        figures_traffic.placement_traffic_figure(
            runs, {}, names, dict.fromkeys(names, "random"), tmp_path, "t"
        )
    ((fig, _path),) = kept
    assert fig.get_figwidth() < 4 and width_defects(fig) == []


def test_lossless_figure_compares_raw_and_snappy(tmp_path: Path, monkeypatch) -> None:
    captured = {}
    for module in (figure_layout, figures_traffic):
        monkeypatch.setattr(module, "save_svg", lambda fig, path: captured.update(f=fig))
    runs = _runs([{"method": "rat"}, {"method": "dense"}])
    metrics = {runs.run_id[0]: _metrics(runs.run_id[0], snappy=True),
               runs.run_id[1]: _metrics(runs.run_id[1])}  # fmt: skip
    specs = figures_traffic.lossless_figure(runs, metrics, ["rat", "dense"], tmp_path, "l")
    assert "Snappy" in specs[0].caption
    ends = sorted(round(p.get_x() + p.get_width()) for p in captured["f"].axes[0].patches)
    # raw up/down for both; Snappy sums (8 records x 300 / 600) only where measured
    assert ends == sorted([4000, 8000, 4000, 8000, 2400, 4800])


def test_ratio_and_head_to_head_figures(tmp_path: Path) -> None:
    runs = _runs([{"method": "dc2"}, {"method": "dense", "time_to_target_s": float("nan")}])
    metrics = {runs.run_id[0]: _metrics(runs.run_id[0], ratio=0.5),
               runs.run_id[1]: _metrics(runs.run_id[1])}  # fmt: skip
    ratio = figures_learning.ratio_figure(runs, metrics, ["dc2", "dense"], tmp_path, "r")
    h2h = figures_traffic.head_to_head_figure(runs, ["dense", "dc2"], tmp_path, "h")
    assert (tmp_path / ratio[0].file).is_file() and (tmp_path / h2h[0].file).is_file()
    assert "simulated" in h2h[0].caption


def test_two_state_cross_traffic_panel_shades_the_high_state(tmp_path: Path, monkeypatch):
    """A shared two-state chain: the first seed's ratio against time, the high state shaded."""
    captured = {}
    monkeypatch.setattr(figure_layout, "save_svg", lambda fig, path: captured.update(f=fig))
    chain = {"kind": "markov", "flows": [0, 63], "switch_prob": 0.5, "period_ms": 1}
    runs = _runs([{"method": "dc2", "seed": 1}, {"method": "dc2", "seed": 0}])
    metrics = {}
    for r in runs.itertuples():
        m = _metrics(r.run_id, ratio=0.5)
        metrics[r.run_id] = m.assign(time_s=0.004 * (m["iteration"] + 1) + 0.001 * r.seed)
    spans, flows = figures_learning.high_state_spans(chain, 0, 0.016)
    assert flows == 63 and spans and all(0.0 <= a < b <= 0.016 for a, b in spans)
    scenarios = {"s": {"cross_traffic": chain}}
    spec = figures_learning.ratio_figure(runs, metrics, ["dc2"], tmp_path, "r", scenarios)
    ax = captured["f"].axes[0]
    shaded = [(p.get_x(), p.get_x() + p.get_width()) for p in ax.patches]
    np.testing.assert_allclose(shaded, spans)
    (line,) = ax.lines  # seed 0 only: times 4, 8, 12, 16 ms
    np.testing.assert_allclose(line.get_xdata(), [0.004, 0.008, 0.012, 0.016])
    assert "seed 0" in ax.get_xlabel() and "simulated" in ax.get_xlabel()
    assert "w · s: each method's first seed" in spec[0].caption
    assert any("63 competing flows" in t.get_text() for t in captured["f"].legends[0].texts)
    # No such chain (none, per machine, or equal states): the mean over seeds per iteration.
    for other in (None, {**chain, "scope": "per_machine"}, {**chain, "flows": [5, 5]}):
        assert figures_learning.high_state_spans(other, 0, 1.0) is None
        scenarios = {"s": {"cross_traffic": other}}
        spec = figures_learning.ratio_figure(runs, metrics, ["dc2"], tmp_path, "r", scenarios)
        assert (
            captured["f"].axes[0].get_xlabel() == "iteration"
            and "first seed" not in spec[0].caption
        )


def test_head_to_head_marks_censored_seeds(tmp_path: Path, monkeypatch) -> None:
    captured = {}
    for module in (figure_layout, figures_traffic):
        monkeypatch.setattr(module, "save_svg", lambda fig, path: captured.update(f=fig))
    nan = float("nan")
    runs = _runs(
        [
            {"method": "dc2", "seed": 0},
            {"method": "dc2", "seed": 1, "time_to_target_s": nan},
            {"method": "dense", "time_to_target_s": nan},
        ]
    )
    specs = figures_traffic.head_to_head_figure(runs, ["dense", "dc2"], tmp_path, "h")
    texts = [t.get_text().strip() for t in captured["f"].axes[0].texts]
    assert texts == ["not held (censored)", "2.00\u00a0s (censored 1/2)"]
    assert "censored" in specs[0].caption


def test_hashing_table_before_and_after() -> None:
    stats = {"z": {"hashed": [{"hashing": {"buckets": 100, "compression": 16.0},
                               "vs_raw": {"nnz_per_row_mean": {"raw": 75.5, "hashed": 74.6},
                                          "replication_factor": {"raw": 1.9, "hashed": 3.97},
                                          "mean_pairwise_jaccard": {"raw": 0.33,
                                                                    "hashed": 0.987}}}]},
             "d": {"rows": 5}}  # fmt: skip
    table = tables.hashing_table("h", stats)
    assert table is not None and table.rows == [["z", "100", "16", "75.5 → 74.6", "1.90 → 3.97",
                                                 "0.330 → 0.987"]]  # fmt: skip
    assert tables.hashing_table("h", {"d": {"rows": 5}}) is None


def test_no_panel_gets_more_than_eight_methods():
    from psml_core.report.figure_layout import MAX_SERIES, method_groups

    few = ["dense_bsp", "a", "b"]
    assert method_groups(few) == [few]
    many = ["dense_bsp", *(f"m{i}" for i in range(12))]
    groups = method_groups(many)
    assert all(len(g) <= MAX_SERIES for g in groups)
    assert all(g[0] == "dense_bsp" for g in groups)  # the yardstick in every panel
    assert sorted({m for g in groups for m in g}) == sorted(many)
    assert max(map(len, groups)) - min(map(len, groups)) <= 1
    no_ref = [f"m{i}" for i in range(9)]
    assert [len(g) for g in method_groups(no_ref)] == [5, 4]
