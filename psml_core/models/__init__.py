"""Models trained by the engine, each over one flat float32 parameter vector (the PS key space)."""

from psml_core.models.base import MODELS, Model, make_model
from psml_core.models.cnn import SmallCNN
from psml_core.models.logreg import LogisticRegression
from psml_core.models.mlp import MLP
from psml_core.models.resnet import ResNet18
from psml_core.models.sparse_mlp import SparseMLP

__all__ = [
    "MLP",
    "MODELS",
    "LogisticRegression",
    "Model",
    "ResNet18",
    "SmallCNN",
    "SparseMLP",
    "make_model",
]
