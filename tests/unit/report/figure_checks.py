"""Checks of a figure as drawn (Agg renderer): scales, log ticks, overlaps, hidden lines.

Each check returns the defects it finds as sentences (empty: none), so that a failing test
names the figure, the panel and what is wrong.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.transforms import Bbox


def _agg(fig: Figure) -> FigureCanvasAgg:
    """The figure's Agg canvas (a figure closed by ``save_svg`` has lost its own)."""
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig.canvas


def _drawn(fig: Figure) -> list[Axes]:
    _agg(fig)
    return [ax for ax in fig.axes if ax.get_visible() and ax.has_data()]


def _name(ax: Axes) -> str:
    return ax.get_title() or ax.get_title(loc="left") or ax.get_xlabel() or "a panel"


def scale_defects(fig: Figure, caption: str) -> list[str]:
    """The caption says "logarithmic" exactly when some drawn axis is logarithmic, and where
    only some panels' axis of one direction is, it names each of them."""
    axes = _drawn(fig)
    logs = [(ax, a) for ax in axes for a in (ax.xaxis, ax.yaxis) if a.get_scale() == "log"]
    says = "logarithmic" in caption.lower()
    if bool(logs) != says:
        drawn = "some" if logs else "no"
        return [f"{drawn} axis is logarithmic, but the caption says {caption!r}"]
    out = []
    for which in ("xaxis", "yaxis"):
        scales = {getattr(ax, which).get_scale() for ax in axes}
        if len(scales) > 1:
            for ax in axes:
                if getattr(ax, which).get_scale() == "log" and _name(ax) not in caption:
                    out.append(f"log {which} of {_name(ax)!r} not named in {caption!r}")
    return out


def _round(value: float, base: float) -> bool:
    if base == 2:
        return math.isclose(2 ** round(math.log2(value)), value, rel_tol=1e-9)
    mantissa = value / 10 ** math.floor(math.log10(value) + 1e-12)
    return any(math.isclose(mantissa, m, rel_tol=1e-6) for m in (1.0, 2.0, 5.0, 10.0))


def _in_view(axis: Axis, locs: np.ndarray) -> np.ndarray:
    lo, hi = sorted(axis.get_view_interval())
    pad = 1e-9 * max(abs(lo), abs(hi), 1e-300)
    return (locs >= lo - pad) & (locs <= hi + pad)


def _shown_ticks(axis: Axis) -> list[tuple[float, str]]:
    """The major ticks drawn (inside the view) with a label: (value, label)."""
    locs = np.asarray(axis.get_majorticklocs(), dtype=float)
    ticks = axis.get_major_ticks(len(locs))
    return [
        (float(v), t.label1.get_text())
        for v, t, keep in zip(locs, ticks, _in_view(axis, locs), strict=True)
        if keep and t.label1.get_visible() and t.label1.get_text()
    ]


def _shown_labels(axis: Axis) -> list[Text]:
    """The tick labels drawn: major and minor ones inside the view."""
    out = []
    for locs, ticks in (
        (axis.get_majorticklocs(), axis.get_major_ticks),
        (axis.get_minorticklocs(), axis.get_minor_ticks),
    ):
        locs = np.asarray(locs, dtype=float)
        for t, keep in zip(ticks(len(locs)), _in_view(axis, locs), strict=True):
            if keep:
                out += [lb for lb in (t.label1, t.label2) if lb.get_visible()]
    return out


def log_tick_defects(fig: Figure) -> list[str]:
    """Every labelled tick of a log axis sits at 1, 2 or 5 x 10^k (a power of two on a base-2
    axis) and its label has no padding zeros ("1 MB", not "1.00 MB")."""
    out = []
    for ax in _drawn(fig):
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() != "log":
                continue
            base = getattr(axis.get_transform(), "base", 10)
            shown = _shown_ticks(axis)
            if not shown:
                out.append(f"{_name(ax)}: a log axis without a labelled tick")
            for value, label in shown:
                if not _round(value, base) or ".00" in label or ".0\xa0" in label:
                    out.append(f"{_name(ax)}: log tick {value:g} labelled {label!r}")
    return out


