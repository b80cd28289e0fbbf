"""The PDF report: built from synthetic but schema-valid results, checked with pypdf."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from pypdf import PdfReader
from report_inputs import COMMIT, PAPERS, make_inputs, write_claims, write_papers

from psml_core.analysis.aggregate import read_aggregate_csv, read_runs_csv
from psml_core.analysis.claims import load_papers
from psml_core.analysis.experiments import ALL_RUNS, experiment_runs
from psml_core.errors import DataError
from psml_core.report import build_report
from psml_core.report.format import fmt_bandwidth, fmt_bytes, fmt_percent, fmt_seconds, sig
from psml_core.report.reported_vs_ours import fmt_ours_short, read_claims
from psml_core.report.sections import experiment_aggregate, head_to_head_section, paper_sections


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("report")
    inputs = make_inputs(root / "results")
    pdfs = []
    for k in (1, 2):
        pdf = root / f"out{k}" / "report.pdf"
        build_report(**inputs, out_pdf=pdf, workdir=root / f"work{k}")
        pdfs.append(pdf)
    reader = PdfReader(pdfs[0])
    text = "\n".join(page.extract_text() for page in reader.pages)
    return {"root": root, "inputs": inputs, "pdfs": pdfs, "reader": reader, "text": text}


def test_pdf_is_byte_identical_across_builds(built: dict[str, Any]) -> None:
    a, b = (p.read_bytes() for p in built["pdfs"])
    assert a.startswith(b"%PDF") and a == b


def test_workdir_holds_the_intermediate_artifacts(built: dict[str, Any]) -> None:
    work = built["root"] / "work1"
    names = {p.name for p in work.iterdir()}
    assert {"report.typ", "report_data.json", "data_runs.csv", "table_verdicts.csv"} <= names
    assert any(n.startswith("fig_") and n.endswith(".svg") for n in names)
    for svg in work.glob("fig_*.svg"):  # deterministic SVG: no date, fixed ids
        assert svg.read_bytes() == (built["root"] / "work2" / svg.name).read_bytes()
    # Every number comes from the data files, none is typed into the template.
    template = (work / "report.typ").read_text()
    for datum in ("MB", "kB", "dense_bsp", "digits_mlp", "dc_10g", COMMIT[:8]):
        assert datum not in template, datum


def test_pdf_has_the_sections_and_provenance(built: dict[str, Any]) -> None:
    text = built["text"]
    assert len(built["reader"].pages) >= 3
    for title in ("Setup", "Methods", "Results", "Tables attached to this PDF", "Provenance"):
        assert title in text, title
    assert "simulated time" in text
    assert COMMIT in text
    assert "dense_bsp" in text and "bsp" in text and "range" in text
    assert "47,236" in text  # sparsity headline stats of the zipf data set
    assert "1.08" in text


def _attached(built: dict[str, Any]) -> dict[str, str]:
    return {name: data[0].decode() for name, data in built["reader"].attachments.items()}


def test_long_tables_are_attached_as_csv(built: dict[str, Any]) -> None:
    files = _attached(built)
    want = {"data_runs.csv", "data_aggregate.csv", "data_claims.csv", "data_regimes.csv",
            "data_methods.csv", "data_partition.csv"}  # fmt: skip
    assert want <= set(files)
    for name in files:  # each attachment is listed, with its size, in the PDF
        assert name in built["text"].replace("\n", "")


def test_attached_tables_hold_numbers_not_formatted_text(built: dict[str, Any]) -> None:
    files = _attached(built)
    runs = pd.read_csv(io.StringIO(files["data_runs.csv"]))
    for run_id in built["inputs"]["metrics"]:
        workload, method, scenario, _ = run_id.split("/")
        assert ((runs["workload"] == workload) & (runs["method"] == method)).any()
        assert scenario in set(runs["scenario"])
    for col in ("bytes_up", "bytes_down", "total_time_s", "final_test_accuracy"):
        assert pd.api.types.is_numeric_dtype(runs[col]), col
    # rcv1_logreg's target 99 % is never reached: censored, flagged, no time
    rcv1 = runs[runs["workload"] == "rcv1_logreg"]
    assert rcv1["censored"].all() and rcv1["time_to_target_s"].isna().all()
    assert (runs.loc[~runs["censored"], "time_to_target_s"] > 0).all()
    regimes = pd.read_csv(io.StringIO(files["data_regimes.csv"]))
    assert {"claim", "field", "paper_value", "paper_status", "ours"} <= set(regimes.columns)
    methods = pd.read_csv(io.StringIO(files["data_methods.csv"]), keep_default_na=False)
    dc2 = methods[methods["recipe"] == "dc2_topk"].iloc[0]
    assert dc2["role"] == "method" and "Delay measured once per iteration." in dc2["deviations"]


def test_pdf_has_no_placeholders(built: dict[str, Any]) -> None:
    text = built["text"]
    for bad in ("TODO", "TBD", "None"):
        assert bad not in text, bad
    assert not re.search(r"\bnan\b", text, flags=re.IGNORECASE)


def test_missing_input_is_a_data_error_naming_it(built: dict[str, Any], tmp_path: Path) -> None:
    inputs = dict(built["inputs"])
    gone = tmp_path / "nowhere" / "rcv1_logreg.json"
    inputs["partition"] = [gone]
    with pytest.raises(DataError, match="nowhere"):
        build_report(**inputs, out_pdf=tmp_path / "r.pdf", workdir=tmp_path / "w")
    assert not (tmp_path / "r.pdf").exists()


def test_metrics_must_match_the_runs(built: dict[str, Any], tmp_path: Path) -> None:
    inputs = dict(built["inputs"])
    inputs["metrics"] = dict(list(inputs["metrics"].items())[1:])
    with pytest.raises(DataError, match="no metrics for runs"):
        build_report(**inputs, out_pdf=tmp_path / "r.pdf", workdir=tmp_path / "w")


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1234567, "1.23\u00a0MB"), (999, "999\u00a0B"), (999_600, "1.00\u00a0MB"),
     (0, "0\u00a0B"), (None, "–"), (float("nan"), "–")],
)  # fmt: skip
def test_fmt_bytes(value: Any, expected: str) -> None:
    assert fmt_bytes(value) == expected


def test_number_formatting() -> None:
    assert fmt_seconds(0.0012345) == "1.23\u00a0ms"
    assert fmt_seconds(0.9996) == "1.00\u00a0s"
    assert fmt_seconds(12345.0) == "12300\u00a0s"
    assert fmt_seconds(None) == "–"
    assert fmt_percent(0.8532) == "85.3\u00a0%"
    assert fmt_bandwidth(0.1) == "100\u00a0Mbit/s"
    assert sig(9.996) == "10.0"


# --------------------------------------------------------------------------- verdicts and papers


def _pdf_text(pdf: Path) -> str:
    return "\n".join(page.extract_text() for page in PdfReader(pdf).pages)


def _flat(text: str) -> str:
    """The text with line breaks and non-breaking spaces as plain spaces."""
    return " ".join(text.replace("\u00a0", " ").split())


def test_summary_page_has_the_verdict_table(built: dict[str, Any]) -> None:
    first = _flat(built["reader"].pages[0].extract_text())
    assert "Summary: reported versus reproduced" in first
    claims = read_claims(built["inputs"]["claims_csv"])
    assert len(claims) == 3
    summary = _flat(" ".join(p.extract_text() for p in built["reader"].pages[:2]))
    for r in claims.itertuples(index=False):
        assert r.claim in summary
        assert r.verdict in summary
    # Counts and numbers of the summary come from claims.csv.
    n = int((claims["verdict"] == "NOT REPRODUCED").sum())
    assert f"{n} NOT REPRODUCED" in first
    dc2 = claims[claims["claim"] == "dc2_vs_none"].iloc[0]
    assert dc2.metric == "total_time_s"
    assert _flat(fmt_ours_short(dc2)) in summary
    assert "up to 41×" in first
    # The verdict rules are defined in the glossary after Table 1, not on the summary page.
    glossary = _flat(built["text"]).split("Glossary Verdicts", 1)[1]
    for rule in ("REPRODUCED: at least 3 seeds", "PARTIAL: the effect clears the partial floor",
                 "censored:", "NOT COMPARABLE (regime):"):  # fmt: skip
        assert rule in glossary, rule


def test_a_claim_whose_experiment_is_not_in_the_tier_says_so(built: dict[str, Any]) -> None:
    text = _flat(built["text"])
    claims = read_claims(built["inputs"]["claims_csv"])
    pcp = claims[claims["claim"] == "pcp_vs_ssp"].iloc[0]
    assert pcp.verdict == "NOT RUN" and "no experiment 'pcp'" in pcp.detail
    # The verdict's reason, as claims.csv gives it (its "not run in this tier" said once).
    reason = _flat(pcp.detail).removeprefix("not run in this tier: ")
    assert f"NOT RUN in this tier: {reason}" in text
    assert "not run" in text
    assert "The smoke tier defines no experiment for this paper" in text
    assert "could not be judged because this tier does not run them" in text


def test_each_paper_has_its_section_and_figures(built: dict[str, Any]) -> None:
    text = _flat(built["text"])
    for pid, paper in PAPERS.items():
        assert f"{pid}: {paper['title']}" in text
        for c in paper["claims"]:
            assert _flat(c["statement"]) in text
    for heading in ("Claims", "Our setup and its deviations", "Reported versus reproduced"):
        assert text.count(heading) >= 2, heading
    assert "Compression ratio in force at each iteration" in text  # the adaptive method's figure
    assert "What we think explains it: Our toy network is far faster than the paper's" in text
    assert "Experiment dc2 of tier smoke" in text
    work = built["root"] / "work1"
    for name in ("fig_dc2_accuracy_1.svg", "fig_dc2_bytes_1.svg", "fig_dc2_ratio_1.svg"):
        assert (work / name).is_file(), name
    assert not list(work.glob("fig_pcp_*"))  # no runs, no figures
    assert "[ours]" in text  # deviations are marked


def test_head_to_head_section(built: dict[str, Any]) -> None:
    text = _flat(built["text"])
    assert "Head-to-head" in text and "Both methods side by side." in text
    assert "Head-to-head, grouped by workload · scenario" in text
    assert (built["root"] / "work1" / "fig_head_to_head_summary_1.svg").is_file()


def test_a_tier_without_head_to_head_says_so(built: dict[str, Any], tmp_path: Path) -> None:
    exp = dict(built["inputs"]["experiment"])
    exp["experiments"] = {k: v for k, v in exp["experiments"].items() if k != "head_to_head"}
    runs = pd.read_csv(built["inputs"]["runs_csv"])
    aggregate = read_aggregate_csv(built["inputs"]["aggregate_csv"])
    section = head_to_head_section(
        runs=runs, aggregate=aggregate, frames={}, experiment=exp, workdir=tmp_path
    )
    assert "The smoke tier has no head-to-head experiment" in section["intro"]
    assert section["tables"] == [] and section["figures"] == []


def test_the_report_prints_the_comparison_stages_means(built: dict[str, Any]) -> None:
    """The head-to-head table and the attachment are aggregate.csv's rows, not recomputed."""
    inputs = built["inputs"]
    aggregate = read_aggregate_csv(inputs["aggregate_csv"])
    assert set(aggregate["experiment"]) == {ALL_RUNS, *inputs["experiment"]["experiments"]}
    runs = read_runs_csv(inputs["runs_csv"])
    h2h = inputs["experiment"]["experiments"]["head_to_head"]
    sub = experiment_runs(runs, inputs["experiment"], h2h)
    mine = experiment_aggregate(aggregate, "head_to_head", sub)
    assert len(mine) > 0 and "experiment" not in mine.columns
    attached = pd.read_csv(built["root"] / "work1" / "data_aggregate.csv")
    assert len(attached) == len(aggregate)


