#!/usr/bin/env bash
# Two GPUs needed only by: step 2's dist-over-NCCL test and step 8's NCCL row (skipped, with a line saying so, on one GPU).
# The GPU measurements of issues 30 and 46, as one command (under 8 minutes on one H100 or H200).
#
#   bash scripts/gpu_check.sh            on a machine with a CUDA GPU (the device tool's)
#   bash scripts/gpu_check.sh --cpu-dry  every step on the CPU with tiny sizes: checks the
#                                        script's plumbing here (a few minutes on 2 cores)
#
# Steps, each with its own time limit inside an overall budget (BUDGET_S, default 540 s), so a
# slow step is cut and reported rather than eating the others' time (expected: about 7 min):
#   1. the machine: GPU, driver, Python, torch;
#   2. the GPU tests (tests/unit/codecs/test_codecs_cuda.py, tests/unit/engine/test_engine_device.py,
#      tests/unit/models/test_models_batch.py);
#   3. python benchmarks/bench_batch_grad.py --device cuda (16 replicas of the paper tier's
#      ResNet-18, batch 32 each: psml's gradient paths against module copies and the one-model
#      floor);
#   4. python benchmarks/bench_codecs_torch.py --device cuda (11.2M elements: encode and decode
#      against a device memcpy and GRACE-style torch compressors; top-k's 0.25x target);
#   5. python benchmarks/bench_paper_dfs.py --device cuda --iterations 3 (the paper tier's DFS
#      experiment projected from CIFAR-shaped synthetic images, each method's mean iteration
#      against the same run's one-model floor; the targets: at most 2 h, DFS within 2.5x);
#   6. the smoke tier with device=cuda on the sim backend, up to results/smoke/claims.csv, and
#      its verdicts against the same commit's CPU run, made beside it on the same machine;
#   7. Horovod over NCCL: used where Horovod is built with NCCL, else one line saying why not;
#   8. python benchmarks/bench_dist_bodies.py --device cuda: one dist job whose dense pushes and
#      answers are body messages, over tagged gloo, gloo-ordered and NCCL (PSML_DIST_BODIES),
#      with their bytes checked equal. NCCL needs a GPU per rank (it refuses two ranks on one
#      GPU), so on a one-GPU machine its row says so and only the gloo transports are timed;
#      the GPU tests of step 2 run a dist job over NCCL where there are two GPUs or more.
#
#   9. one table (benchmarks/gpu/summary_table.py): the gradient paths beside the floor, the
#      codecs beside GRACE, and the paper tier's projection, each against its target.
#
# SKIP="codecs paper_dfs" leaves the named steps out (a rerun of the ones that failed).
#
# Output: everything goes to $OUT/gpu_check.log (or ./gpu_check_out/ when OUT is unset), with
# the JSON of the codec benchmark, the smoke claims and the per-step summary beside it. The
# smoke tier writes data/, results/ and logs/ in this tree, as `snakemake` does.
#
# The device machine has Python 3.12 with torch, numpy, pandas, pyarrow, matplotlib, seaborn,
# scipy, scikit-learn, pytest and hypothesis, but not psml's other dependencies, and no network.
# They travel as wheels in .whl/ (git-ignored through .git/info/exclude: `/.whl/`), installed
# here with --target into /tmp/site; psml itself runs from this tree through PYTHONPATH (no
# pip install: the tree's torch pin does not apply there). To recreate .whl/ (44 wheels, about
# 28 MB; connection-pool is published as source only, so pip builds its pure-Python wheel):
#
#   mkdir -p .git/info && echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 --platform manylinux_2_27_x86_64 \
#     --platform manylinux1_x86_64 -d .whl $(grep -v '^connection-pool' scripts/gpu_check_wheels.txt)
#   python3 -m pip wheel --no-deps -w .whl $(grep '^connection-pool' scripts/gpu_check_wheels.txt)
#
# scripts/gpu_check_wheels.txt lists them: snakemake 9 and its dependencies, simpy, pymetis,
# python-snappy, jsonschema (the closure of psml's runtime dependencies minus what the GPU
# machine's image already holds: torch, numpy, numba and llvmlite among them).
set -uo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
DRY=0
[ "${1:-}" = "--cpu-dry" ] && DRY=1
OUTDIR=${OUT:-$ROOT/gpu_check_out}
mkdir -p "$OUTDIR"
LOG=$OUTDIR/gpu_check.log
SUMMARY=$OUTDIR/summary.txt
: > "$LOG"
: > "$SUMMARY"
BUDGET_S=${BUDGET_S:-540}
START=$(date +%s)
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg PSML_PROGRESS=plain

