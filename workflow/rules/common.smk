# Configuration, validation and the experiment grid. Helper functions only; no rules here.

import copy
import hashlib
import json
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import yaml

from snakemake.utils import validate

from psml_core.config import deployment_config_dir, effective_config
from psml_core.config.renames import renamed_config_keys
from psml_core.config.paths import inside
from psml_core import layout
from psml_core.run_resolver import calibration_path, data_path, run_path
from psml_core.config.reading import parse_yaml, yaml12_numbers
from psml_core.capabilities import backend_info, check_backend
from psml_core.recipes import load_experiment
from psml_core.deploy import FLAVOURS, psml_core_requirement, torch_flavour, write_rules_envs
from psml_core.errors import ConfigError
from psml_core.plugins import cost_file, paper_files as plugin_paper_files, recipe_labels
from psml_core.tuning.record import tune_output, with_operating_points


# The working directory's config/ when it holds methods.yaml (a checkout, or a deployment that
# copied the workflow's config/, as snakedeploy does), else the workflow's own config/ beside
# workflow/; the CLI (psml runs, psml train by name) applies the same rule.
def _own_config_dir():
    try:
        return Path(workflow.current_basedir).parents[1] / "config"
    except TypeError:  # a remote module (github(...)): its files are not on this disk
        sys.exit(
            "error: this deployment has no config/methods.yaml; copy the workflow's config/ "
            "folder (methods.yaml, tiers/, papers/, devices/) into ./config, as snakedeploy "
            "deploy-workflow does"
        )


CONFIG_DIR = deployment_config_dir(
    None if Path("config/methods.yaml").is_file() else _own_config_dir()
)

# Every rule calls `psml`; without --sdm conda it must come from the environment Snakemake runs in.
_SDM = {m.name for m in workflow.deployment_settings.deployment_method}
if shutil.which("psml") is None and "CONDA" not in _SDM:
    sys.exit(
        "error: the `psml` command is not on PATH; activate the environment psml-core is "
        "installed in (`. .venv/bin/activate`, see README) or run with `--sdm conda`"
    )


def _rules_envs():
    """With --sdm conda: the rules' cpu and cuda environments, derived from the lock
    (envs/psml.yaml), each installing psml-core from where this workflow came (a checkout's
    absolute path, or the github(...) module's repository at its tag or commit)."""
    lock = Path(workflow.source_path("../envs/psml.yaml")).read_text(encoding="utf-8")
    try:
        requirement = psml_core_requirement(workflow.current_basedir)
    except ConfigError as err:
        sys.exit(f"error: {err}")
    return {k: str(v) for k, v in write_rules_envs(lock, requirement).items()}


_ENVS = _rules_envs() if "CONDA" in _SDM else dict.fromkeys(FLAVOURS, "../envs/psml.yaml")


def _overlay(merged, typed):
    """``typed`` laid over ``merged`` key by key: mappings merge, anything else replaces."""
    if isinstance(merged, dict) and isinstance(typed, dict):
        return {**merged, **{k: _overlay(merged.get(k), v) for k, v in typed.items()}}
    return typed


# The config files as config_file.smk read them (bounded, YAML 1.2), in Snakemake's order: the
# numbers Snakemake's YAML 1.1 reader left as strings (lr: 1e-3) become numbers.
_OURS = {}
for _data in CONFIG_FILES.values():
    _OURS = _overlay(_OURS, _data)
config.update(yaml12_numbers(dict(config), _OURS))

# --config values typed as YAML types them, like a config file or `psml --set`: Snakemake reads
# a list or mapping with YAML's BaseLoader, which leaves every scalar in it a string
# ('seeds=[0,1]' gave ['0', '1'], and {"rows": 60000} gave '60000'). The raw KEY=VALUE entries
# (which Snakemake also hands to every job it spawns) are read again with safe_load and laid
# over the merged config, so a config file's other entries under the same key stay; an entry
# that is not valid YAML keeps Snakemake's value.
for _entry in workflow.config_settings.config_args or ():
    _key, _, _text = str(_entry).partition("=")
    if _key in config and isinstance(config[_key], list | dict):
        try:
            config[_key] = _overlay(config[_key], parse_yaml(_text))
        except yaml.YAMLError:
            pass

