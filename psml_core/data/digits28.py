"""scikit-learn's ``digits`` at MNIST's input size: 28x28, laid out as MNIST lays out a digit.

These are the 1,797 real 8x8 handwritten digits of ``sklearn.datasets.load_digits`` (the UCI
optical digits), **not MNIST**: resampled so that models built for MNIST's 784 inputs (PF's
784-128-64-10 MLP, a small CNN) run on them without a download. Their accuracy says how a model
does on these digits, never how it does on MNIST.

Resampling, following MNIST's own layout (LeCun et al. 1998: each digit size-normalised into a
20x20 box and centred in a 28x28 field): each 8x8 image (values 0-16) is scaled to [0, 1],
zoomed by 2.5 to 20x20 with bilinear interpolation over the pixels' areas
(``scipy.ndimage.zoom``, ``order=1``, ``grid_mode=True``), clipped to [0, 1] and padded with
4 zero pixels on every side. Rows are the 784 pixels row by row (one channel). The split is
the ``digits`` source's: stratified by class with the data set's seed.
"""

from __future__ import annotations

import numpy as np

from psml_core.data.base import DATASETS, Dataset, DatasetSource
from psml_core.data.digits import load_split

__all__ = ["BOX", "SIDE", "Digits28Source", "resample"]

SIDE = 28
"""Side of the output images (MNIST's)."""
BOX = 20
"""Side of the box the digit is scaled into (MNIST's size normalisation)."""


def resample(images: np.ndarray) -> np.ndarray:
    """8x8 images in [0, 1], shape (N, 8, 8) -> (N, 784) float32 rows of 28x28 images.

    Bilinear zoom to 20x20 over pixel areas, clipped to [0, 1], centred with a 4-pixel border.
    """
    from scipy.ndimage import zoom  # scipy is a dependency; imported where used

    n, h, w = images.shape
    big = zoom(
        images.astype(np.float64),
        (1.0, BOX / h, BOX / w),
        order=1,
        mode="nearest",
        grid_mode=True,
    )
    pad = (SIDE - BOX) // 2
    out = np.zeros((n, SIDE, SIDE), dtype=np.float32)
    out[:, pad : pad + BOX, pad : pad + BOX] = np.clip(big, 0.0, 1.0)
    return out.reshape(n, SIDE * SIDE)


@DATASETS.register("digits28")
class Digits28Source(DatasetSource):
    """The digits set resampled to 28x28 (784 features in [0, 1]), 10 classes, stratified split.

    Labelled in every output as digits at MNIST's input size, not MNIST.
    """

    def load(self) -> Dataset:
        """Load the 8x8 images, resample them and split them, stratified by class."""
        return load_split(
            self.spec,
            lambda bunch: resample(np.asarray(bunch.images, dtype=np.float64) / 16.0),
            {
                "source": self.name,
                "origin": (
                    "sklearn.datasets.load_digits (UCI optical digits, 8x8, values 0-16), "
                    "resampled to 28x28: digits at MNIST's input size, NOT MNIST"
                ),
                "resampling": (
                    "pixel / 16; bilinear zoom 8x8 -> 20x20 over pixel areas "
                    "(scipy.ndimage.zoom order=1, grid_mode=True), clipped to [0, 1], "
                    "centred in 28x28 with a 4-pixel zero border (MNIST's layout)"
                ),
            },
        )