@pytest.mark.parametrize("experiment", ["head_to_head", "*"])
def test_a_stale_aggregate_is_refused(built: dict[str, Any], tmp_path: Path, experiment) -> None:
    """An aggregate.csv older than the runs (a seed fewer) stops the report with the fix."""
    inputs = dict(built["inputs"])
    agg = pd.read_csv(inputs["aggregate_csv"])
    agg.loc[agg["experiment"] == experiment, "n"] += 1
    stale = tmp_path / "aggregate.csv"
    agg.to_csv(stale, index=False)
    inputs["aggregate_csv"] = stale
    with pytest.raises(DataError, match="older than runs.csv; re-run `psml compare`"):
        build_report(**inputs, out_pdf=tmp_path / "r.pdf", workdir=tmp_path / "w")
    assert not (tmp_path / "r.pdf").exists()


def test_methods_appendix_lists_every_recipe(built: dict[str, Any]) -> None:
    text = _flat(built["text"])
    appendix = text[text.index("Appendix A: Methods") : text.index("Appendix B: Operating points")]
    recipes = built["inputs"]["experiment"]["recipes"]
    for name in recipes:
        assert name in appendix, name
    assert "method, dc2" in appendix
    assert "each deviation (our design choice)" in appendix


def test_provenance_appendix_lists_inputs(built: dict[str, Any]) -> None:
    text = _flat(built["text"])
    prov = text[text.index("Appendix C: Provenance") :]
    for name in ("papers/dc2.yaml", "papers/pcp.yaml", "claims.csv", "runs.csv", COMMIT):
        assert name in prov, name


