"""Static workflow checks: lint, formatting, a dry-run per profile, and config rejection."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from wf_helpers import REPO, snakemake_cli


def test_lint_is_clean():
    proc = snakemake_cli(["--lint"], REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "good condition" in proc.stdout + proc.stderr


def test_snakefmt_check():
    proc = subprocess.run(
        [sys.executable, "-m", "snakefmt", "--check", "."], cwd=REPO, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("profile_args", "expect"),
    [
        ([], "psml train --run"),
        (["--profile", "profiles/local"], "psml train --run"),
        (["--profile", "profiles/slurm"], "slurm_partition=cpu"),
        (["--profile", "profiles/slurm", "--config", "torch_device=cuda"], "gpu=1"),
        # auto takes a GPU where there is one: on the cluster, the GPU partition's (it never
        # asked for one); here, without a GPU, none.
        (["--profile", "profiles/slurm", "--config", "torch_device=auto"], "gpu=1"),
        (["--config", "torch_device=auto"], "gpu=0"),
        (["--profile", "profiles/slurm", "--config", "backend=dist"], "tasks=6, mpi=srun"),
    ],
)
def test_dry_run_per_profile(workflow_copy: Path, profile_args, expect):
    proc = snakemake_cli(["-n", *profile_args], workflow_copy)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert expect in out
    trains = [ln for ln in out.splitlines() if "resources:" in ln and "launcher=" in ln]
    if "profiles/slurm" in profile_args:  # a GPU only for training jobs that compute on one
        cuda = "torch_device=cuda" in profile_args or "torch_device=auto" in profile_args
        assert trains and all(("gpu=1" in ln) == cuda for ln in trains)
        assert all(("slurm_partition=gpu" in ln) == cuda for ln in trains)
        # Sized from the run: one CPU per task (torch's one thread), its memory estimate
        # (under 1 GB for the smoke tier), not 4 CPUs and 16 GB.
        assert all("cpus_per_task=1," in ln for ln in trains)
        assert all("mem_mb=<TBD>" in ln or "mem_mb=500," in ln for ln in trains)
    for rule in ("prepare", "analyze", "partition", "train", "compare", "report"):
        assert f"rule {rule}:" in out or f"localrule {rule}:" in out, rule


def test_dry_run_small_tier_schedules_every_run(workflow_copy: Path):
    proc = snakemake_cli(["-n", "--config", "tier=small"], workflow_copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "results/small/runs/cnn/dense_bsp/slow_100m/seed4/metrics.parquet" in proc.stdout
    # Every recipe of config/methods.yaml is scheduled by some experiment of the small tier.
    from psml_core.recipes import load_methods

    for name in load_methods(workflow_copy / "config" / "methods.yaml"):
        assert f"/{name}/" in proc.stdout, name
    assert "results/small/claims.csv" in proc.stdout
    # Hashing recipes (jpdc) read the hash rule's output: one data set per (hashing, seed).
    assert "psml hash --data data/small/" in proc.stdout
    lines = [ln.removeprefix("Shell command: ") for ln in proc.stdout.splitlines()]
    jpdc = [ln for ln in lines if ln.startswith("psml train") and "/jpdc/" in ln]
    assert jpdc and all("--data data/small/hashed/" in ln for ln in jpdc), jpdc[:2]


def test_list_overrides_on_the_command_line_are_typed(workflow_copy: Path):
    """`--config 'seeds=[0,1]'` (the README's form): Snakemake hands the items over as strings."""
    proc = snakemake_cli(["-n", "--config", "tier=smoke", "seeds=[0,1]"], workflow_copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for seed in (0, 1):
        assert f"results/smoke/runs/digits_mlp/dense_bsp/dc_10g/seed{seed}/" in proc.stdout


def test_mapping_overrides_on_the_command_line_are_typed(workflow_copy: Path, tmp_path: Path):
    """The paper tier's own advice: a nested --config mapping, whose scalars Snakemake leaves
    strings ('rows' was '60000'); a config file's other entries under the same key stay."""
    extra = tmp_path / "extra.yaml"
    extra.write_text("datasets:\n  digits: {rows: 500}\n")
    datasets = '{"cifar10": {"source": "synthetic_images", "rows": 600}}'
    proc = snakemake_cli(
        ["-n", "--configfile", str(extra), "--config", "tier=paper", f"datasets={datasets}",
         "seeds=[3]"],
        workflow_copy,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "results/paper/runs/resnet18_cifar10/dense_bsp/dc_10g/seed3/" in proc.stdout
    prepares = [
        ln for ln in proc.stdout.splitlines() if ln.startswith("Shell command: psml prepare")
    ]
    cifar = next(ln for ln in prepares if '"name": "cifar10"' in ln)
    digits = next(ln for ln in prepares if '"name": "digits"' in ln)
    assert '"rows": 600,' in cifar and '"source": "synthetic_images"' in cifar, cifar
    assert '"rows": 500,' in digits, digits


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("tier=huge", "key 'tier': 'huge' is not allowed; allowed values: smoke, small, paper"),
        ("methods=[nope]", "unknown method 'nope'; known methods (config/methods.yaml): "),
        ("workers=two", "key 'workers': expected integer"),
        ("surprise=1", "unknown key 'surprise'"),
        ("backend=horovod", "backend 'horovod' cannot run"),  # the smoke tier has ASP recipes
    ],
)
def test_bad_config_stops_before_any_job(workflow_copy: Path, override: str, fragment: str):
    proc = snakemake_cli(["--cores", "1", "--config", override], workflow_copy)
    assert proc.returncode != 0
    err_lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(err_lines) == 1 and fragment in err_lines[0], proc.stderr
    if "nope" in override:
        assert "dense_bsp" in err_lines[0]  # the list names the recipes
    assert "Traceback" not in proc.stderr
    for produced in ("results", "data", "reports"):
        assert not (workflow_copy / produced).exists()


def _bad_methods_file(wf: Path) -> None:
    """topk_ef's codec keeps a ratio outside (0, 1]."""
    path = wf / "config" / "methods.yaml"
    methods = yaml.safe_load(path.read_text())
    methods["topk_ef"]["codec"]["params"]["ratio"] = 1.5
    path.write_text(yaml.safe_dump(methods))


def _tier_without_runs(wf: Path) -> None:
    """The smoke tier with no main-grid method and no experiment."""
    path = wf / "config" / "tiers" / "smoke.yaml"
    tier = yaml.safe_load(path.read_text())
    tier.pop("experiments")
    tier["methods"] = []
    path.write_text(yaml.safe_dump(tier))


@pytest.mark.parametrize(
    ("configfile", "edit", "fragment"),
    [
        ({"shards": -1}, None, "key 'shards': -1 is out of range; must be >= 1"),
        ({"workers": 2.0}, None, "key 'workers': expected integer, got 2.0 (float)"),
        ({"workers": 4000}, None, "key 'workers': 4000 workers, but data set 'digits'"),
        (
            {"datasets": {"digits": {"test_fraction": 1.5}}},
            None,
            "key 'datasets.digits.test_fraction': 1.5 is out of range; must be < 1",
        ),
        (
            {"experiments": {"jpdc": {"methods": []}}},
            None,
            "key 'experiments.jpdc.methods': needs at least 1 entry",
        ),
        ({}, _bad_methods_file, "key 'topk_ef.codec.params': codec 'topk': ratio must be in"),
        ({}, _tier_without_runs, "no runs; list methods (the main grid) or define experiments"),
    ],
)
def test_bad_config_file_stops_the_dry_run(workflow_copy: Path, configfile, edit, fragment):
    """`snakemake -n` with a bad config file (typed YAML), methods file or tier: one error line."""
    if edit is not None:
        edit(workflow_copy)
    cf = workflow_copy / "bad.yaml"
    cf.write_text(yaml.safe_dump({"tier": "smoke", **configfile}))

    def files() -> dict[str, int]:
        return {str(p): p.stat().st_mtime_ns for p in workflow_copy.rglob("*")}

    before = files()
    proc = snakemake_cli(["-n", "--configfile", str(cf)], workflow_copy)
    assert proc.returncode != 0
    err_lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(err_lines) == 1 and fragment in err_lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert files() == before  # nothing written, not even .snakemake/


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("tier: smoke\nseeds: [0\n", "'config/config.yaml' is not valid YAML at line 3, column 1"),
        ("- tier: smoke\n", "config/config.yaml: expected `key: value` lines at the top level"),
        # Accepted before: the last of two equal keys won, an empty file passed psml config,
        # and a non-UTF-8 file was a 50-line traceback.
        ("tier: smoke\nworkers: 4\nworkers: 8\n", "key 'workers' is written twice"),
        ("", "'config/config.yaml' is empty (no settings); write at least `tier: smoke`"),
        (b"tier: smoke\n# caf\xe9\n", "is not UTF-8 text (byte 0xe9 on line 2)"),
    ],
)
def test_a_malformed_config_yaml_is_named_with_its_line(workflow_copy: Path, text, fragment):
    """Snakemake's own message for these names no file; ours names the file and the line."""
    cf = workflow_copy / "config" / "config.yaml"
    cf.write_bytes(text) if isinstance(text, bytes) else cf.write_text(text)
    proc = snakemake_cli(["-n"], workflow_copy)
    assert proc.returncode != 0
    err_lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(err_lines) == 1 and fragment in err_lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and "WorkflowError" not in proc.stderr