# psml_core checks what a schema cannot (method names, cross-references) and turns the first
# violation into one line naming the key and the allowed values; exit before any job runs.
try:
    # Keys renamed since (compute.device -> compute.cost_profile, ...): one line each, naming
    # the file that set it (or --config), and the merged config renamed once.
    _said = set()
    for _path, _data in CONFIG_FILES.items():
        renamed_config_keys(copy.deepcopy(_data), _path, _said)
    renamed_config_keys(config, "--config", _said)
    EXP = load_experiment(config, CONFIG_DIR)
    check_backend(EXP)  # a backend that cannot run one of the tier's recipes stops here
    BACKEND = backend_info(EXP.backend)  # psml's own or a plugin's: processes, launcher
    # Operating points: the record's where its fingerprint matches; the rest are tuned first.
    EXP, TUNING = with_operating_points(EXP, CONFIG_DIR)
    _EFFECTIVE = effective_config(config, CONFIG_DIR)
except ConfigError as _err:
    sys.exit(f"error: {_err}")

config.clear()
config.update(_EFFECTIVE)
# The same schema file psml_core used: Snakemake's validate() is the workflow's own check.
validate(config, schema="../schemas/config.schema.yaml")

TIER = EXP.tier
# Each rule's conda environment (--sdm conda): the CPU build of torch, but for training jobs
# that compute on a GPU (torch_device cuda or auto); PSML_TORCH=cpu|cuda chooses for every rule.
try:
    RULE_ENV = _ENVS[torch_flavour("cpu")]
    TRAIN_ENV = _ENVS[torch_flavour(EXP.torch_device)]
except ConfigError as _err:
    sys.exit(f"error: {_err}")
RUNS = {run.run_id: run for run in EXP.runs()}
SCENARIOS = sorted(EXP.scenarios)
WORKLOADS = sorted(EXP.workloads)
DATASETS = sorted({EXP.workloads[w].dataset for w in WORKLOADS})


# Placements: one per distinct placement key (RunSpec.placement_key), computed once for every
# (workload, recipe) that shares it. Its spec is the same whichever recipe asks
# (Experiment.placement_spec); the group's first recipe only names the data inputs it reads.
PLACEMENT_OF = {
    (w, m): EXP.placement_run(w, m).placement_key()
    for w, m in sorted({(w, m) for w, m, _s, _seed in EXP.grid()})
}
PLACED_BY = {}
for (_w, _m), _key in PLACEMENT_OF.items():
    PLACED_BY.setdefault((_w, _key), _m)

# The recipes' hashing blocks (jpdc), each hashed once per (dataset, seed) by the hash rule.
HASHINGS = {r.hashing.key: r.hashing for r in EXP.recipes.values() if r.hashing}

# Calibrated sweeps (a paper's parameter in its own units, config.calibration): one factor per
# calibration, fitted on its tuning seed before any run of the sweep trains.
CALIBRATIONS = sorted(EXP.calibrations)


wildcard_constraints:
    dataset="|".join(map(re.escape, DATASETS)),
    hashing="|".join(map(re.escape, HASHINGS)) or "(?!)",
    workload="|".join(map(re.escape, WORKLOADS)),
    method="|".join(map(re.escape, EXP.all_methods)),
    scenario="|".join(map(re.escape, SCENARIOS)),
    seed=r"\d+",
    placement=r"[^/]+-[0-9a-f]{12}",
    calibration="|".join(map(re.escape, CALIBRATIONS)) or "(?!)",


def dataset_of(wildcards):
    """The dataset a workload trains on."""
    return EXP.workloads[wildcards.workload].dataset