def _texts(fig: Figure) -> list[Text]:
    found = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        found += [t for a in (ax.xaxis, ax.yaxis) for t in _shown_labels(a)]
        found += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label]
        found += list(ax.texts)
    for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes)]:
        if legend is not None:
            found += list(legend.get_texts())
    return [t for t in found if t.get_visible() and t.get_text().strip()]


def _shrunk(box: Bbox, px: float = 0.5) -> Bbox:
    return Bbox.from_extents(box.x0 + px, box.y0 + px, box.x1 - px, box.y1 - px)


def overlap_defects(fig: Figure) -> list[str]:
    """No two texts (tick labels, titles, axis labels, value labels, legend entries) overlap,
    and no scatter marker (a tick drawn as a marker) lies on a text."""
    renderer = _agg(fig).get_renderer()
    texts = _texts(fig)
    boxes = [(t, _shrunk(t.get_window_extent(renderer))) for t in texts]
    out = []
    for (a, ba), (b, bb) in itertools.combinations(boxes, 2):
        if ba.overlaps(bb):
            out.append(f"text {a.get_text()!r} overlaps {b.get_text()!r}")
    for ax in fig.axes:
        for coll in ax.collections:
            if not isinstance(coll, PathCollection) or not len(coll.get_offsets()):
                continue
            points = coll.get_offset_transform().transform(np.asarray(coll.get_offsets()))
            sizes = coll.get_sizes()
            radius = math.sqrt(float(sizes.max()) if len(sizes) else 36.0) / 2 * fig.dpi / 72
            for t, box in boxes:
                if t.axes is not ax:
                    continue
                grown = box.expanded(1.0, 1.0).padded(radius)
                if any(grown.contains(x, y) for x, y in points if np.isfinite([x, y]).all()):
                    out.append(f"{_name(ax)}: a marker lies on the text {t.get_text()!r}")
    return out


def hidden_line_defects(fig: Figure) -> list[str]:
    """Of two lines with the same points, the one drawn on top carries markers, so that the
    one below still shows (a different dash pattern alone is covered by a solid line)."""
    out = []
    for ax in _drawn(fig):
        lines = [ln for ln in ax.get_lines() if ln.get_visible() and len(ln.get_xdata()) > 1]
        order = {id(ln): (ln.get_zorder(), i) for i, ln in enumerate(lines)}
        for a, b in itertools.combinations(lines, 2):
            xa, ya = np.asarray(a.get_xdata(), float), np.asarray(a.get_ydata(), float)
            xb, yb = np.asarray(b.get_xdata(), float), np.asarray(b.get_ydata(), float)
            if xa.shape != xb.shape or not (np.allclose(xa, xb) and np.allclose(ya, yb)):
                continue
            top = max((a, b), key=lambda ln: order[id(ln)])
            if top.get_marker() in (None, "None", "", " "):
                out.append(f"{_name(ax)}: a line hides another with the same points")
    return out


def width_defects(fig: Figure) -> list[str]:
    """Nothing reaches past the width the figure is drawn for (a legend or a label that does
    widens the saved figure, and the page scales it, fonts included, down to fit)."""
    box = fig.get_tightbbox(_agg(fig).get_renderer())
    over = box.width - fig.get_figwidth()
    return [f"drawn {over:.2f} in wider than its {fig.get_figwidth():g} in"] if over > 0.02 else []


def all_defects(fig: Figure, caption: str) -> list[str]:
    """Every check above, for one figure and its caption."""
    return [
        *width_defects(fig),
        *scale_defects(fig, caption),
        *log_tick_defects(fig),
        *overlap_defects(fig),
        *hidden_line_defects(fig),
    ]
