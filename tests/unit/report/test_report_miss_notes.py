"""The misses list: a method's cause is not printed twice beside its explanation."""

from __future__ import annotations

import pandas as pd

from psml_core.analysis.claim_result import ClaimResult
from psml_core.report.claim_notes import miss_notes
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