def prepared(wildcards):
    """The prepared data set (and its manifest) a job reads."""
    name = dataset_of(wildcards) if hasattr(wildcards, "workload") else wildcards.dataset
    return data_files(data_path(TIER, name))


def data_files(base):
    """A data set's files, by the names a rule's input gives them."""
    return {"data": f"{base}/data.npz", "manifest": f"{base}/manifest.json"}


def wild(pattern):
    """A layout pattern (psml_core/layout.py) as a rule's path: the tier filled in, the other
    fields left as wildcards."""
    return layout.wildcards(pattern, tier=TIER)


# A run's directory as the train rule's output: its id's fields as wildcards.
RUN_WILDCARDS = layout.wildcards(layout.RUN, tier=TIER, run_id=layout.RUN_ID)


def run_data(wildcards):
    """The data set a partition or training job reads: prepared, or hashed for its recipe.

    A recipe with a hashing block (jpdc) reads what the hash rule wrote for its seed (the
    partition spec's seed is the tier's first), so the hashing runs once per seed.
    """
    h = EXP.recipes[wildcards.method].hashing
    if h is None:
        return prepared(wildcards)
    seed = int(getattr(wildcards, "seed", EXP.seeds[0]))
    return data_files(data_path(TIER, dataset_of(wildcards), h.key, seed))


def hashing_json(wildcards):
    """A hashing block as JSON, for `psml hash`."""
    return json.dumps(asdict(HASHINGS[wildcards.hashing]), sort_keys=True)


def dataset_json(wildcards):
    """A dataset's settings as JSON, for `psml prepare`."""
    return json.dumps(EXP.datasets[wildcards.dataset].to_dict(), sort_keys=True)


def run_json(wildcards):
    """One run's settings as canonical JSON, for `psml train`.

    At its operating point where the record has one; else at the declared point, which the
    run_spec rule replaces by the tune job's choice (`tuned_input`).
    """
    seed = int(getattr(wildcards, "seed", EXP.seeds[0]))
    scenario = getattr(wildcards, "scenario", SCENARIOS[0])
    return EXP.run(wildcards.workload, wildcards.method, scenario, seed).to_json()


def placing_recipe(wildcards):
    """The (workload, recipe) whose settings a placement job reads (the first that shares it)."""
    return SimpleNamespace(
        workload=wildcards.workload, method=PLACED_BY[(wildcards.workload, wildcards.placement)]
    )


def partition_json(wildcards):
    """A placement's settings (the tier's first seed and scenario): no operating point, which
    a placement does not depend on, so that a new point does not recompute placements; the
    same text whichever recipe of the group is asked (Experiment.placement_spec)."""
    wc = placing_recipe(wildcards)
    return EXP.placement_spec(wc.workload, wc.method).to_json()


def placement_data(wildcards):
    """The data set a placement job reads: its placing recipe's (prepared, or hashed)."""
    return run_data(placing_recipe(wildcards))


def partition_of(wildcards):
    """The assignment a training run reads: its (workload, recipe)'s placement."""
    key = PLACEMENT_OF[(wildcards.workload, wildcards.method)]  # computed once, above
    return partition_file(wildcards.workload, key, "npz")


def tune_file(key):
    """Where the tune job of a tuning key (`<workload>/<method>`) writes its entry."""
    return str(tune_output(TIER, key))


def tuned_input(wildcards):
    """The tune job a run's spec waits for: only where the record has no point for its key."""
    key = EXP.tuning_key(wildcards.workload, wildcards.method)
    return [tune_file(key)] if key in TUNING.pending else []


def write_run_spec(path, text, tuned, log):
    """A run's spec at the point its tune job chose (the run_spec rule)."""
    from psml_core.config import RunSpec
    from psml_core.tuning.record import check_entry, entry_point

    entry = check_entry(json.loads(Path(tuned).read_text()), tuned)
    text = RunSpec.from_json(text).at_point(entry_point(entry, f"tune job {tuned}")).to_json()
    write_spec(path, text, log)


