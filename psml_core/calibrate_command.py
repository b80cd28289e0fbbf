"""``psml calibrate-sweep``: the command fitting a calibrated sweep's factor (arguments, light).

The work is :func:`psml_core.engine.calibrate.fit_factor`, imported when the command runs, so
that ``psml --help`` and the other commands do not load the engine.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from psml_core.atomic import write_json
from psml_core.config import RunSpec, build
from psml_core.config.calibration import CalibrationSpec
from psml_core.config.reading import load_json
from psml_core.errors import ConfigError

__all__ = ["calibrate_args", "cmd_calibrate"]


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Fit one calibration's factor; write its result file (and keep every trial's run)."""
    try:
        raw = load_json(args.spec, "--spec")
        cal = build(CalibrationSpec, raw["calibration"], "calibration")
        method = RunSpec.from_json(json.dumps(raw["method"]))
        baseline = RunSpec.from_json(json.dumps(raw["baseline"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"--spec {args.spec}: not a calibration spec ({exc})") from None
    out = Path(args.out)
    from psml_core.engine.calibrate import fit_factor

    result = fit_factor(cal, method, baseline, args.data, out.with_name(out.stem + ".runs"))
    write_json(out, result)
    print(
        f"{cal.key}: factor {result['factor']:.4g} ({cal.point:g} -> "
        f"{cal.point * result['factor']:.4g}), reduction {result['reached_reduction']:.2f}% "
        f"against {cal.reduction:g}% reported, {len(result['trials'])} trials on seed {cal.seed}"
    )
    return 0


def calibrate_args(p: argparse.ArgumentParser) -> None:
    """The arguments of ``psml calibrate-sweep``."""
    p.add_argument(
        "--spec", required=True, help="the calibration and its two runs (the workflow writes it)"
    )
    p.add_argument("--data", required=True, help="prepared data directory of its workload")
    p.add_argument("--out", required=True, help="result JSON (trial runs go to <out>.runs/)")