say() { echo "[$(($(date +%s) - START)) s] $*" | tee -a "$LOG"; }
say "two GPUs are needed only by step 2's dist-over-NCCL test and step 8's NCCL row; on one GPU each is skipped with a line saying why"

# step NAME LIMIT_S COMMAND...: runs within min(LIMIT_S, what is left of the budget).
step() {
    local name=$1 limit=$2
    shift 2
    case " ${SKIP:-} " in *" $name "*)
        say "SKIPPED $name: SKIP names it"
        echo "$name: skipped (SKIP)" >> "$SUMMARY"
        return 0 ;;
    esac
    local left=$((BUDGET_S - ($(date +%s) - START)))
    if [ "$left" -lt 20 ]; then
        say "SKIPPED $name: the ${BUDGET_S} s budget is spent"
        echo "$name: skipped (budget spent)" >> "$SUMMARY"
        return 0
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    say "BEGIN $name (limit ${limit} s): $*"
    local t0=$(date +%s)
    timeout --kill-after=10 "$limit" "$@" >> "$LOG" 2>&1
    local rc=$?
    local took=$(($(date +%s) - t0))
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        say "CUT $name after ${took} s (limit ${limit} s)"
        echo "$name: cut at ${limit} s" >> "$SUMMARY"
    else
        say "END $name: exit $rc in ${took} s"
        echo "$name: exit $rc, ${took} s" >> "$SUMMARY"
    fi
    return 0
}