def write_spec(path, text, log):
    """Write a job's settings file atomically (a killed write never leaves half a spec)."""
    from psml_core.atomic import write_text

    write_text(path, f"{text}\n")
    write_text(log, f"wrote {path}\n")


def write_changed(files):
    """Write each settings file whose text differs from the file's (atomically), no other.

    An unchanged file keeps its time stamp, so that only the jobs whose settings changed re-run.
    Every path must stay under the working directory (names from the config build them).
    """
    from psml_core.atomic import write_text

    try:
        inside(files, what="settings file")
    except ConfigError as err:
        sys.exit(f"error: {err}")

    for path, text in files.items():
        text = f"{text}\n"
        try:
            if Path(path).read_text(encoding="utf-8") == text:
                continue
        except (OSError, UnicodeDecodeError):
            pass
        write_text(path, text)


def parent_dir(wildcards, input):
    """The directory holding the prepared data set."""
    return str(Path(input.manifest).parent)


def manifest_dir(wildcards, output):
    """The directory a prepared data set is written to."""
    return str(Path(output.manifest).parent)


def out_dir(wildcards, output):
    """The directory of a run's outputs."""
    return str(Path(output.metrics).parent)


def run_dir(run):
    """The results directory of a run."""
    return str(run_path(TIER, run))


def _existing(paths):
    """The given user files that exist; a missing one is left to `psml`, whose error names the key."""
    return sorted({p for p in paths if p and Path(p).exists()})


def dataset_sources(wildcards):
    """A data set's user-provided files (libsvm, cifar10), so that replacing one re-prepares it."""
    spec = EXP.datasets[wildcards.dataset]
    return _existing([spec.path, spec.test_path])


def delay_traces(wildcards):
    """A run's trace CSVs (delay, cross-traffic) and device file, so that editing one re-trains."""
    return scenario_files(wildcards.scenario, getattr(wildcards, "workload", None))


def scenario_files(scenario, workload=None):
    """A scenario's trace CSVs (delay, cross-traffic) and the run's device file.

    The cost profile is the workload's own (``workloads.<name>.cost_profile``) where it sets
    one, else the tier's (``compute.cost_profile``).
    """
    sc = EXP.scenarios[scenario]
    traces = [
        spec.get("path")
        for spec in (sc.delay or {}, sc.cross_traffic or {})
        if spec.get("kind") == "trace"
    ]
    device = EXP.compute_for(scenario, workload).cost_profile
    return _existing([*traces, str(CONFIG_DIR / "devices" / f"{device}.yaml")])


def cost_files(wildcards):
    """A plugin codec's cost file (psml bench calibrate --plugin), so that a new one re-trains."""
    r = EXP.recipes[wildcards.method]
    codecs = [r.codec.name] + ([r.codec_down.name] if r.codec_down else [])
    return _existing([str(cost_file(c)) for c in codecs])


def train_threads(wildcards):
    """Cores a training job occupies: torch's threads (compute.threads) per process, as many
    processes as the backend's descriptor counts (one, or one per rank)."""
    workers, shards = EXP.cluster(wildcards.workload)  # a workload may set its own workers
    return BACKEND.processes(workers, shards) * EXP.compute.threads


def train_cpus(wildcards):
    """SLURM CPUs per task: torch's threads in each process (a dist job has P + S tasks)."""
    return EXP.compute.threads


def train_memory(wildcards, input, attempt):
    """A training job's memory (MB): its own peak when it last ran, else an estimate from the
    run's workers, model and data (psml_core/footprint.py); more on a retry."""
    from psml_core.footprint import train_mem_mb

    run = EXP.run(wildcards.workload, wildcards.method, wildcards.scenario, int(wildcards.seed))
    manifest = json.loads(Path(input.manifest).read_text(encoding="utf-8"))
    bench = layout.path(layout.BENCH, tier=TIER, job=f"train/{run.run_id}")
    return train_mem_mb(run, manifest, bench, attempt)


