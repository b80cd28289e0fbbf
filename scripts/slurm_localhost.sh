#!/usr/bin/env bash
# Run the workflow through `snakemake --profile profiles/slurm` on a real one-node SLURM
# cluster started on this machine (slurmctld + slurmd on localhost).
#
# Usage (as root):
#   scripts/slurm_localhost.sh [--keep] [REPO]
#
#   REPO    the checkout whose workflow is run (default: the one holding this script). Its
#           workflow parts (workflow/Snakefile, workflow/, config/, profiles/), uncommitted changes
#           included, are copied into a throwaway directory; nothing is written into REPO.
#   --keep  keep the throwaway directory after a PASS (it is always kept after a FAIL).
#
# Environment:
#   PSML_SLURM_WORKDIR  the throwaway directory (default: mktemp -d /tmp/psml-slurm-run.XXXXXX;
#                       a directory given here is never removed)
#   PSML_SLURM_STATE    the cluster's slurm.conf, spool, daemon logs and pid files
#                       (default: /tmp/psml-slurm; wiped at the start of every run, kept after)
#   PSML_SLURM_SMOKE_CONFIG  one extra `--config` item for step 4 (default none: the whole
#                       smoke tier). The test suite leaves one experiment with
#                       "experiments={overview: null, jpdc: null, ...}" (the SLURM path, not
#                       the tier, is under test; the local smoke test runs the whole tier)
#
# While the cluster runs, /etc/slurm/slurm.conf is a symlink to $PSML_SLURM_STATE/slurm.conf
# (jobs need the default path); it is removed at the end. An existing slurm.conf that is not
# this script's link stops the script: it never touches a configured cluster.
#
# What it does:
#   1. installs Debian's slurm-wlm and munge with apt-get if a command is missing (no service
#      is started by the packages), creates /etc/munge/munge.key if missing, starts munged if
#      munge does not answer;
#   2. writes slurm.conf for one node, this host (`hostname -s`): partition `debug`, 3/4 of the
#      memory, select/cons_tres, proctrack/linuxproc, task/none (no cgroups in containers),
#      no accounting storage (no slurmdbd), MinJobAge=600 (squeue shows finished jobs for 10
#      minutes); starts slurmctld and slurmd (nice 19: jobs inherit it) and waits until the
#      node is idle;
#   3. edits the copy's profiles/slurm/config.yaml the way README ("Running on SLURM") tells a
#      user to: no account (none exist here), the local partition, mem_mb capped to what
#      one core's share of this node holds (a training job asks for the run's own threads and
#      memory peak, one CPU and well under 1 GB here); and, because
#      this cluster has no slurmdbd (so `sacct` cannot answer), status polling with squeue;
#   4. runs the smoke tier: `snakemake --profile profiles/slurm --config tier=smoke`
#      -> reports/smoke/report.pdf, every non-local job an sbatch job;
#   5. runs one smoke run on the dist backend in a second copy:
#      `snakemake <its summary.json> --profile profiles/slurm --config tier=smoke backend=dist`
#      The train job asks SLURM for P + S tasks and `psml train --launcher srun` starts one rank
#      per task; checked: summary.json (backend dist, wall-clock), the job's step 0 ran P + S
#      tasks that all exited 0 (slurmd's log), the allocation had P + S CPUs;
#   6. stops the daemons it started (also on failure or interrupt) and prints PASS or FAIL.
#
# The node advertises max(cores, P + S) CPUs (P + S = 6 for the smoke tier; SlurmdParameters=
# config_overrides when that exceeds the cores) so that the dist job's P + S tasks fit in one
# allocation as they would on a real node; on fewer cores the kernel time-shares them. This is
# a functional test of the SLURM path, not a benchmark.
#
# Exit status: 0 PASS; 1 a check failed; 2 a precondition is missing (root, apt-get, psml).
set -euo pipefail