# --- dependencies -----------------------------------------------------------------------------
if [ "$DRY" -eq 0 ]; then
    if ls .whl/*.whl > /dev/null 2>&1; then
        say "installing $(ls .whl/*.whl | wc -l) wheels from .whl/ into /tmp/site"
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site .whl/*.whl >> "$LOG" 2>&1 || say "WARNING: the wheel install failed"
        export PYTHONPATH=/tmp/site:$ROOT${PYTHONPATH:+:$PYTHONPATH}
    else
        say "WARNING: no .whl/ here (carry it: the device tool's carry=[\".whl\"])"
        export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
    fi
    DEV=cuda
else
    export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
    DEV=cpu
fi
# The workflow's rules call `psml`; from the tree it is `python3 -m psml_core`.
mkdir -p /tmp/psml_bin
printf '#!/bin/sh\nexec python3 -m psml_core "$@"\n' > /tmp/psml_bin/psml
chmod +x /tmp/psml_bin/psml
export PATH=/tmp/psml_bin:$PATH

# --- 1. the machine ---------------------------------------------------------------------------
step machine 60 bash -c '
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv || true
    nproc; python3 --version
    python3 -c "import torch; print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, \"available\", torch.cuda.is_available()); print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else \"no GPU\")"
    python3 -c "import psml_core, simpy, pymetis, snakemake, jsonschema, snappy; print(\"psml deps import\")"
'

# --- 2. the GPU tests -------------------------------------------------------------------------
step gpu_tests 150 python3 -m pytest -q -p no:cacheprovider -rs \
    tests/unit/codecs/test_codecs_cuda.py tests/unit/engine/test_engine_device.py \
    tests/unit/models/test_models_batch.py

# --- 3. batched gradients ---------------------------------------------------------------------
if [ "$DRY" -eq 0 ]; then
    step batch_grad 45 python3 benchmarks/bench_batch_grad.py --device cuda \
        --json "$OUTDIR/batch_grad.json"
else
    step batch_grad 120 python3 benchmarks/bench_batch_grad.py --device cpu --trials 2 --workers 4 \
        --batch 8 --width 16 --groups 8 --json "$OUTDIR/batch_grad.json"
fi

# --- 4. the codecs on the device --------------------------------------------------------------
if [ "$DRY" -eq 0 ]; then
    step codecs 75 python3 benchmarks/bench_codecs_torch.py --device cuda --n 11200000 \
        --repeats 10 --json "$OUTDIR/codecs_torch.json"
else
    step codecs 120 python3 benchmarks/bench_codecs_torch.py --device cpu --n 200000 \
        --repeats 2 --json "$OUTDIR/codecs_torch.json"
fi

# --- 5. the paper tier's DFS experiment, projected --------------------------------------------
if [ "$DRY" -eq 0 ]; then
    step paper_dfs 120 python3 benchmarks/bench_paper_dfs.py --device cuda --iterations 3 \
        --json "$OUTDIR/paper_dfs.json"
else
    step paper_dfs 300 python3 benchmarks/bench_paper_dfs.py --device cpu --iterations 2 \
        --methods dfs,dense_bsp --rows 100 --workers 2 --json "$OUTDIR/paper_dfs.json"
fi

# --- 6. the smoke tier on the device, and its verdicts against the CPU's -----------------------
# Up to the claims (the report's PDF needs typst, which this check does not carry). The CPU run
# goes on the same machine at the same time, in a copy of this tree, so both are of this commit.
if [ "$DRY" -eq 0 ]; then
    rm -rf /tmp/psml_cpu_tree && mkdir -p /tmp/psml_cpu_tree
    tar --exclude=./.whl --exclude=./gpu_check_out -cf - . | tar -xf - -C /tmp/psml_cpu_tree
    HALF=$(( $(nproc) / 2 ))
    step smoke 200 bash -c "
        ( cd /tmp/psml_cpu_tree && PYTHONPATH=/tmp/site:/tmp/psml_cpu_tree python3 -m snakemake \
            results/smoke/claims.csv --cores $HALF --config device=cpu > $OUTDIR/smoke_cpu.log 2>&1;
          echo \"cpu smoke exit \$?\" ) &
        python3 -m snakemake results/smoke/claims.csv --cores $HALF --config device=cuda \
            > $OUTDIR/smoke_cuda.log 2>&1; echo \"cuda smoke exit \$?\"; wait"
    CLAIMS=results/smoke/claims.csv
    CPU_CLAIMS=/tmp/psml_cpu_tree/results/smoke/claims.csv
else
    step smoke 120 python3 -m snakemake results/smoke/claims.csv -n --cores 2 --config device=$DEV
    CLAIMS=benchmarks/gpu/smoke_claims_cpu.csv  # the plumbing only: the CPU's against itself
    CPU_CLAIMS=benchmarks/gpu/smoke_claims_cpu.csv
fi
cp "$CLAIMS" "$OUTDIR/smoke_claims_$DEV.csv" 2> /dev/null
cp "$CPU_CLAIMS" "$OUTDIR/smoke_claims_cpu.csv" 2> /dev/null
step verdicts 30 python3 benchmarks/gpu/compare_verdicts.py "$CPU_CLAIMS" "$CLAIMS"

# --- 7. Horovod over NCCL ---------------------------------------------------------------------
step horovod 30 python3 -c '
try:
    import horovod.torch as hvd
except ImportError as exc:
    print(f"Horovod over NCCL: not measured: Horovod is not installed here ({exc}); "
          "scripts/install_horovod.sh builds it from source, which needs the network")
else:
    print("Horovod over NCCL:", "built with NCCL" if hvd.nccl_built() else
          "not built with NCCL (HOROVOD_GPU_OPERATIONS=NCCL at build time)")
'

# --- 8. the dist backend's body messages: gloo, gloo-ordered, NCCL ------------------------------
if [ "$DRY" -eq 0 ]; then
    GPUS=$(python3 -c "import torch; print(torch.cuda.device_count())" 2> /dev/null || echo 0)
    WORKERS=2
    [ "$GPUS" -ge 3 ] && WORKERS=$(( GPUS - 1 < 4 ? GPUS - 1 : 4 ))
    [ "$GPUS" -eq 2 ] && WORKERS=1
    step dist_bodies 90 python3 benchmarks/bench_dist_bodies.py --device cuda --workers "$WORKERS"
else
    step dist_bodies 120 python3 benchmarks/bench_dist_bodies.py --device cpu --hidden 1024 \
        --iterations 6 --repeats 1
fi

# --- 9. one table of the measurements against their targets -----------------------------------
python3 benchmarks/gpu/summary_table.py "$OUTDIR" 2>&1 | tee "$OUTDIR/table.md" >> "$LOG"

say "DONE in $(($(date +%s) - START)) s; summary:"
tee -a "$LOG" < "$SUMMARY"
cat "$OUTDIR/table.md"
