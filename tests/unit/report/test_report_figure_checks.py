"""Every figure of a small report, checked as drawn against its caption (figure_checks)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from figure_checks import all_defects
from matplotlib.figure import Figure
from report_inputs import make_inputs

from psml_core.report import build
from psml_core.report.style import recording_figures


def _captions(node: Any, out: dict[str, str]) -> dict[str, str]:
    """File -> caption of every figure in the report's document model."""
    if isinstance(node, dict):
        if str(node.get("file", "")).endswith(".svg") and "caption" in node:
            out[str(node["file"])] = str(node["caption"])
        for v in node.values():
            _captions(v, out)
    elif isinstance(node, list):
        for v in node:
            _captions(v, out)
    return out


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Figure, str, str]]:
    root = tmp_path_factory.mktemp("figures")
    inputs = make_inputs(root / "results")
    with pytest.MonkeyPatch.context() as mp, recording_figures() as kept:
        mp.setattr(build, "compile_pdf", lambda workdir, out: None)  # the figures, not the PDF
        build.build_report(**inputs, out_pdf=root / "report.pdf", workdir=root / "work")
    captions = _captions(json.loads((root / "work" / "report_data.json").read_text()), {})
    return [(fig, path.name, captions[path.name]) for fig, path in kept]


def test_every_figure_is_drawn_as_its_caption_says(drawn) -> None:
    assert len(drawn) >= 5
    assert any(ax.get_xscale() == "log" for fig, _, _ in drawn for ax in fig.axes)
    defects = [f"{name}: {d}" for fig, name, caption in drawn for d in all_defects(fig, caption)]
    assert defects == []