def test_operating_points_appendix_lists_each_choice_and_its_candidates(built: dict[str, Any]):
    text = _flat(built["text"])
    appendix = text[text.index("Appendix B: Operating points") : text.index("Appendix C")]
    assert "tuning seed 1000" in appendix and "within one test sample" in appendix
    assert "dc2_topk__r0p5 from digits_mlp/dc2_topk" in appendix  # a sweep inherits
    # Where the points came from (the PDF may break the line after a slash).
    assert "config/operating_points/smoke.yaml" in appendix.replace("/ ", "/")
    assert "0.2 (2×)" in appendix and "any (scenario-free)" in appendix
    assert "div." in appendix and "0.950 *" in appendix  # a diverged candidate; the chosen one
    cands = _attached(built)["data_tuning_candidates.csv"]
    assert cands.count("\n") == 1 + 14 and "returned to 2.3" in cands


def test_reported_values_are_read_from_the_paper_files(
    built: dict[str, Any], tmp_path: Path
) -> None:
    """Change a claim's value in the paper files: the PDF follows; a stale claims.csv is refused."""
    papers = yaml.safe_load(yaml.safe_dump(PAPERS))
    papers["dc2"]["claims"][1]["reported"]["value"] = 27.3
    papers_dir = write_papers(tmp_path / "papers", papers)
    inputs = dict(built["inputs"], papers_dir=papers_dir)
    with pytest.raises(DataError, match="re-run `psml compare`"):
        build_report(**inputs, out_pdf=tmp_path / "stale.pdf", workdir=tmp_path / "w0")
    assert not (tmp_path / "stale.pdf").exists()
    claims = write_claims(inputs["runs_csv"], papers_dir, tmp_path / "claims.csv")
    inputs["claims_csv"] = claims
    build_report(**inputs, out_pdf=tmp_path / "r.pdf", workdir=tmp_path / "w")
    text = _flat(_pdf_text(tmp_path / "r.pdf"))
    assert "27.3 %" in text and "63.7 %" not in text
    assert "63.7 %" in _flat(built["text"])


