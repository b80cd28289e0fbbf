"""CIFAR-shaped synthetic images: the ResNet-18 workload's shape and cost without CIFAR-10.

``source: synthetic_images`` draws ``rows`` colour images of 3 x 32 x 32 pixels in [0, 1],
stored channels first (3,072 features per row, CIFAR-10's layout, which the ``resnet18`` model
reshapes to (N, 3, 32, 32)), in 10 classes. It stands in for CIFAR-10 when timing the paper
tier's ResNet-18 runs, and in tests; its accuracies say nothing about CIFAR-10's, and the report
names it as a substitution.

Each class has a template: a seeded 3 x 4 x 4 grid of colours blown up to 32 x 32 (8 x 8 blocks).
An image of class c blends c's template (weight w ~ U(0.5, 0.8)) with the template of a random
class (1 - w), times a contrast in U(0.5, 1), rolled cyclically by up to 16 pixels in each
direction, plus Gaussian pixel noise (sd 0.3), clipped to [0, 1]. The shifts make it a job for a
convolutional network: a linear model gets about 35% of the test images right (chance: 10%).
Classes are balanced (row i has class i mod 10 before the seeded shuffle), the split holds out
``test_fraction``. Deterministic given ``seed``.
"""

from __future__ import annotations

import numpy as np

from psml_core.data.base import DATASETS, Dataset, DatasetSource
from psml_core.data.prepare import holdout_dataset
from psml_core.errors import ConfigError

__all__ = ["CHANNELS", "CLASSES", "SIDE", "SyntheticImagesSource"]

CHANNELS, SIDE, CLASSES = 3, 32, 10
_GRID = 4  # template cells per side
_MAX_SHIFT = 16
_NOISE_SD = 0.3
_WEIGHT = (0.5, 0.8)  # the class template's share; the rest is a random class's template
_CHUNK = 4096  # images drawn at a time (bounds the float64 temporaries)


@DATASETS.register("synthetic_images")
class SyntheticImagesSource(DatasetSource):
    """CIFAR-shaped synthetic images (see the module docstring): ``rows`` images, 10 classes."""

    def load(self) -> Dataset:
        """Draw the images and split them with our design's seed and ``test_fraction``.

        Raises:
            ConfigError: ``rows`` is not set or below 2 x 10.
        """
        spec = self.spec
        where = f"datasets.{spec.name}.rows"
        if spec.rows is None or spec.rows < 2 * CLASSES:
            raise ConfigError(
                f"{where}: source synthetic_images needs rows >= {2 * CLASSES}, got {spec.rows}"
            )
        rng = np.random.default_rng(spec.seed)
        cell = SIDE // _GRID
        grid = rng.random((CLASSES, CHANNELS, _GRID, _GRID))
        templates = grid.repeat(cell, axis=2).repeat(cell, axis=3)  # (10, 3, 32, 32)
        y = np.arange(spec.rows, dtype=np.int64) % CLASSES
        rng.shuffle(y)
        X = np.empty((spec.rows, CHANNELS * SIDE * SIDE), dtype=np.float32)
        for start in range(0, spec.rows, _CHUNK):
            labels = y[start : start + _CHUNK]
            n = labels.size
            other = rng.integers(0, CLASSES, size=n)
            w = rng.uniform(*_WEIGHT, size=(n, 1, 1, 1))
            contrast = rng.uniform(0.5, 1.0, size=(n, 1, 1, 1))
            img = (w * templates[labels] + (1.0 - w) * templates[other]) * contrast
            shifts = rng.integers(-_MAX_SHIFT, _MAX_SHIFT + 1, size=(n, 2))
            for i, (dy, dx) in enumerate(shifts):
                img[i] = np.roll(img[i], (int(dy), int(dx)), axis=(1, 2))
            img += rng.normal(0.0, _NOISE_SD, size=img.shape)
            np.clip(img, 0.0, 1.0, out=img)
            X[start : start + n] = img.reshape(n, -1)
        return holdout_dataset(
            spec,
            X,
            y,
            CLASSES,
            {
                "source": self.name,
                "shape": [CHANNELS, SIDE, SIDE],
                "layout": "channels first, row by row (CIFAR-10's)",
                "generator": (
                    f"class template ({CHANNELS}x{_GRID}x{_GRID} colours, {cell}x{cell} blocks) "
                    f"blended with a random class's (weight U{_WEIGHT}), x contrast U(0.5, 1), "
                    f"rolled by <= {_MAX_SHIFT} px, + N(0, {_NOISE_SD}) noise, clipped to [0, 1]"
                ),
                "rows": spec.rows,
                "seed": spec.seed,
                "test_fraction": spec.test_fraction,
            },
        )