def test_a_configfile_with_a_key_written_twice_stops_the_dry_run(workflow_copy: Path):
    """Snakemake reads a --configfile itself and keeps the last value; the check refuses it."""
    cf = workflow_copy / "bad.yaml"
    cf.write_text("tier: smoke\nworkers: 4\nworkers: 8\n")
    proc = snakemake_cli(["-n", "--configfile", str(cf)], workflow_copy)
    assert proc.returncode != 0
    err_lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(err_lines) == 1 and "bad.yaml" in err_lines[0], proc.stderr
    assert "key 'workers' is written twice (first at line 2)" in err_lines[0]


def test_ci_runs_exactly_the_readmes_test_command_and_the_readme_gives_the_main_job():
    repo = Path(__file__).resolve().parents[2]
    ci = (repo / ".ci" / "run").read_text().strip().splitlines()[-1]
    readme = (repo / "README.md").read_text()
    venv = "python3 -m venv .venv && . .venv/bin/activate && "
    assert ci == venv + "bash scripts/install.sh test && pytest"
    assert f"\n{ci}\n" in readme
    assert f"\n{venv}bash scripts/install.sh && snakemake --cores 2\n" in readme


def test_user_files_are_inputs_so_replacing_one_reruns_its_jobs(workflow_copy: Path):
    """A user's data file and delay trace are rule inputs: a changed file re-runs its jobs."""
    (workflow_copy / "user.svm").write_text("1 1:0.5\n")
    (workflow_copy / "trace.csv").write_text("step,delay_ms\n0,5\n")
    cf = workflow_copy / "user.yaml"
    cf.write_text(
        yaml.safe_dump(
            {
                "tier": "smoke",
                "datasets": {"digits": {"source": "libsvm", "path": "user.svm", "n_features": 64}},
                "scenarios": {"dc_10g": {"delay": {"kind": "trace", "path": "trace.csv"}}},
            }
        )
    )
    proc = snakemake_cli(["-n", "--configfile", str(cf)], workflow_copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    jobs = proc.stdout.split("\n\n")
    prepare = [j for j in jobs if "rule prepare:" in j and "data/smoke/digits/" in j]
    assert len(prepare) == 1 and "input: user.svm" in prepare[0], prepare
    trains = [j for j in jobs if "rule train:" in j]
    traced = [j for j in trains if "/dc_10g/" in j.split("output:")[1].splitlines()[0]]
    assert traced and all("trace.csv" in j.split("output:")[0] for j in traced)
    assert not any("trace.csv" in j.split("output:")[0] for j in trains if j not in traced)

    # A missing file stops the config with one line naming the key (it was found only when
    # the prepare job ran).
    (workflow_copy / "user.svm").unlink()
    proc = snakemake_cli(["-n", "--configfile", str(cf)], workflow_copy)
    assert proc.returncode != 0
    err_lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(err_lines) == 1, proc.stderr
    assert "key 'datasets.digits.path': 'user.svm' does not exist" in err_lines[0]
    assert "give url and sha256" in err_lines[0]


def test_a_deployed_copy_runs_and_its_conda_envs_install_psml_from_the_checkout(tmp_path: Path):
    """`psml deploy` (snakedeploy's layout, with a module path that resolves); with --sdm conda
    the rules' environments install psml-core from the checkout's absolute path (a relative
    `-e ../..` resolved against the working directory, so conda worked from the checkout only)."""
    dest = tmp_path / "study"
    proc = subprocess.run(
        [sys.executable, "-m", "psml_core", "deploy", str(dest), "--checkout", str(REPO)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    proc = snakemake_cli(["-n"], dest)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    snakemake_cli(["-n", "--sdm", "conda"], dest)  # may stop where conda is not installed
    envs = sorted((dest / ".snakemake" / "psml" / "envs").glob("psml-*.yaml"))
    assert [p.name.split("-")[1] for p in envs] == ["cpu", "cuda"]
    for path in envs:
        env = yaml.safe_load(path.read_text())
        pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
        assert pip[-1] == f"-e {REPO}" and (REPO / "pyproject.toml").is_file()


def test_dry_run_fits_a_calibration_before_the_sweep_it_maps(workflow_copy: Path):
    """The paper tier's pf_theta sweep is calibrated: psml calibrate-sweep, then --calibration."""
    proc = snakemake_cli(["-n", "--config", "tier=paper"], workflow_copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [ln.removeprefix("Shell command: ") for ln in proc.stdout.splitlines()]
    fit = "results/paper/calibration/ratatouille.theta0.json"
    assert any(ln.startswith("psml calibrate-sweep") and f"--out {fit}" in ln for ln in lines)
    swept = [ln for ln in lines if ln.startswith("psml train") and "/ratatouille_async__t0p" in ln]
    assert swept and all(f"--calibration {fit}" in ln for ln in swept)
    plain = [ln for ln in lines if ln.startswith("psml train") and "/dense_asp/" in ln]
    assert plain and not any("--calibration" in ln for ln in plain)