def _gpu_here():
    """Whether nvidia-smi lists a GPU on this host (as scripts/install.sh asks)."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return any(line.startswith("GPU") for line in out.stdout.splitlines())


def _on_cluster():
    """Whether jobs go to a cluster: a remote executor, or (a dry run of) the slurm profile."""
    plugin = workflow.executor_plugin
    if plugin is not None and not plugin.common_settings.local_exec:
        return True
    defaults = workflow.resource_settings.default_resources
    return any(str(k).startswith("slurm_") for k in (defaults.keys() if defaults else ()))


def train_gpu(wildcards):
    """GPUs of a training job: one for torch_device cuda; for auto, one on a cluster (the GPU
    partition) or where this host has one, else none."""
    if EXP.torch_device == "cuda":
        return 1
    return int(_on_cluster() or _gpu_here())


def train_tasks(wildcards):
    """SLURM tasks of a launched backend's training job (dist: its P workers plus S shards)."""
    return BACKEND.processes(*EXP.cluster(wildcards.workload))


# Processes of a training job (SLURM tasks): one per process of a backend whose processes a
# launcher starts (its descriptor's launch_module; dist: P + S), else one. Such a job also gets
# `mpi`, which makes the SLURM executor plugins submit its tasks and run its command as is
# (`psml train` starts the ranks itself); they refuse `mpi` on a one-task job (sim, horovod).
TRAIN_TASKS = {"tasks": train_tasks, "mpi": "srun"} if BACKEND.launch_module else {"tasks": 1}

# A GPU only for training jobs that compute on one (device: cuda, or auto where there is one),
# on the GPU partition; every other job keeps the profile's default partition and asks for none.
TRAIN_GPU = (
    {"gpu": train_gpu, "slurm_partition": EXP.slurm_gpu_partition}
    if EXP.torch_device in ("cuda", "auto")
    else {}
)


def all_summaries(wildcards):
    """Every run's summary.json."""
    return [f"{run_dir(run)}/summary.json" for run in RUNS.values()]


def all_metrics(wildcards):
    """Every run's metrics.parquet."""
    return [f"{run_dir(run)}/metrics.parquet" for run in RUNS.values()]


def all_sparsity(wildcards):
    """Sparsity statistics of every data set in use."""
    return [layout.path(layout.SPARSITY, tier=TIER, dataset=d) for d in DATASETS]


def hashing_args(wildcards):
    """`psml analyze` options: one --hashing per distinct hashing block of the recipes (jpdc)."""
    blocks = sorted(
        {json.dumps(asdict(r.hashing), sort_keys=True) for r in EXP.recipes.values() if r.hashing}
    )
    return " ".join(f"--hashing {shlex.quote(b)}" for b in blocks)


def all_partitions(wildcards):
    """Predicted traffic of every placement, each once."""
    return [partition_file(w, key, "json") for w, key in sorted(PLACED_BY)]


def partition_file(workload, placement, ext):
    """A placement's assignment (npz) or predicted traffic (json), by its key."""
    return layout.path(layout.PARTITION, tier=TIER, workload=workload, placement=placement, ext=ext)


def named_partitions(wildcards):
    """The report's entries: ``<workload>/<method>=<file>`` for every (workload, method)."""
    return [
        f"{w}/{m}={partition_file(w, key, 'json')}" for (w, m), key in sorted(PLACEMENT_OF.items())
    ]


PAPERS_DIR = str(Path(CONFIG_DIR) / "papers")


def paper_files(wildcards):
    """The reported results the claims are measured against (plugins' paper files too)."""
    own = sorted(str(p) for p in Path(PAPERS_DIR).glob("*.yaml"))
    return own + [str(p) for p in plugin_paper_files()]


