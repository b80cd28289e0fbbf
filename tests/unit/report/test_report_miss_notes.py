"""The misses list: a method's cause is not printed twice beside its explanation."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import yaml

from psml_core.analysis.claim_result import ClaimResult
from psml_core.report.claim_notes import REFERENCES, miss_notes, section_holds
from psml_core.report.reported_vs_ours import read_claims

WHY = "Our law compresses only while the delay is high. In free periods it sends dense bytes."


def _claims(tmp_path, **kw) -> pd.DataFrame:
    detail = "a seed falls below the partial floor"
    kw.setdefault("explanation", WHY)
    res = ClaimResult(paper="dc2", claim="c", statement="s", source="abs", kind="speedup",
                      reported=41.0, unit="x", up_to=True, verdict="NOT REPRODUCED",
                      detail=detail, **kw)  # fmt: skip
    path = tmp_path / "claims.csv"
    pd.DataFrame([res.row()]).to_csv(path, index=False)
    return read_claims(path)


def test_a_method_cause_taken_from_the_explanation_is_not_repeated(tmp_path) -> None:
    cause = "method: Our law compresses only while the delay is high"
    text = miss_notes(_claims(tmp_path, cause=cause), "papers/dc2.yaml")[0]["text"]
    assert text.count("Our law compresses only while the delay is high") == 1
    assert "Cause: a property of the method as the paper describes it, as follows." in text
    assert WHY in text


def test_any_other_cause_is_printed_as_it_is(tmp_path) -> None:
    cause = "regime: gradient bytes 6.9e+04 B against the paper's 4.5e+07 B"
    text = miss_notes(_claims(tmp_path, cause=cause), "papers/dc2.yaml")[0]["text"]
    assert f"Cause: {cause}." in text and WHY in text


def test_a_kind_named_by_the_paper_file_is_printed_in_words_once(tmp_path) -> None:
    why = "regime: on these data no placement can cut 14x. The oracle bound is in the table."
    detail = "the interval reaches below the partial floor"
    res = ClaimResult(paper="jpdc", claim="c", statement="s", source="abs", kind="speedup",
                      reported=14.0, unit="x", up_to=True, verdict="NOT REPRODUCED",
                      detail=detail, explanation=why,
                      cause="regime: on these data no placement can cut 14x")  # fmt: skip
    path = tmp_path / "claims.csv"
    pd.DataFrame([res.row()]).to_csv(path, index=False)
    text = miss_notes(read_claims(path), "papers/jpdc.yaml")[0]["text"]
    assert text.count("no placement can cut 14x") == 1 and "regime: on" not in text
    words = "our measured regime against the paper's (the data or setup), not the method"
    assert f"Cause: {words}, as follows." in text


def test_a_cause_of_ours_is_marked_as_a_defect(tmp_path) -> None:
    """A setting of ours that decided a verdict reads as ours to fix, never as the method's."""
    why = "ours: our evaluation grid is too coarse. A finer one would decide it."
    cause = "ours: our evaluation grid is too coarse"
    text = miss_notes(_claims(tmp_path, cause=cause, cause_class="ours", explanation=why),
                      "papers/dc2.yaml")[0]["text"]  # fmt: skip
    assert "Cause: a setting or rule of ours, a defect of ours, to fix, as follows." in text
    assert text.count("evaluation grid is too coarse") == 1
    bare = "ours: no explanation of this verdict is recorded (explanation.not_reproduced)"
    text = miss_notes(_claims(tmp_path, cause=bare, cause_class="ours", explanation=""),
                      "papers/dc2.yaml")[0]["text"]  # fmt: skip
    assert f"Cause (a defect of ours, to fix): {bare}." in text


def test_a_pointer_at_a_table_the_report_lacks_is_left_out(tmp_path) -> None:
    """The smoke report explained a claim with the small tier's placement table and map."""
    why = ("regime: the data's locality sets the ceiling (its bound is in the placement table). "
           "The locality map shows the saving growing with lambda; the paper's 14x needs "
           "stronger locality.")  # fmt: skip
    cause = "regime: the data's locality sets the ceiling (its bound is in the placement table)"
    claims = _claims(tmp_path, cause=cause, explanation=why)
    bare = miss_notes(claims, "papers/jpdc.yaml", held=set())[0]["text"]
    assert "placement table" not in bare and "locality map" not in bare
    assert "the data's locality sets the ceiling" in bare
    assert "The paper's 14x needs stronger locality." in bare
    full = miss_notes(claims, "papers/jpdc.yaml", held={"_oracle", "map:", "map:locality"})
    assert "(its bound is in the placement table)" in full[0]["text"]
    assert "The locality map shows" in full[0]["text"]


def test_what_a_section_holds_is_read_off_its_tables_figures_and_maps() -> None:
    section = {"tables": [{"label": "tab-jpdc_oracle"}], "figures": [{"label": "fig-jpdc_traffic"}],
               "reported": []}  # fmt: skip
    held = section_holds(section, set())
    assert {"_oracle", "_traffic"} <= held and "reported" not in held and "map:" not in held
    assert {"map:", "map:locality"} <= section_holds({}, {"locality"})


def test_every_pointer_of_the_paper_files_explanations_is_registered() -> None:
    """A new "see the X table" in a paper file must say which table it needs (REFERENCES)."""
    always = {"scenario table", "regime rows", "regime column", "bytes figure"}
    for path in sorted((Path(__file__).resolve().parents[3] / "config/papers").glob("*.yaml")):
        for c in yaml.safe_load(path.read_text())["claims"]:
            for text in (c.get("explanation") or {}).values():
                flat = " ".join(str(text).split()).lower()
                for m in re.finditer(r"the ([\w-]+ (?:table|map|figure|sweep|column|rows))", flat):
                    name = m.group(1)
                    known = any(p.lower() in name or name in p.lower() for p in REFERENCES)
                    assert known or name in always, f"{path.name}/{c['id']}: '{name}'"


def test_a_claim_not_run_says_so_once(tmp_path) -> None:
    res = ClaimResult(
        paper="jpdc",
        claim="c",
        statement="s",
        source="abs",
        kind="speedup",
        reported=14.0,
        unit="x",
        up_to=True,
        verdict="NOT RUN",
        detail="not run in this tier: it has no experiment 'x' (run the small tier)",
    )
    path = tmp_path / "claims.csv"
    pd.DataFrame([res.row()]).to_csv(path, index=False)
    text = miss_notes(read_claims(path), "papers/jpdc.yaml")[0]["text"]
    assert text.lower().count("not run") == 1
    assert text == "NOT RUN in this tier: it has no experiment 'x' (run the small tier)."
