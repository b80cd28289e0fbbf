"""``psml compare --claims``: the oracle bounds it reads, and the defects it warns about.

The claims the report prints are measured by ``psml compare``; it reads the placement files
(``--partition``, the workflow's listing) for the oracle bounds a minimum effect may be stated
against, and prints one warning line per claim decided by a defect of ours.
"""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path

import pytest
from report_inputs import PAPERS, experiment, make_inputs, write_papers

import psml_core.analysis.claims as claims_module
from psml_core.cli import main

BOUND = {"bound": 0.14, "random_remote_bytes": 100.0, "oracle_remote_bytes": 86.0}


def test_compare_reads_oracle_bounds_and_warns_about_defects_of_ours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "results"
    make_inputs(root)
    papers = copy.deepcopy(PAPERS)
    papers["dc2"]["claims"][0]["explanation"] = {
        "not_reproduced": "ours: our toy link is far too fast. More words."
    }
    papers_dir = write_papers(tmp_path / "papers", papers)
    part = tmp_path / "placement.json"
    part.write_text(json.dumps({"placement": "parsa", "oracle": BOUND}))
    config = tmp_path / "config.json"
    config.write_text(json.dumps(experiment()))
    seen: dict[str, object] = {}
    real = claims_module.evaluate_claims

    def spy(*args: object, **kw: object) -> object:
        seen["oracles"] = kw.get("oracles")
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(claims_module, "evaluate_claims", spy)
    summaries = sorted(str(p) for p in (root / "runs").rglob("summary.json"))
    code = main(["compare", "--summaries", *summaries, "--out", str(tmp_path / "runs.csv"),
                 "--aggregate", str(tmp_path / "aggregate.csv"), "--papers", str(papers_dir),
                 "--experiment", str(config), "--claims", str(tmp_path / "claims.csv"),
                 "--partition", f"digits_mlp/dc2_topk={part}"])  # fmt: skip
    assert code == 0
    assert seen["oracles"] == {("digits_mlp", "dc2_topk"): BOUND}
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    # What it did, in a few lines (the workflow's compare.log): runs, rows, verdicts, files.
    said = captured.out.splitlines()
    with open(tmp_path / "claims.csv", newline="", encoding="utf-8") as fh:
        n_claims = sum(1 for _ in csv.DictReader(fh))
    assert said[0] == (
        f"psml compare: {len(summaries)} runs from {len(summaries)} summaries -> "
        f"{tmp_path / 'runs.csv'}"
    )
    assert said[2].startswith(f"psml compare: {n_claims} claims judged: ") and n_claims > 0
    assert said[2].endswith(f"-> {tmp_path / 'claims.csv'}") and len(said) == 3
    warned = [ln for ln in err if ln.startswith("psml compare: warning: claim dc2/dc2_vs_none")]
    assert len(warned) == 1 and "our toy link is far too fast" in warned[0]
    assert not any("dc2_bytes" in ln for ln in err)  # its cause is the seeds, no defect