def experiment_json(wildcards):
    """The effective configuration plus the recipes in use, for the report."""
    exp = dict(config)
    exp["recipes"] = {name: asdict(recipe) for name, recipe in EXP.recipes.items()}
    # Recipes that come from or use a plugin: the report marks them "plugin: <package> <version>".
    labels = recipe_labels(EXP.recipes)
    if labels:
        exp["plugins"] = labels
    # Scenarios and workloads as resolved, an experiment's axis sweeps included.
    exp["scenarios"] = {name: asdict(sc) for name, sc in EXP.scenarios.items()}
    exp["workloads"] = {name: asdict(wl) for name, wl in EXP.workloads.items()}
    # An experiment's methods include the recipes its sweep derives (<method>__<label>).
    exp["experiments"] = {
        name: {**block, "methods": list(EXP.experiments[name].methods)}
        for name, block in config.get("experiments", {}).items()
    }
    return json.dumps(exp, sort_keys=True)


# Operating points (tune.smk): the tune jobs' settings, and the points in use collected.


def tune_json(wildcards):
    """A tune job's settings: its target's run at the tuning seed, the tuning, the fingerprint."""
    key = f"{wildcards.workload}/{wildcards.method}"
    target = TUNING.targets[key]
    return json.dumps(
        {
            "key": key,
            "scenario": target.scenario,
            "scenario_free": target.scenario_free,
            "fingerprint": target.fingerprint,
            "objective": asdict(target.objective),
            "tuning": asdict(EXP.tuning),
            "run": target.spec.to_dict(),
        },
        sort_keys=True,
    )


def tune_traces(wildcards):
    """The trace and device files of a tune job's scenario (as a training job's)."""
    target = TUNING.targets[f"{wildcards.workload}/{wildcards.method}"]
    return scenario_files(target.scenario, target.workload)


def collect_points(out, tuned, log):
    """The points in use: the record's, and the tune jobs' (each entry with its source)."""
    from psml_core.tuning.record import check_entry, collected

    jobs = {}
    for path in tuned:
        entry = check_entry(json.loads(Path(path).read_text()), path)
        jobs[f"{entry['workload']}/{entry['method']}"] = {**entry, "source": f"tune job {path}"}
    text = yaml.safe_dump(collected(EXP, TUNING, jobs), sort_keys=False, width=100)
    write_spec(out, text, log)


TUNE_WORKLOADS = sorted({t.workload for t in TUNING.targets.values()})
TUNE_METHODS = sorted({t.method for t in TUNING.targets.values()})


def write_config_json(out, experiment, points, log):
    """config.json: the effective configuration and the operating points in use (the report's)."""
    data = json.loads(experiment)
    data["operating_points"] = yaml.safe_load(Path(points).read_text())
    write_spec(out, json.dumps(data, sort_keys=True), log)


def calibration_of(wildcards):
    """The calibration file a training run reads ([] unless its recipe is a calibrated sweep's)."""
    mark = EXP.recipes[wildcards.method].calibrated
    return [str(calibration_path(TIER, mark["id"]))] if mark else []


def calibration_arg(wildcards, input):
    """`psml train`'s --calibration option, where the run has one."""
    return f"--calibration {input.calibration}" if input.calibration else ""


def calibration_json_of(wildcards):
    """A calibration and its two runs on the tuning seed, as JSON, for `psml calibrate-sweep`."""
    from psml_core.config.calibration import calibration_json

    return calibration_json(EXP, wildcards.calibration)


def calibration_data(wildcards):
    """The prepared data set of a calibration's workload."""
    name = EXP.workloads[EXP.calibrations[wildcards.calibration].workload].dataset
    return data_files(data_path(TIER, name))


def calibration_traces(wildcards):
    """The trace and device files of a calibration's scenario (as for a training run)."""
    cal = EXP.calibrations[wildcards.calibration]
    return scenario_files(cal.scenario, cal.workload)


