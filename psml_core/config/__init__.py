"""Load and validate configuration; typed settings for experiments and single runs.

The JSON schemas in ``workflow/schemas/`` are the single source of truth: Snakemake's
``validate()`` (in ``workflow/rules/common.smk``) and this module read the same files. This module
adds what a schema cannot say (a method name must be a key of ``config/methods.yaml``, a workload
must name a defined dataset) and turns every violation into one :class:`ConfigError` that names
the key and the allowed values.

The package is a leaf: it imports nothing of psml_core but its errors. :mod:`.schema` reads and
validates, :mod:`.specs` holds the typed settings, :mod:`.load` builds an experiment.
"""

from psml_core.config.experiment import Experiment, ExperimentSpec
from psml_core.config.load import (
    IMAGE_MODELS,
    SPARSE_SOURCES,
    build_experiment,
    effective_config,
    parse_method_files,
    parse_methods,
)
from psml_core.config.points import MOMENTUM_HANDLINGS, OperatingPoint, TuningSpec
from psml_core.config.schema import (
    config_root,
    deployment_config_dir,
    format_error,
    load_yaml,
    schema_dir,
    validate,
)
from psml_core.config.specs import (
    BandwidthStep,
    BlockSpec,
    ComputeSpec,
    DatasetSpec,
    HashingSpec,
    HeterogeneitySpec,
    MethodRecipe,
    NicOverride,
    RunSpec,
    ScenarioSpec,
    WorkloadSpec,
    build,
    check_part,
    read_run_spec,
)
from psml_core.config.sweeps import sweep_entries, sweep_label, sweep_recipes

__all__ = [
    "BandwidthStep",
    "BlockSpec",
    "ComputeSpec",
    "DatasetSpec",
    "Experiment",
    "ExperimentSpec",
    "HashingSpec",
    "HeterogeneitySpec",
    "IMAGE_MODELS",
    "MethodRecipe",
    "MOMENTUM_HANDLINGS",
    "NicOverride",
    "OperatingPoint",
    "RunSpec",
    "SPARSE_SOURCES",
    "ScenarioSpec",
    "TuningSpec",
    "WorkloadSpec",
    "build",
    "build_experiment",
    "check_part",
    "config_root",
    "deployment_config_dir",
    "effective_config",
    "format_error",
    "load_yaml",
    "parse_method_files",
    "parse_methods",
    "read_run_spec",
    "schema_dir",
    "sweep_entries",
    "sweep_label",
    "sweep_recipes",
    "validate",
]
