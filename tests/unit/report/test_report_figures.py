from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from psml_core.report import figures


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
