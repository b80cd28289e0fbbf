"""Shared fixtures: small prepared data sets and the smoke experiment."""

from __future__ import annotations

from pathlib import Path

import pytest

from psml_core.config import Experiment
from psml_core.data.prepare import prepare_dataset
from psml_core.net.fair_share import load_kernel
from psml_core.recipes import load_experiment

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session", autouse=True)
def _fair_share_kernel_loaded() -> None:
    """Numba's one-time load of the max-min kernel (0.4 to 1.2 s), before any test is timed.

    Otherwise the first test that runs more than 24 flows at once pays it, and a Hypothesis
    example with a deadline fails on it.
    """
    load_kernel()


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def smoke() -> Experiment:
    return load_experiment({"tier": "smoke"}, REPO / "config")


@pytest.fixture(scope="session")
def prepared(tmp_path_factory: pytest.TempPathFactory, smoke: Experiment) -> dict[str, Path]:
    """Every smoke data set, prepared once per session: name -> directory."""
    root = tmp_path_factory.mktemp("prepared")
    out = {}
    for name, spec in smoke.datasets.items():
        prepare_dataset(spec, root / name)
        out[name] = root / name
    return out