def test_claims_file_must_exist(built: dict[str, Any], tmp_path: Path) -> None:
    inputs = dict(built["inputs"], claims_csv=tmp_path / "nowhere" / "claims.csv")
    with pytest.raises(DataError, match="nowhere"):
        build_report(**inputs, out_pdf=tmp_path / "r.pdf", workdir=tmp_path / "w")


def test_a_paper_without_runs_in_its_experiment_is_reported(
    built: dict[str, Any], tmp_path: Path
) -> None:
    """The experiment exists but the runs table has none of its runs: said, not drawn."""
    papers_dir = tmp_path / "papers"
    shutil.copytree(built["inputs"]["papers_dir"], papers_dir)
    exp = yaml.safe_load(yaml.safe_dump(built["inputs"]["experiment"]))
    exp["experiments"]["pcp"] = {"paper": "pcp", "methods": ["dense_bsp"], "seeds": [7]}
    claims = read_claims(built["inputs"]["claims_csv"])
    runs = pd.read_csv(built["inputs"]["runs_csv"])
    papers = {"pcp": load_papers(papers_dir)["pcp"]}
    sections = paper_sections(
        papers=papers, claims=claims[claims["paper"] == "pcp"], runs=runs, frames={},
        experiment=exp, sparsity={}, partitions={}, papers_dir=papers_dir, workdir=tmp_path,
    )  # fmt: skip
    pcp = next(s for s in sections if s["id"] == "pcp")
    assert pcp["figures"] == []
    assert any("holds no run of experiment pcp" in t for t in pcp["experiments"])


def test_paper_tables_and_sweeps_are_printed(built: dict[str, Any]) -> None:
    """The paper's reported table beside ours, and the sweep's trade-off, in the paper section."""
    text = _flat(built["text"])
    section = text[
        text.index("Experiment dc2 of tier smoke") : text.index("The smoke tier defines no")
    ]
    assert "Traffic and accuracy against the compression ratio. Paper: Table 7" in section
    assert "Trade-off of experiment dc2_sweep's sweep" in section
    for datum in ("131.7 MB", "epochs: 29", "not run", "ratio = 1.0, Snappy only", "censored 1/2"):
        assert datum in section, datum
    work = built["root"] / "work1"
    reported = pd.read_csv(work / "table_dc2_ratio_sweep.csv", keep_default_na=False)
    assert list(reported["Source"].str.split(" ").str[0]) == ["paper", "ours"] * 5
    assert reported["Bytes"].iloc[-1] == "not run"
    sweep = pd.read_csv(work / "table_dc2_sweep_sweep.csv", keep_default_na=False)
    assert list(sweep["Recipe"]) == ["dc2_topk__r0p5", "dc2_topk__r0p2", "dense_bsp", "snappy_bsp"]
    # The time split shows the codec's share.
    assert "shares of compute, codec (encoding and decoding" in text


