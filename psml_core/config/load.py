"""Resolve a user's config into an :class:`~psml_core.config.specs.Experiment`, cross-checked.

The method recipes' blocks are checked one layer up (:mod:`psml_core.recipes`).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from psml_core.config.calibration import CalibrationSpec, calibration_spec
from psml_core.config.claim_uses import ClaimUse, read_claim_uses
from psml_core.config.experiment import Experiment, ExperimentSpec
from psml_core.config.paths import inside
from psml_core.config.points import TuningSpec
from psml_core.config.renames import renamed_config_keys
from psml_core.config.schema import (
    config_root,
    load_yaml,
    read_schema,
    validate,
)
from psml_core.config.specs import (
    ComputeSpec,
    DatasetSpec,
    MethodRecipe,
    ScenarioSpec,
    WorkloadSpec,
    build,
)
from psml_core.config.sweeps import sweep_entries, sweep_recipes
from psml_core.errors import ConfigError, did_you_mean

# --------------------------------------------------------------------------- loading


def parse_methods(path: str | Path | None = None) -> dict[str, MethodRecipe]:
    """Load config/methods.yaml against its schema only.

    :func:`psml_core.recipes.load_methods` also checks every block against its registry.
    """
    p = Path(path) if path is not None else config_root() / "methods.yaml"
    raw = load_yaml(p, "methods file")
    data = validate(raw, "methods", source=f"methods file {str(p)!r}")
    recipes = {}
    for name, rec in data.items():
        recipes[name] = build(MethodRecipe, {"name": name, **rec}, name)
    return recipes


def parse_method_files(paths: Sequence[str | Path]) -> dict[str, MethodRecipe]:
    """:func:`parse_methods` of several files (config/methods.yaml, then plugins' files).

    Raises:
        ConfigError: a file's own error, or a recipe name two files define.
    """
    recipes: dict[str, MethodRecipe] = {}
    origin: dict[str, Path] = {}
    for path in paths:
        for name, recipe in parse_methods(path).items():
            if name in recipes:
                raise ConfigError(
                    f"methods file {str(path)!r}: recipe {name!r} is defined in "
                    f"{str(origin[name])!r} already; rename one of them"
                )
            recipes[name], origin[name] = recipe, Path(path)
    return recipes


def _shown(path: Path) -> str:
    """A path as the user would type it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` laid on ``base``, mappings merged key by key; a null removes a base key.

    No config key takes null, so ``experiments: {pcp: null}`` can only mean "drop the tier's
    pcp experiment".
    """
    out = copy.deepcopy(base)
    for k, v in over.items():
        if v is None and k in out:
            del out[k]
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def effective_config(user: dict[str, Any], root: str | Path | None = None) -> dict[str, Any]:
    """Overlay the user's config (config.yaml + --config) on its tier file; validate; fill defaults.

    Args:
        user: The user's config mapping; must hold ``tier``.
        root: The config directory (holding ``tiers/`` and ``methods.yaml``).

    Returns:
        The effective configuration as a plain dict, defaults filled in.
    """
    root = Path(root) if root is not None else config_root()
    if not isinstance(user, dict):
        raise ConfigError(f"invalid config: expected a mapping at the top level, got {user!r}")
    tiers = read_schema("config")["properties"]["tier"]["enum"]
    tier = user.get("tier", "smoke")
    if tier not in tiers:
        raise ConfigError(
            f"invalid config: key 'tier': {tier!r} is not allowed; {did_you_mean(tier, tiers)}"
            "allowed values: " + ", ".join(tiers)
        )
    tier_file = root / "tiers" / f"{tier}.yaml"
    base = renamed_config_keys(load_yaml(tier_file, "tier file") or {}, _shown(tier_file))
    user = renamed_config_keys(copy.deepcopy(user), "config (config.yaml + --config)")
    merged = _deep_merge(base, user)
    merged["tier"] = tier
    return validate(merged, "config", source=f"config ({_shown(tier_file)} + overrides)")


def build_experiment(
    user: dict[str, Any],
    root: str | Path | None = None,
    *,
    methods_files: Sequence[str | Path] = (),
    paper_files: Sequence[str | Path] = (),
) -> Experiment:
    """Resolve the user's config into an :class:`Experiment`, checking cross-references.

    The method recipes' blocks are not checked against their registries here (settings import
    nothing above them): :func:`psml_core.recipes.load_experiment` does both.

    Args:
        user: The user's config (config file plus overrides).
        root: The config directory (``tiers/``, ``methods.yaml``, ``papers/``).
        methods_files: More methods files after ``root/methods.yaml`` (plugins').
        paper_files: More paper files after ``root/papers/*.yaml`` (plugins').

    Raises:
        ConfigError: naming the key and the allowed values, for any invalid setting.
    """
    root = Path(root) if root is not None else config_root()
    cfg = effective_config(user, root)
    recipes = parse_method_files([root / "methods.yaml", *methods_files])
    _check_references(cfg, recipes)
    papers = root / "papers"
    paths = [*sorted(papers.glob("*.yaml")), *map(Path, paper_files)]
    uses = read_claim_uses(paths, cfg.get("experiments", {}))
    _schedule_claims(cfg, recipes, uses)
    _check_tuning_seed(cfg)
    made, bases, base_recipes, calibrations = _expand_sweeps(cfg, recipes, papers)
    exp = Experiment(
        tier=cfg["tier"],
        backend=cfg["backend"],
        seeds=tuple(cfg["seeds"]),
        workers=cfg["workers"],
        shards=cfg["shards"],
        colocated=cfg["colocated"],
        methods=tuple(cfg["methods"]),
        datasets={
            k: build(DatasetSpec, {"name": k, **v}, f"datasets.{k}")
            for k, v in cfg["datasets"].items()
        },
        workloads={
            k: build(WorkloadSpec, {"name": k, **v}, f"workloads.{k}")
            for k, v in cfg["workloads"].items()
        },
        scenarios={
            k: build(ScenarioSpec, {"name": k, **v}, f"scenarios.{k}")
            for k, v in cfg["scenarios"].items()
        },
        compute=build(ComputeSpec, cfg["compute"], "compute"),
        recipes={m: recipes[m] for m in _used_methods(cfg)},
        description=cfg.get("description", "").strip(),
        report=cfg.get("report", {}),
        experiments={
            k: build(ExperimentSpec, {"name": k, **v}, f"experiments.{k}")
            for k, v in cfg.get("experiments", {}).items()
        },
        checkpoint_every=cfg.get("checkpoint_every", 0),
        torch_device=cfg.get("torch_device", "cpu"),
        slurm_gpu_partition=cfg.get("slurm_gpu_partition", "gpu"),
        derived=frozenset(made),
        tuning=build(TuningSpec, cfg["tuning"], "tuning"),
        bases=bases,
        base_recipes=base_recipes,
        calibrations=calibrations,
        claims=tuple(uses),
    )
    if not exp.grid():
        raise ConfigError(
            "invalid config: no runs; list methods (the main grid) or define experiments"
        )
    _check_runs(exp)
    _check_files(exp)
    return exp


def _calibration(
    cfg: dict[str, Any], name: str, ex: dict[str, Any], papers: Path, where: str
) -> CalibrationSpec | None:
    """The calibration an experiment's sweep names, fitted on its first workload and scenario."""
    key = ex["sweep"].get("calibration")
    if not key:
        return None
    workloads = ex.get("workloads") or sorted(cfg["workloads"])
    scenarios = ex.get("scenarios") or sorted(cfg["scenarios"])
    seeds = {
        *cfg["seeds"],
        *(s for e in cfg.get("experiments", {}).values() for s in e.get("seeds") or []),
    }
    return calibration_spec(papers, key, ex["sweep"], workloads[0], scenarios[0], seeds, where)


def _check_references(cfg: dict[str, Any], recipes: dict[str, MethodRecipe]) -> None:
    """Every method, workload, scenario and data set a config names exists; shards fit."""
    _check_names("methods", cfg["methods"], recipes, "method", "methods (config/methods.yaml)")
    for name, ex in cfg.get("experiments", {}).items():
        where = f"experiments.{name}"
        _check_names(
            f"{where}.methods", ex["methods"], recipes, "method", "methods (config/methods.yaml)"
        )
        wls, scs = ex.get("workloads", []), ex.get("scenarios", [])
        _check_names(f"{where}.workloads", wls, cfg["workloads"], "workload", "workloads")
        _check_names(f"{where}.scenarios", scs, cfg["scenarios"], "scenario", "scenarios")
    for w, wl in cfg["workloads"].items():
        if wl["dataset"] not in cfg["datasets"]:
            raise ConfigError(
                f"invalid config: key 'workloads.{w}.dataset': unknown dataset "
                f"{wl['dataset']!r}; {did_you_mean(wl['dataset'], cfg['datasets'])}"
                f"defined datasets: {', '.join(sorted(cfg['datasets']))}"
            )
    if cfg["colocated"] and cfg["shards"] > cfg["workers"]:
        raise ConfigError(
            f"invalid config: key 'shards': {cfg['shards']} shards cannot be colocated with "
            f"{cfg['workers']} workers; set shards <= workers or colocated: false"
        )


def _expand_sweeps(
    cfg: dict[str, Any], recipes: dict[str, MethodRecipe], papers: Path
) -> tuple[set[str], dict[str, str], dict[str, MethodRecipe], dict[str, CalibrationSpec]]:
    """Add each experiment's derived scenarios, workloads and recipes.

    Returns:
        The names derived, each derived workload's or recipe's base, the sweeps' base recipes,
        and the calibrations the sweeps name, by key.
    """
    made: set[str] = set()
    bases: dict[str, str] = {}
    base_recipes: dict[str, MethodRecipe] = {}
    calibrations: dict[str, CalibrationSpec] = {}
    for name, ex in cfg.get("experiments", {}).items():
        for key, table in (("scenario_sweep", "scenarios"), ("workload_sweep", "workloads")):
            if ex.get(key):
                where = f"experiments.{name}.{key}"
                derived = sweep_entries(cfg[table], ex[key], where, table)
                made.update(derived)
                bases.update({d: ex[key]["base"] for d in derived if table == "workloads"})
                cfg[table].update(derived)
                listed = ex.get(table) or []
                ex[table] = [*listed, *(d for d in derived if d not in listed)]
        if ex.get("sweep"):
            where = f"experiments.{name}.sweep"
            cal = _calibration(cfg, name, ex, papers, where)
            if cal is not None:
                calibrations[cal.key] = cal
            derived = sweep_recipes(recipes, ex["sweep"], where, cal)
            recipes.update(derived)
            base = ex["sweep"]["method"]
            bases.update(dict.fromkeys(derived, base))
            base_recipes[base] = recipes[base]
            ex["methods"] = [*ex["methods"], *(m for m in derived if m not in ex["methods"])]
    return made, bases, base_recipes, calibrations


def _schedule_claims(
    cfg: dict[str, Any], recipes: dict[str, Any], uses: Sequence[ClaimUse]
) -> None:
    """Add to each experiment every run its paper claims need (method, baselines, scenarios).

    A tier that includes a claim's experiment runs the claim: its method, its named comparator
    and its robustness baselines join the experiment's methods, and its fixed scenarios join
    the experiment's scenarios where the tier defines them (a scenario the tier lacks leaves the
    claim NOT RUN, with the missing runs named). Regime maps are left as they are: they run what
    they list (:func:`~psml_core.config.claim_uses.read_claim_uses` leaves their claims out).
    """
    experiments = cfg.get("experiments", {})
    for use in uses:
        ex = experiments[use.experiment]
        wanted = [name for name, _role in use.roles()]
        ex["methods"] = [
            *ex["methods"],
            *(m for m in dict.fromkeys(wanted) if m in recipes and m not in ex["methods"]),
        ]
        if ex.get("scenarios"):
            ex["scenarios"] = [
                *ex["scenarios"],
                *(s for s in use.scenarios if s in cfg["scenarios"] and s not in ex["scenarios"]),
            ]


def _check_tuning_seed(cfg: dict[str, Any]) -> None:
    """The tuning seed must be one no verdict uses: not in ``seeds`` nor any experiment's."""
    tuning = cfg["tuning"]
    if not tuning["enabled"]:
        return
    used = {"seeds": cfg["seeds"]}
    used.update(
        {f"experiments.{n}.seeds": ex.get("seeds") or [] for n, ex in cfg["experiments"].items()}
    )
    checks = [tuning["seed"] + 1 + i for i in range(tuning.get("check_seeds", 0))]
    for key, seeds in used.items():
        if tuning["seed"] in seeds:
            raise ConfigError(
                f"invalid config: key 'tuning.seed': {tuning['seed']} is a verdict seed (it is in "
                f"{key!r}); choose a tuning seed that no experiment runs, e.g. "
                f"{max(s for v in used.values() for s in v) + 1000}"
            )
        clash = sorted(set(checks) & set(seeds))
        if clash:
            raise ConfigError(
                f"invalid config: key 'tuning.check_seeds': check seed {clash[0]} (tuning.seed + "
                f"{clash[0] - tuning['seed']}) is a verdict seed (it is in {key!r}); lower "
                f"tuning.check_seeds or move tuning.seed away from the verdict seeds"
            )


def _used_methods(cfg: dict[str, Any]) -> list[str]:
    out = list(cfg["methods"])
    for ex in cfg.get("experiments", {}).values():
        out += [m for m in ex["methods"] if m not in out]
    return out


def _check_names(where: str, names: list[str], known: Any, kind: str, what: str) -> None:
    for i, name in enumerate(names):
        if name not in known:
            raise ConfigError(
                f"invalid config: key '{where}[{i}]': unknown {kind} {name!r}; "
                f"{did_you_mean(name, known)}known {what}: {', '.join(sorted(known))}"
            )


SPARSE_SOURCES = ("zipf_sparse", "libsvm")
"""Data sources whose features are sparse (feature hashing applies to them only)."""

IMAGE_MODELS = {
    "resnet18": ("cifar10", "synthetic_images"),
    "cnn": ("digits", "digits28", "mnist", "cifar10", "synthetic_images"),
}
"""Models that take images, and the data sources whose rows are images of the right layout."""

SPARSE_MODELS = {"sparse_mlp": SPARSE_SOURCES}
"""Models that take sparse rows (an embedding row per feature), and the sources that give them."""


DIRECTORY_SOURCES = {"mnist": True, "cifar10": None}
"""Data sources whose ``path`` is a directory (True), may be either (None); others: a file."""


def _check_files(exp: Experiment) -> None:
    """Every file the tier's runs read exists, is a file (or a directory where one is meant).

    Data files may be missing where a ``url`` downloads them. Checked when the config loads, so
    that a wrong path stops the workflow before any job
    runs instead of when the prepare job reaches it. Relative paths are read from the working
    directory, as the prepare job reads them.
    """
    used = sorted({exp.workloads[w].dataset for w, _m, _s, _seed in exp.grid()})
    for name in used:
        ds = exp.datasets[name]
        kind = DIRECTORY_SOURCES.get(ds.source, False)
        for prefix, path, url in (("", ds.path, ds.url), ("test_", ds.test_path, ds.test_url)):
            if path and not url and not Path(path).exists():
                shown = "" if Path(path).is_absolute() else f" (read from {Path.cwd()})"
                raise ConfigError(
                    f"invalid config: key 'datasets.{name}.{prefix}path': {path!r} does not "
                    f"exist{shown}; fix the path, or give {prefix}url and {prefix}sha256 to "
                    "download the file"
                )
            _check_kind(f"datasets.{name}.{prefix}path", path, kind)
    for s in sorted({cell[2] for cell in exp.grid()}):
        sc = exp.scenarios[s]
        for block, spec in (("delay", sc.delay), ("cross_traffic", sc.cross_traffic)):
            path = (spec or {}).get("path") if (spec or {}).get("kind") == "trace" else None
            if path and not Path(path).exists():
                raise ConfigError(
                    f"invalid config: key 'scenarios.{s}.{block}.path': {path!r} does not exist "
                    f"(read from {Path.cwd()}); fix the path to the trace CSV"
                )
            _check_kind(f"scenarios.{s}.{block}.path", path, False)
    _check_validation(exp.report.get("validation"))


def _check_kind(key: str, path: str | None, directory: bool | None) -> None:
    """An existing ``path`` is a directory where ``directory``, a file where not (None: either)."""
    if not path or directory is None or not Path(path).exists():
        return
    if Path(path).is_dir() != directory:
        want, got = ("a directory", "a file") if directory else ("a file", "a directory")
        raise ConfigError(f"invalid config: key {key!r}: {path!r} is {got}; give {want}")


def _check_validation(path: str | None) -> None:
    """``report.validation`` is a JSON file under the working directory (the repository).

    Its contents are checked one layer up (:func:`psml_core.recipes.load_experiment`).
    """
    if not path:
        return
    key = "invalid config: key 'report.validation'"
    inside([path], what=key + ":", fix="give a table under the working directory (the repository)")
    if Path(path).exists() and not Path(path).is_file():
        raise ConfigError(f"{key}: {path!r} is a directory; give a table of `psml validate`")
    if not path.endswith(".json"):
        raise ConfigError(f"{key}: {path!r} is not a .json file; give a table of `psml validate`")


def _check_runs(exp: Experiment) -> None:
    """Combinations that cannot run: image models on non-image data, hashing on dense data."""
    for w, wl in exp.workloads.items():
        sources = IMAGE_MODELS.get(wl.model) or SPARSE_MODELS.get(wl.model)
        ds = exp.datasets[wl.dataset]
        if sources is not None and ds.source not in sources:
            kind = "images" if wl.model in IMAGE_MODELS else "sparse features"
            raise ConfigError(
                f"invalid config: key 'workloads.{w}.model': {wl.model!r} takes {kind}, but "
                f"data set {ds.name!r} has source {ds.source!r}; allowed sources: "
                + ", ".join(sources)
            )
    for w, m, _s, _seed in exp.grid():
        recipe, ds = exp.recipes[m], exp.datasets[exp.workloads[w].dataset]
        if recipe.hashing is not None and ds.source not in SPARSE_SOURCES:
            raise ConfigError(
                f"invalid config: method {m!r} hashes sparse features but workload {w!r} uses "
                f"the dense data set {ds.name!r}; run it on a sparse workload (an experiment's "
                f"workloads: list)"
            )
