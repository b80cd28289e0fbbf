"""End to end: the smoke tier through the Snakemake Python API, twice, in temporary directories."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
from pypdf import PdfReader
from snakemake.api import SnakemakeApi
from snakemake.settings.types import (
    ConfigSettings,
    DAGSettings,
    OutputSettings,
    ResourceSettings,
)
from wf_helpers import copy_workflow, snakemake_cli

from psml_core.recipes import load_experiment
from psml_core.report.html import PDF_CATEGORY, file_captions

pytestmark = pytest.mark.slow


def run_workflow(workdir: Path) -> None:
    """Run the default target of the workflow in ``workdir`` through the API."""
    old_path = os.environ["PATH"]
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{old_path}"  # rules call psml
    try:
        with SnakemakeApi(OutputSettings(quiet=None, show_failed_logs=True)) as api:
            wf = api.workflow(
                resource_settings=ResourceSettings(cores=2),
                config_settings=ConfigSettings(configfiles=[workdir / "config" / "config.yaml"]),
                snakefile=workdir / "workflow" / "Snakefile",
                workdir=workdir,
            )
            wf.dag(DAGSettings()).execute_workflow(executor="local")
    finally:
        os.environ["PATH"] = old_path


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    dirs = []
    for name in ("first", "second"):
        d = copy_workflow(tmp_path_factory.mktemp(name) / "wf")
        run_workflow(d)
        dirs.append(d)
    return dirs


README = Path(__file__).resolve().parents[2] / "README.md"


def _readme(pattern: str) -> int:
    """The one number the README states where ``pattern`` (with one group) matches."""
    (stated,) = re.findall(pattern, README.read_text(encoding="utf-8"), re.M)
    return int(stated)


def test_report_is_produced_and_readable(two_runs):
    pdf = two_runs[0] / "reports" / "smoke" / "report.pdf"
    assert pdf.is_file()
    reader = PdfReader(pdf)
    text = "\n".join(page.extract_text() for page in reader.pages)
    # The README's tier table states the smoke report's pages, in that one place.
    assert len(reader.pages) == _readme(r"^\| `smoke`.*? (\d+) pages"), "README.md: smoke pages"
    data = json.loads(
        (two_runs[0] / "results" / "smoke" / "report" / "report_data.json").read_text()
    )
    assert len(data["attachments"]) == _readme(r"(\d+) on the smoke tier"), "README.md"
    for needle in (
        "Setup",
        "Methods",
        "Results",
        "simulated time",
        "dense_bsp",
        "topk_ef",
        "digits_mlp",
        "rcv1_logreg",
        "dc_10g",
        "slow_100m",
    ):
        assert needle in text, needle
    for forbidden in ("TODO", "TBD", "nan", "NaN", "None", "null"):
        assert not re.search(rf"\b{forbidden}\b", text), forbidden
    summary = json.loads(next((two_runs[0] / "results").rglob("summary.json")).read_text())
    assert summary["provenance"]["git_commit"][:7] in text


def test_metrics_are_byte_identical_across_runs(two_runs):
    first = sorted((two_runs[0] / "results").rglob("metrics.parquet"))
    smoke = load_experiment({"tier": "smoke"}, two_runs[0] / "config")
    # Tuning and calibration runs (when the record lacks a key) are checked too, not counted.
    runs = [p for p in first if not {"tune", "calibrate"} & set(p.relative_to(two_runs[0]).parts)]
    assert len(runs) == len(smoke.runs())
    for path in first:
        twin = two_runs[1] / path.relative_to(two_runs[0])
        assert path.read_bytes() == twin.read_bytes(), path


def test_summaries_agree_but_for_wall_clock(two_runs):
    for path in sorted((two_runs[0] / "results").rglob("summary.json")):
        a = json.loads(path.read_text())
        b = json.loads((two_runs[1] / path.relative_to(two_runs[0])).read_text())
        a["provenance"].pop("wall_clock_s")
        b["provenance"].pop("wall_clock_s")
        assert a == b
        assert a["clock"] == "simulated"


def test_every_rule_logged_and_benchmarked(two_runs):
    logs = two_runs[0] / "logs" / "smoke"
    for rule in ("prepare", "analyze", "partition", "train"):
        assert any((logs / rule).rglob("*.log")), rule
        assert any((logs / "bench" / rule).rglob("*.tsv")), rule
    # psml compare says what it wrote and how the claims were judged.
    assert "claims judged" in (logs / "compare.log").read_text()
    manifest = json.loads(next((two_runs[0] / "data").rglob("manifest.json")).read_text())
    assert all(len(f["sha256"]) == 64 for f in manifest["files"].values())


def test_second_invocation_has_nothing_to_do(two_runs):
    proc = snakemake_cli(["-n"], two_runs[0])
    assert proc.returncode == 0, proc.stderr
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_report_marked_for_snakemake_report(two_runs, tmp_path: Path):
    proc = snakemake_cli(["--report", str(tmp_path / "report.zip")], two_runs[0])
    assert proc.returncode == 0, proc.stderr
    import zipfile

    with zipfile.ZipFile(tmp_path / "report.zip") as z:
        names = z.namelist()
        assert any(name.endswith("report.pdf") for name in names)
        html = z.read(next(n for n in names if n.endswith("report.html"))).decode()
    # Figures (SVG) and tables (rendered HTML) are report() outputs too, one category per
    # part of the PDF that has any, numbered in reading order (Snakemake sorts them by name),
    # titled and captioned with the PDF's own words.
    match = re.search(r"var categories = (\{.*?\});\n", html)
    assert match, "no category table in the HTML report"
    categories = json.loads(match.group(1))
    in_order = sorted(categories)
    assert in_order[:2] == [PDF_CATEGORY, "02 Verdicts and their reasons"]
    assert not any("Head-to-head" in c for c in categories)  # the smoke tier has none
    results = json.loads(re.search(r"var results = (\{.*?\});\n", html, re.S).group(1))
    data = json.loads(
        (two_runs[0] / "results" / "smoke" / "report" / "report_data.json").read_text()
    )
    papers = [p["id"] for p in data["papers"]]
    assert [c.split(" ", 1)[1].split(":")[0] for c in in_order[2:7]] == papers
    pdf_captions = {n: " ".join(c.split()) for n, c in file_captions(data).items()}
    for cat in in_order[1:]:
        assert all(f.endswith(".svg") for f in categories[cat].get("figures", [])), cat
        assert all(f.endswith(".html") for f in categories[cat].get("tables", [])), cat
        for path in categories[cat].get("figures", []) + categories[cat].get("tables", []):
            stem = Path(path).stem
            title = results[path]["labels"]["title"]
            assert title and title != stem, path
            caption = re.sub(r"<[^>]+>", "", results[path]["caption"])
            assert "The PDF gives its caption" not in caption
            source = f"{stem}.svg" if path.endswith(".svg") else f"{stem}.csv"
            first = re.sub(r"\$", "", pdf_captions[source])[:40]
            assert first.replace("&", "&amp;") in " ".join(caption.split()), (path, first)
    (verdicts,) = categories[in_order[1]]["tables"]
    assert results[verdicts]["mime_type"] == "text/html"
    page = (two_runs[0] / verdicts).read_text(encoding="utf-8")
    assert "<th>Why</th>" in page and 'class="v"' in page  # why each verdict fell, in colour
    svgs = sorted((two_runs[0] / "reports" / "smoke" / "figures").rglob("*.svg"))
    assert svgs and all(p.with_suffix(".png").is_file() for p in svgs)
    pngs = [p.with_suffix(".png") for p in svgs]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