# Settings files (specs.smk): where a run's spec is, and every file known when the workflow is read.


def run_spec_file(w, m, s, seed, tuned=False):
    """Where a run's spec is: specs/runs/ (known when read), specs/tuned/ (after its tune job)."""
    kind = "tuned" if tuned else "runs"
    run_id = EXP.run_id(w, m, s, seed)
    return layout.path(layout.SPEC_RUN, tier=TIER, kind=kind, run_id=run_id)


def waits_for_tuning(w, m):
    """Whether a (workload, recipe)'s runs take their point from a tune job of this workflow."""
    return EXP.tuning_key(w, m) in TUNING.pending


def run_spec_of(wildcards):
    """The spec a training run reads."""
    w, m = wildcards.workload, wildcards.method
    return run_spec_file(w, m, wildcards.scenario, wildcards.seed, waits_for_tuning(w, m))


def settings_files():
    """Every settings file known when the workflow is read, with its text."""
    files = {}
    for w, m, s, seed in EXP.grid():
        if not waits_for_tuning(w, m):
            files[run_spec_file(w, m, s, seed)] = EXP.run(w, m, s, seed).to_json()
    for w, key in sorted(PLACED_BY):
        wc = SimpleNamespace(workload=w, placement=key)
        where = layout.path(layout.SPEC_PARTITION, tier=TIER, workload=w, placement=key)
        files[where] = partition_json(wc)
    for key in sorted(TUNING.pending):
        w, m = key.split("/")
        where = layout.path(layout.SPEC_TUNE, tier=TIER, workload=w, method=m)
        files[where] = tune_json(SimpleNamespace(workload=w, method=m))
    for name in CALIBRATIONS:
        where = layout.path(layout.SPEC_CALIBRATION, tier=TIER, calibration=name)
        files[where] = calibration_json_of(SimpleNamespace(calibration=name))
    lists = {"summaries": all_summaries, "metrics": all_metrics, "partitions": named_partitions}
    for name, paths in lists.items():
        files[layout.path(layout.SPEC_LIST, tier=TIER, name=name)] = "\n".join(paths(None))
    return files


# Snakemake's HTML report (snakemake --report) shows each figure and table with the PDF's own
# words: `psml report --figures/--tables` writes index.json (section headings, titles) and the
# captions beside them (psml_core/report/html.py); the caption templates include the captions.
def _html_index(folder):
    try:
        return json.loads((Path(folder) / "index.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"categories": {}, "files": {}}


# The file's category: the report's part, numbered in reading order (Snakemake sorts by name).
def _section(folder, wildcards):
    key = f"{wildcards.group}/{wildcards.name}"
    return _html_index(folder).get("categories", {}).get(key, wildcards.group)


# One label only: Snakemake turns a second label with two values into a toggle between files.
def _labels(folder, wildcards):
    key = f"{wildcards.group}/{wildcards.name}"
    return {"title": _html_index(folder)["files"].get(key, wildcards.name)}


def figure_section(wildcards, output):
    return _section(output.figures, wildcards)


def table_section(wildcards, output):
    return _section(output.tables, wildcards)


def figure_labels(wildcards, output):
    return _labels(output.figures, wildcards)


def table_labels(wildcards, output):
    return _labels(output.tables, wildcards)


# Every path built from names in the config stays under the working directory: the schema's name
# pattern already refuses slashes and a leading dot; this catches any name derived from them.
try:
    inside(
        [
            *(run_dir(run) for run in RUNS.values()),
            *(prepared(SimpleNamespace(dataset=d))["data"] for d in DATASETS),
            *(partition_of(SimpleNamespace(workload=w, method=m)) for w, m in PLACEMENT_OF),
            *(tune_file(key) for key in TUNING.pending),
            *(str(calibration_path(TIER, name)) for name in CALIBRATIONS),
        ],
        what="workflow path",
    )
except ConfigError as _err:
    sys.exit(f"error: {_err}")
