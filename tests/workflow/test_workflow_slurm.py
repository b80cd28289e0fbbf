"""Real SLURM: scripts/slurm_localhost.sh on a one-node cluster started on this machine.

The script installs slurm-wlm and munge if needed, starts munged, slurmctld and slurmd, runs the
smoke tier and one dist run (P + S tasks started by srun) through
`snakemake --profile profiles/slurm`, checks them and stops the daemons. It runs wherever that
is possible: as root, with the SLURM and munge commands installed or apt-get to install them.
Elsewhere the test is skipped, and the reason says what is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from wf_helpers import REPO, env_with_venv

SCRIPT = REPO / "scripts" / "slurm_localhost.sh"
COMMANDS = ("slurmctld", "slurmd", "sbatch", "srun", "squeue", "scontrol", "sinfo", "munged")
ETC_CONF = Path("/etc/slurm/slurm.conf")

# A real cluster's jobs: minutes, more on a loaded machine (the script runs everything nice 19).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]


def missing_for_slurm() -> str | None:
    """Why the script cannot run here, or None."""
    if not sys.platform.startswith("linux"):
        return f"a one-node SLURM needs Linux, this is {sys.platform}"
    if os.geteuid() != 0:
        return (
            "scripts/slurm_localhost.sh must run as root (it starts munged, slurmctld and "
            f"slurmd, and may apt-get install slurm-wlm munge); uid is {os.geteuid()}"
        )
    for tool in ("bash", "flock"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH"
    absent = [c for c in COMMANDS if shutil.which(c) is None]
    if absent and shutil.which("apt-get") is None:
        return f"SLURM/munge not installed ({', '.join(absent)} not on PATH) and no apt-get"
    if ETC_CONF.exists() and not ETC_CONF.is_symlink():  # the script's own is a symlink
        return f"{ETC_CONF} exists: a configured SLURM, which the script never touches"
    return None


def test_smoke_and_dist_through_the_slurm_profile_on_a_real_slurm(tmp_path: Path):
    reason = missing_for_slurm()
    if reason:
        pytest.skip(reason)
    env = env_with_venv()
    env["PSML_SLURM_WORKDIR"] = str(tmp_path / "run")  # kept, with every log, for a failure
    # The SLURM path, not the tier: one experiment (DFS's, 6 runs: 33 jobs, not 161) through
    # sbatch, then the report; test_workflow_smoke.py runs the whole tier locally.
    env["PSML_SLURM_SMOKE_CONFIG"] = (
        "experiments={overview: null, jpdc: null, ratatouille: null, pf_theta: null, "
        "dc2: null, pcp: null}"
    )
    proc = subprocess.run(
        ["bash", str(SCRIPT), str(REPO)],
        capture_output=True,
        text=True,
        env=env,
        timeout=3500,
    )
    out, status = proc.stdout + proc.stderr, proc.returncode
    assert status == 0, out[-6000:]
    assert "slurm_localhost: PASS" in out, out[-6000:]
    for check in (
        "ok    smoke: snakemake --profile profiles/slurm exits 0",
        "ok    smoke: reports/smoke/report.pdf is a PDF",
        "ok    dist: summary.json says backend dist",
        "ok    dist: srun step of the train job ran P+S=",
    ):
        assert check in out, check
    assert (tmp_path / "run" / "smoke" / "reports" / "smoke" / "report.pdf").stat().st_size > 0