def test_the_report_sets_each_regime_beside_the_papers_and_draws_the_maps(
    built: dict[str, Any],
) -> None:
    text = " ".join(built["text"].split())
    assert "Regimes: the paper's" in text and "compute: paper" in text
    assert "Regime maps: where each claim holds" in text
    assert "reaches the reported effect at dense comm / compute 20" in text
    assert "exceeds it at dense comm / compute 200" in text
    work = built["root"] / "work1"
    assert (work / "fig_regime_map_link.svg").is_file()
    claims = read_claims(built["inputs"]["claims_csv"])
    measured = claims[claims["verdict"] != "NOT RUN"]
    assert (measured["regime_status"] != "").all()
    regimes = pd.read_csv(io.StringIO(_attached(built)["data_regimes.csv"]))
    assert set(regimes["claim"]) == set(measured["claim"])
    assert "unknown" in set(regimes["paper_status"])


def test_a_missing_regime_map_file_is_named(tmp_path: Path, built: dict[str, Any]) -> None:
    inputs = {**built["inputs"], "regime_map": tmp_path / "nowhere.parquet"}
    with pytest.raises(DataError, match="nowhere.parquet"):
        build_report(**inputs, out_pdf=tmp_path / "r.pdf", workdir=tmp_path / "w")


def test_setup_sentences_follow_the_config_and_the_runs() -> None:
    """The experiment text reads workers, shards, scenarios and seeds from what ran."""
    from psml_core.report.sections import _experiment_text

    def text(workers: int, seeds: list[int], scenarios: list[str]) -> str:
        exp = {"tier": "t", "workers": workers, "shards": workers, "seeds": seeds,
               "recipes": {"m": {"role": "method"}}, "workloads": {"w": {}},
               "scenarios": {s: {} for s in scenarios}}  # fmt: skip
        ex = {"methods": ["m"], "workloads": ["w"], "scenarios": scenarios}
        runs = pd.DataFrame(
            [{"workers": workers, "shards": workers, "run_id": f"w/m/{s}/seed{k}"}
             for s in scenarios for k in seeds]
        )  # fmt: skip
        return _experiment_text("e", exp, ex, runs)

    a, b = text(4, [0], ["dc_10g"]), text(16, [0, 1, 2], ["dc_10g", "slow_100m"])
    assert "4 workers and 4 shards" in a and "seeds 0:" in a and "slow_100m" not in a
    assert "16 workers and 16 shards" in b and "seeds 0, 1, 2" in b and "slow_100m" in b


def test_paper_setups_state_no_tier_facts(repo: Path) -> None:
    """Workers, seeds and links differ per tier: the paper files leave them to the runs."""
    for path in sorted((repo / "config" / "papers").glob("*.yaml")):
        setup = " ".join(str(yaml.safe_load(path.read_text())["setup"]).split())
        for fact in (r"\d+ (simulated )?workers", r"\d+ seeds", r"\d+ [GM]bit/s"):
            assert not re.search(fact, setup), (path.name, fact)


def test_the_scenarios_table_gives_each_scenarios_rate_window() -> None:
    """The sim network's approximation is in the report: its window, or exact where it is 0."""
    from psml_core.report.tables_setup import scenarios_table

    table = scenarios_table(
        {"scenarios": {
            "dc": {"bandwidth_gbps": 10, "latency_us": 50, "rate_window": 0.02},
            "exact": {"bandwidth_gbps": 10, "latency_us": 50, "rate_window": 0},
            "old": {"bandwidth_gbps": 10, "latency_us": 50},
        }}
    )  # fmt: skip
    col = table.header.index("Rate window")
    assert {row[0]: row[col] for row in table.rows} == {
        "dc": fmt_seconds(1e-6),
        "exact": "exact",
        "old": "–",
    }


def test_the_scenarios_table_gives_each_scenarios_wire_efficiency() -> None:
    from psml_core.report.tables_setup import scenarios_table

    table = scenarios_table(
        {"scenarios": {
            "tcp": {"bandwidth_gbps": 0.1, "wire_efficiency": 1448 / 1500},
            "raw": {"bandwidth_gbps": 0.1, "wire_efficiency": 1},
            "old": {"bandwidth_gbps": 0.1},
        }}
    )  # fmt: skip
    col = table.header.index("Wire eff.")
    assert {row[0]: row[col] for row in table.rows} == {"tcp": "96.5%", "raw": "100.0%", "old": "–"}
