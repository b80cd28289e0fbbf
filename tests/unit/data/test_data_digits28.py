"""digits28: scikit-learn's digits at MNIST's input size, labelled as digits, not MNIST."""

from __future__ import annotations

import numpy as np
import pytest

from psml_core.config import DatasetSpec
from psml_core.data import DATASETS, Digits28Source
from psml_core.data.digits28 import resample


@pytest.fixture(scope="module")
def ds():
    return DATASETS.get("digits28")(DatasetSpec(name="d28", source="digits28")).load()


def test_registered_shapes_and_honest_label(ds) -> None:
    assert DATASETS.get("digits28") is Digits28Source
    assert ds.n_features == 784 and ds.n_classes == 10
    assert ds.X_train.shape[0] + ds.X_test.shape[0] == 1797
    assert ds.X_train.dtype == np.float32 and ds.X_train.min() >= 0.0 and ds.X_train.max() <= 1.0
    assert "NOT MNIST" in ds.meta["origin"] and "digits" in ds.meta["origin"]


def test_same_split_as_the_digits_source(ds) -> None:
    small = DATASETS.get("digits")(DatasetSpec(name="d", source="digits")).load()
    np.testing.assert_array_equal(ds.y_train, small.y_train)
    np.testing.assert_array_equal(ds.y_test, small.y_test)
    # The 28x28 image is the 8x8 one resampled: same ink up to the zoom's area factor.
    area = (20 / 8) ** 2
    np.testing.assert_allclose(ds.X_train.sum(1), small.X_train.sum(1) * area, rtol=1e-4)


def test_mnist_layout_digit_in_a_20x20_box_with_a_zero_border(ds) -> None:
    imgs = ds.X_train.reshape(-1, 28, 28)
    border = np.ones((28, 28), bool)
    border[4:24, 4:24] = False
    assert not imgs[:, border].any()
    assert imgs[:, 4:24, 4:24].max(axis=(1, 2)).min() > 0.5  # every digit has ink


def test_resample_of_a_constant_image_is_constant_inside_the_box() -> None:
    out = resample(np.full((1, 8, 8), 0.5)).reshape(28, 28)
    np.testing.assert_allclose(out[4:24, 4:24], 0.5, atol=1e-6)
    assert out.sum() == pytest.approx(0.5 * 400, rel=1e-6)
