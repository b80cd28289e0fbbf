"""The report's plotting style and deterministic SVG output.

Every figure is drawn inside :func:`report_style`, which applies the seaborn theme and the
settings that make SVG output byte-stable, then restores the caller's matplotlib settings.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: CI runners and cluster nodes have no display

import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from psml_core.atomic import atomic_path  # noqa: E402

__all__ = [
    "HALF_WIDTH_IN",
    "PALETTE",
    "TEXT_WIDTH_IN",
    "palette",
    "recording_figures",
    "report_style",
    "save_svg",
]

# Width of the A4 text block (2 cm margins), so figures are placed at 100 % without rescaling.
TEXT_WIDTH_IN = 6.5
# A figure for one column of two, side by side (the template leaves a gutter between them).
HALF_WIDTH_IN = 3.15
PALETTE = "colorblind"
# Fixed salt: matplotlib derives SVG element ids from it instead of from a random value.
_SVG_RC = {
    "svg.hashsalt": "psml-report",
    # Text as <text>, searchable in the HTML report and the PDF; the PDF stays font-stable,
    # Typst drawing it in matplotlib's DejaVu Sans (report.build passes that font only).
    "svg.fonttype": "none",
    "figure.dpi": 100,
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.03,
    "axes.titlesize": 9,
    "axes.labelsize": 8.5,
    "xtick.labelsize": 7.5,
    "ytick.labelsize": 7.5,
    "legend.fontsize": 7.5,
    "legend.title_fontsize": 8,
}


@contextlib.contextmanager
def report_style() -> Iterator[None]:
    """Apply the report theme for the duration of the block; restore rcParams afterwards."""
    with matplotlib.rc_context():
        sns.set_theme(context="paper", style="whitegrid", palette=PALETTE)
        matplotlib.rcParams.update(_SVG_RC)
        yield


def palette(n: int) -> list[tuple[float, float, float]]:
    """``n`` distinguishable colours: the colour-blind palette, then evenly spaced hues."""
    return list(sns.color_palette(PALETTE if n <= 10 else "husl", n))


_RECORDED: ContextVar[list[tuple[Figure, Path]] | None] = ContextVar(
    "psml_recorded_figures", default=None
)


@contextlib.contextmanager
def recording_figures() -> Iterator[list[tuple[Figure, Path]]]:
    """Keep every figure :func:`save_svg` writes inside the block, with its path.

    The figures stay drawable after they are closed, so a check can measure what was drawn
    (axis scales, tick positions, text extents) rather than what a caption says.
    """
    kept: list[tuple[Figure, Path]] = []
    token = _RECORDED.set(kept)
    try:
        yield kept
    finally:
        _RECORDED.reset(token)


def fit_texts(fig: Figure) -> None:
    """Keep each panel's texts inside the figure's width.

    A text past the right edge widens the saved (tight) figure, and the page then scales the
    whole figure, fonts included, down to its column. A value label after a bar is brought in
    by widening the x range on the axis's own scale (log or linear), by the factor that brings
    the furthest label in, plus 2 %; an x-axis label wider than a narrow panel (beside long bar
    names) is set flush with the panel's right edge instead of centred.
    """
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    for ax in fig.axes:
        texts = [t for t in ax.texts if t.get_visible() and t.get_text().strip()]
        box = ax.get_window_extent(renderer)
        need = 1.0
        for t in texts:
            end = t.get_window_extent(renderer).x1 - box.x0
            start = t.get_window_extent(renderer).x0 - box.x0
            if end > box.width and 0 < start < box.width:
                # The start moves left by the factor the range grows; the width stays.
                need = max(need, start / max(box.width - (end - start), 1.0))
        if need > 1.0:
            scale = ax.xaxis.get_transform()
            lo, hi = scale.transform(ax.get_xlim())
            right = scale.inverted().transform([lo + (hi - lo) * need * 1.02])[0]
            ax.set_xlim(ax.get_xlim()[0], right)
        label = ax.xaxis.label
        if label.get_text() and label.get_window_extent(renderer).x1 > fig.bbox.x1:
            ax.set_xlabel(label.get_text(), loc="right")


def save_svg(fig: Figure, path: str | Path) -> None:
    """Save ``fig`` as deterministic SVG (no date), atomically, and close it.

    Texts that would end past their panel's right edge are brought in first (:func:`fit_texts`).
    """
    try:
        fit_texts(fig)
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="svg", metadata={"Date": None})
        kept = _RECORDED.get()
        if kept is not None:
            kept.append((fig, Path(path)))
    finally:
        plt.close(fig)
