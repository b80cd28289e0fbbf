"""CIFAR-shaped synthetic images: shape, determinism, learnability, ResNet-18 on them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from psml_core.config import DatasetSpec
from psml_core.data import DATASETS, SyntheticImagesSource, prepare_dataset
from psml_core.errors import ConfigError
from psml_core.recipes import load_experiment

REPO = Path(__file__).resolve().parents[3]


def _load(rows: int = 200, seed: int = 0, **kw):
    spec = DatasetSpec(name="img", source="synthetic_images", rows=rows, seed=seed, **kw)
    return DATASETS.get("synthetic_images")(spec).load()


def test_registered_shape_range_and_balance() -> None:
    assert DATASETS.get("synthetic_images") is SyntheticImagesSource
    ds = _load(rows=500, test_fraction=0.2)
    assert ds.X_train.shape == (400, 3072) and ds.X_test.shape == (100, 3072)
    assert ds.X_train.dtype == np.float32 and not ds.sparse and ds.n_classes == 10
    assert ds.X_train.min() >= 0.0 and ds.X_train.max() <= 1.0
    counts = np.bincount(np.concatenate([ds.y_train, ds.y_test]), minlength=10)
    assert counts.tolist() == [50] * 10


def test_deterministic_in_the_seed() -> None:
    a, b, c = _load(seed=3), _load(seed=3), _load(seed=4)
    np.testing.assert_array_equal(a.X_train, b.X_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert not np.array_equal(a.X_train, c.X_train)


def test_classes_are_learnable_and_not_trivial() -> None:
    """A linear model beats chance (10%) clearly; the shifts keep it far from 100%."""
    ds = _load(rows=3000, test_fraction=0.3)
    clf = LogisticRegression(max_iter=300).fit(ds.X_train, ds.y_train)
    acc = clf.score(ds.X_test, ds.y_test)
    assert 0.2 < acc < 0.6, acc


@pytest.mark.parametrize("rows", [None, 19])
def test_too_few_rows_name_the_key(rows) -> None:
    with pytest.raises(ConfigError, match=r"datasets.img.rows: source synthetic_images needs"):
        _load(rows=rows)


def test_schema_requires_rows() -> None:
    cfg = {"tier": "smoke", "datasets": {"digits": {"source": "synthetic_images"}}}
    with pytest.raises(ConfigError, match=r"datasets.digits.*rows"):
        load_experiment(cfg, REPO / "config")


def test_paper_tier_resnet18_runs_on_synthetic_images(tmp_path: Path) -> None:
    """The paper tier's DFS workload end to end (sim backend), CIFAR-10 swapped for these."""
    from psml_core.engine.training import train

    cfg = {
        "tier": "paper",
        "workers": 2,
        "shards": 2,
        "datasets": {"cifar10": {"source": "synthetic_images", "rows": 40}},
        "workloads": {"resnet18_cifar10": {"iterations": 2, "batch_size": 4, "eval_every": 2}},
    }
    exp = load_experiment(cfg, REPO / "config")
    spec = exp.run("resnet18_cifar10", "dfs", "dc_10g", 0)
    prepare_dataset(spec.dataset, tmp_path / "data")
    summary = train(spec, tmp_path / "data", tmp_path / "run")
    assert (tmp_path / "run" / "metrics.parquet").exists()
    on_disk = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert on_disk["run_id"] == summary["run_id"] == "resnet18_cifar10/dfs/dc_10g/seed0"
    assert summary["bytes_up"] > 0 and summary["bytes_down"] > 0
    assert 0.0 <= summary["final_test_accuracy"] <= 1.0
    assert on_disk["provenance"]["run_spec"]["dataset"]["source"] == "synthetic_images"