usage() { sed -n '2,/^# What it does:/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

KEEP=0
REPO=""
while (($#)); do
    case "$1" in
    --keep) KEEP=1 ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "error: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) REPO="$1" ;;
    esac
    shift
done
REPO="$(cd "${REPO:-$(dirname "$0")/..}" && pwd)"
STATE="${PSML_SLURM_STATE:-/tmp/psml-slurm}"
[[ "$STATE" == /?*/?* || "$STATE" == /tmp/?* ]] || { echo "error: PSML_SLURM_STATE=$STATE: give a dedicated directory" >&2; exit 2; }
PARTITION="debug"
# The dist run: one smoke run (its summary.json is the target).
DIST_RUN="digits_mlp/dense_bsp/dc_10g/seed0"

log() { printf '[slurm_localhost %(%H:%M:%S)T] %s\n' -1 "$*"; }
die() { echo "error: $*" >&2; exit 2; }

[[ "$(id -u)" == 0 ]] || die "run as root: it installs packages and runs slurmctld/slurmd as root"
for part in workflow/Snakefile config profiles/slurm/config.yaml; do
    [[ -e "$REPO/$part" ]] || die "$REPO is not a psml checkout ($part missing)"
done
if ! command -v psml >/dev/null && [[ -f "$REPO/.venv/bin/activate" ]]; then
    # shellcheck disable=SC1091
    . "$REPO/.venv/bin/activate"
fi
command -v psml >/dev/null || die "psml is not on PATH; activate the environment psml-core is installed in"
command -v snakemake >/dev/null || die "snakemake is not on PATH"
python -c 'import snakemake_executor_plugin_slurm' 2>/dev/null ||
    die "snakemake-executor-plugin-slurm is not installed in $(command -v python)"

exec 9>"/tmp/psml-slurm.lock"
flock -n 9 || die "another scripts/slurm_localhost.sh holds /tmp/psml-slurm.lock"

WORK="${PSML_SLURM_WORKDIR:-$(mktemp -d /tmp/psml-slurm-run.XXXXXX)}"
mkdir -p "$WORK"
RESULT=FAIL
CREATED_POLICY=0
STARTED_MUNGED=""
# Jobs must find the configuration at the default path: the SLURM jobstep plugin drops every
# SLURM_* variable (SLURM_CONF too) before its srun. /etc/slurm/slurm.conf is a link to
# $STATE/slurm.conf while the cluster runs, removed at the end; a real one is never touched.
ETC_CONF=/etc/slurm/slurm.conf
CONF="$STATE/slurm.conf"
unset SLURM_CONF

stop_pid() { # stop_pid PID NAME: TERM, wait up to 20 s, then KILL
    local pid="$1" name="$2" i
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 0
    [[ "$(ps -o comm= -p "$pid")" == "$name" ]] || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 40; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.5
    done
    kill -KILL "$pid" 2>/dev/null || true
}

stop_cluster() { # the daemons of $STATE (this run's, or a killed earlier run's)
    if [[ -f "$STATE/run/slurmctld.pid" ]] && command -v scancel >/dev/null; then
        timeout 20 scancel --quiet --user root 2>/dev/null || true
    fi
    stop_pid "$(cat "$STATE/run/slurmd.pid" 2>/dev/null || true)" slurmd
    stop_pid "$(cat "$STATE/run/slurmctld.pid" 2>/dev/null || true)" slurmctld
}

ours_etc_conf() { [[ -L "$ETC_CONF" && "$(readlink "$ETC_CONF")" == "$CONF" ]]; }

cleanup() {
    local rc=$?
    set +e
    stop_cluster
    ours_etc_conf && rm -f "$ETC_CONF"
    [[ -n "$STARTED_MUNGED" ]] && stop_pid "$STARTED_MUNGED" munged
    ((CREATED_POLICY)) && rm -f /usr/sbin/policy-rc.d
    if [[ "$RESULT" == PASS && "$KEEP" == 0 && -z "${PSML_SLURM_WORKDIR:-}" ]]; then
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [[ -e "$ETC_CONF" || -L "$ETC_CONF" ]] && ! ours_etc_conf; then
    die "$ETC_CONF exists and is not this script's: not touching a configured cluster"
fi

# --- 1. packages and munge ------------------------------------------------------------------
NEEDED=(slurmctld slurmd sbatch srun squeue scontrol sinfo scancel munged munge unmunge mungekey)
missing=()
for c in "${NEEDED[@]}"; do command -v "$c" >/dev/null || missing+=("$c"); done
if ((${#missing[@]})); then
    command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get to install slurm-wlm, munge"
    log "installing slurm-wlm and munge (missing: ${missing[*]})"
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then # keep the packages from starting their services
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        CREATED_POLICY=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    nice -n 19 apt-get update -qq || die "apt-get update failed"
    nice -n 19 apt-get install -y -qq --no-install-recommends slurm-wlm munge >"$WORK/apt.log" 2>&1 ||
        { tail -n 20 "$WORK/apt.log" >&2; die "apt-get install slurm-wlm munge failed (log: $WORK/apt.log)"; }
    if ((CREATED_POLICY)); then rm -f /usr/sbin/policy-rc.d; CREATED_POLICY=0; fi
fi
if [[ ! -s /etc/munge/munge.key ]]; then
    log "creating /etc/munge/munge.key"
    install -d -o munge -g munge -m 700 /etc/munge
    mungekey --create --keyfile /etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    chmod 600 /etc/munge/munge.key
fi
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    log "starting munged"
    install -d -o munge -g munge -m 755 /run/munge
    rm -f /run/munge/munged.pid # a dead munged's
    runuser -u munge -- nice -n 19 munged
    for _ in $(seq 20); do [[ -s /run/munge/munged.pid ]] && break; sleep 0.5; done
    STARTED_MUNGED="$(cat /run/munge/munged.pid)"
    munge -n | unmunge >/dev/null || die "munged does not answer (see /var/log/munge/munged.log)"
fi

# --- 2. slurm.conf and the daemons ----------------------------------------------------------
stop_cluster # daemons left behind by a killed earlier run of this script
rm -rf "$STATE"
mkdir -p "$STATE"/{spool/ctld,spool/d,log,run}
HOST="$(hostname -s)"
getent hosts "$HOST" >/dev/null ||
    die "this host's name $HOST does not resolve (dist ranks reach rank 0 by it): add it to /etc/hosts"
CORES="$(nproc)"
MEM_MB=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 * 3 / 4)) # headroom: 1/4
JOB_MEM_MB=$((MEM_MB / CORES))                                            # one job per core fits
DIST_TASKS="$(cd "$REPO" && python -c '
from psml_core.recipes import load_experiment
e = load_experiment({"tier": "smoke"}, "config")
print(e.workers + e.shards)')"
CPUS=$((CORES > DIST_TASKS ? CORES : DIST_TASKS))
OVERRIDES=""
((CPUS > CORES)) && OVERRIDES="SlurmdParameters=config_overrides"
cat >"$CONF" <<EOF
# Written by scripts/slurm_localhost.sh: one node, this host.
ClusterName=psmllocal
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/spool/ctld
SlurmdSpoolDir=$STATE/spool/d
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
SlurmctldDebug=info
# verbose: slurmstepd logs "starting N tasks" and every task's exit code (checked below)
SlurmdDebug=verbose
# No cgroups in containers.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
MpiDefault=none
# No slurmdbd: sacct cannot answer, the profile's status command is squeue, which shows a
# finished job for MinJobAge seconds.
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=600
ReturnToService=2
$OVERRIDES
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=$PARTITION Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
mkdir -p "$(dirname "$ETC_CONF")"
ln -sfn "$CONF" "$ETC_CONF"
log "slurm.conf: node $HOST, $CPUS CPUs ($CORES cores), RealMemory=$MEM_MB MB: $CONF ($ETC_CONF)"
nice -n 19 slurmctld
nice -n 19 slurmd
state=""
for _ in $(seq 120); do
    state="$(sinfo -h -n "$HOST" -o %T 2>/dev/null || true)"
    [[ "$state" == idle ]] && break
    sleep 1
done
[[ "$state" == idle ]] || {
    tail -n 20 "$STATE/log/slurmctld.log" "$STATE/log/slurmd.log" >&2
    echo "error: node $HOST is '$state', not idle, after 120 s (logs: $STATE/log)" >&2
    exit 1
}
log "SLURM is up: $(sinfo -h -o '%P %a %D %T %N')"

# --- 3. the workflow copies and their profile -----------------------------------------------
copy_workflow() { # copy_workflow DEST: what a user checks out, with the site's profile edits
    local dest="$1"
    mkdir -p "$dest"
    cp -a "$REPO/workflow" "$REPO/config" "$REPO/profiles" "$dest/"
    python - "$dest/profiles/slurm/config.yaml" "$PARTITION" "$JOB_MEM_MB" <<'EOF'
import re
import sys

path, partition, job_mem = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = open(path, encoding="utf-8").read()


def sub(pattern, repl, expected):
    global text
    text, n = re.subn(pattern, repl, text, flags=re.M)
    if n != expected:
        sys.exit(f"editing {path}: {pattern!r} matched {n} lines, expected {expected}")


sub(r"^  slurm_account: .*\n", "", 1)  # no accounts here: the plugin submits without -A
sub(r"^(\s+slurm_partition: ).*$", rf'\g<1>"{partition}"', 1)  # the CPU partition
# No GPUs: the profile asks for none (only device: cuda runs would, and none run here).
text = re.sub(  # one job per core fits the node
    r"^(\s+mem_mb: )(\d+)",
    lambda m: m.group(1) + str(min(int(m.group(2)), job_mem)),
    text,
    flags=re.M,
)
text += (
    "# This cluster has no slurmdbd, so sacct cannot answer: poll with squeue (MinJobAge=600).\n"
    "slurm-status-command: squeue\n"
    "slurm-init-seconds-before-status-checks: 5\n"
    "slurm-keep-successful-logs: true\n"
)
open(path, "w", encoding="utf-8").write(text)
EOF
}

run_snakemake() { # run_snakemake NAME DIR ARGS...: log to $WORK/NAME.log, print wall time
    local name="$1" dir="$2" t0 rc
    shift 2
    log "$name: (cd $dir && snakemake $*) > $WORK/$name.log"
    t0=$SECONDS
    set +e
    (cd "$dir" && nice -n 19 snakemake "$@") >"$WORK/$name.log" 2>&1
    rc=$?
    set -e
    log "$name: exit $rc after $((SECONDS - t0)) s"
    return "$rc"
}

FAILS=()
check() { # check DESCRIPTION COMMAND...: run COMMAND, record PASS/FAIL under DESCRIPTION
    local desc="$1"
    shift
    if "$@"; then
        log "ok    $desc"
    else
        log "FAIL  $desc"
        FAILS+=("$desc")
    fi
}

copy_workflow "$WORK/smoke"
log "profile edits (what a site changes):"
diff -u "$REPO/profiles/slurm/config.yaml" "$WORK/smoke/profiles/slurm/config.yaml" | sed 's/^/    /' || true

slurm_jobs() { # slurm_jobs LOG: SLURM job ids of the jobs Snakemake submitted
    sed -n 's/.*has been submitted with SLURM jobid \([0-9]*\).*/\1/p' "$1"
}
completed() { # completed JOBID: slurmctld saw it exit 0
    grep -q "_job_complete: JobId=$1 WEXITSTATUS 0" "$STATE/log/slurmctld.log"
}

# --- 4. the smoke tier ----------------------------------------------------------------------
T_SMOKE=$SECONDS
SMOKE_RC=0
SMOKE_EXTRA=()
if [[ -n "${PSML_SLURM_SMOKE_CONFIG:-}" ]]; then SMOKE_EXTRA=("$PSML_SLURM_SMOKE_CONFIG"); fi
run_snakemake smoke "$WORK/smoke" --profile profiles/slurm --config tier=smoke "${SMOKE_EXTRA[@]}" ||
    SMOKE_RC=$?
T_SMOKE=$((SECONDS - T_SMOKE))
mapfile -t SMOKE_JOBS < <(slurm_jobs "$WORK/smoke.log")
smoke_exit_0() { [[ "$SMOKE_RC" == 0 ]]; }
smoke_report() { head -c 5 "$WORK/smoke/reports/smoke/report.pdf" 2>/dev/null | grep -q '%PDF'; }
smoke_submitted() { # one sbatch job per run's training, the other rules' too
    local n_runs n_train
    n_runs="$(find "$WORK/smoke/results/smoke/runs" -name summary.json 2>/dev/null | wc -l)"
    n_train="$(grep -c 'submitted with SLURM jobid [0-9]* (log: [^)]*/rule_train/' "$WORK/smoke.log" || true)"
    log "      $n_runs runs, $n_train train jobs of ${#SMOKE_JOBS[@]} sbatch jobs"
    ((n_runs > 0 && n_train == n_runs && ${#SMOKE_JOBS[@]} > n_runs))
}
smoke_completed() {
    local j
    for j in "${SMOKE_JOBS[@]}"; do completed "$j" || { log "      job $j did not complete"; return 1; }; done
}
check "smoke: snakemake --profile profiles/slurm exits 0" smoke_exit_0
check "smoke: reports/smoke/report.pdf is a PDF" smoke_report
check "smoke: every run's training job (and every non-local rule) went through sbatch" smoke_submitted
check "smoke: slurmctld saw every submitted job exit 0" smoke_completed

# --- 5. one dist run ------------------------------------------------------------------------
copy_workflow "$WORK/dist"
TARGET="results/smoke/runs/$DIST_RUN/summary.json"
T_DIST=$SECONDS
DIST_RC=0
run_snakemake dist "$WORK/dist" "$TARGET" --profile profiles/slurm --config tier=smoke backend=dist ||
    DIST_RC=$?
T_DIST=$((SECONDS - T_DIST))
TRAIN_JOB="$(grep -o 'submitted with SLURM jobid [0-9]* (log: [^)]*rule_train/' "$WORK/dist.log" |
    sed -n 's/.*jobid \([0-9]*\).*/\1/p' | tail -n 1 || true)"
dist_exit_0() { [[ "$DIST_RC" == 0 ]]; }
dist_summary() {
    python - "$WORK/dist/$TARGET" "$DIST_TASKS" <<'EOF'
import json
import sys

s = json.load(open(sys.argv[1]))
ok = (s["backend"], s["clock"], s["workers"] + s["shards"]) == ("dist", "wall-clock", int(sys.argv[2]))
print(f"      backend={s['backend']} clock={s['clock']} P+S={s['workers'] + s['shards']} "
      f"accuracy={s['final_test_accuracy']:.3f} wall={s['total_time_s']:.1f}s")
sys.exit(0 if ok else 1)
EOF
}
dist_allocation() {
    [[ -n "$TRAIN_JOB" ]] || { log "      no train job in $WORK/dist.log"; return 1; }
    local job
    job="$(scontrol -o show job "$TRAIN_JOB")" || return 1 # kept MinJobAge=600 s after its end
    log "      $(grep -o 'JobState=[^ ]*\|NumCPUs=[^ ]*\|NumTasks=[^ ]*\|Partition=[^ ]*' <<<"$job" | xargs)"
    grep -q "NumCPUs=$DIST_TASKS .*NumTasks=$DIST_TASKS " <<<"$job"
}
dist_step() { # step 0 of the train job (srun -n P+S) started P+S tasks, all exited 0
    [[ -n "$TRAIN_JOB" ]] || return 1
    local slog="$STATE/log/slurmd.log" started exited
    started="$(grep -c "\[$TRAIN_JOB\.0\] starting $DIST_TASKS tasks" "$slog" || true)"
    exited="$(grep -c "\[$TRAIN_JOB\.0\] task [0-9]* ([0-9]*) exited with exit code 0" "$slog" || true)"
    log "      SLURM job $TRAIN_JOB step 0: started $DIST_TASKS tasks: $started, tasks exited 0: $exited"
    [[ "$started" == 1 && "$exited" == "$DIST_TASKS" ]]
}
check "dist: snakemake --profile profiles/slurm --config backend=dist exits 0" dist_exit_0
check "dist: summary.json says backend dist, wall-clock, P+S=$DIST_TASKS" dist_summary
check "dist: the train job's allocation has P+S=$DIST_TASKS CPUs" dist_allocation
check "dist: srun step of the train job ran P+S=$DIST_TASKS tasks, all exit 0" dist_step

# --- 6. summary -----------------------------------------------------------------------------
echo
echo "slurm_localhost: smoke ${T_SMOKE} s, dist ${T_DIST} s (nice 19, $CORES cores)"
if ((${#FAILS[@]})); then
    echo "slurm_localhost: FAIL (${#FAILS[@]} checks):"
    printf '  - %s\n' "${FAILS[@]}"
    echo "  logs: $WORK/smoke.log $WORK/dist.log, workflow logs under $WORK/{smoke,dist}/logs,"
    echo "        daemons: $STATE/log/slurmctld.log $STATE/log/slurmd.log"
    for name in smoke dist; do
        [[ -f "$WORK/$name.log" ]] && { echo "--- tail of $WORK/$name.log"; tail -n 30 "$WORK/$name.log"; }
    done
    exit 1
fi
RESULT=PASS
if ((KEEP)) || [[ -n "${PSML_SLURM_WORKDIR:-}" ]]; then
    echo "slurm_localhost: PASS (kept: $WORK, report $WORK/smoke/reports/smoke/report.pdf)"
else
    echo "slurm_localhost: PASS ($WORK removed; --keep keeps it)"
fi
