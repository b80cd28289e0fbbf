#!/usr/bin/env bash
# Install psml-core into the active Python environment with the torch build that fits the machine.
#
#   scripts/install.sh            # psml-core (editable) and its pinned dependencies
#   scripts/install.sh test       # ... plus the test extra (the README's test command)
#   scripts/install.sh --dry-run  # print the pip commands, install nothing
#
# pip's default torch wheel on Linux is the CUDA build (several GB, with its CUDA libraries).
# Where no NVIDIA GPU is present (`nvidia-smi -L` lists none) this installs torch from the
# PyTorch CPU index first; `pip install -e .` then keeps that build, which satisfies the pin
# torch==2.13.*. With a GPU, or on macOS (whose wheels are CPU builds anyway), pip's default is
# used. PSML_TORCH=cpu or PSML_TORCH=cuda overrides the detection.
set -euo pipefail
cd "$(dirname "$0")/.."

CPU_INDEX="https://download.pytorch.org/whl/cpu"
TORCH_PIN="torch==2.13.*"
dry=0
extras=""
for arg in "$@"; do
    case "$arg" in
        --dry-run) dry=1 ;;
        -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        -*) echo "error: scripts/install.sh: unknown option '$arg' (options: --dry-run, --help)" >&2; exit 2 ;;
        *) extras="${extras:+$extras,}$arg" ;;
    esac
done

build="${PSML_TORCH:-}"
why="PSML_TORCH=$build"
if [[ -z "$build" ]]; then
    if [[ "$(uname -s)" == "Darwin" ]]; then
        build="default"; why="macOS (pip's torch is a CPU build)"
    elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then
        build="cuda"; why="nvidia-smi lists a GPU"
    else
        build="cpu"; why="no NVIDIA GPU found (nvidia-smi lists none)"
    fi
fi
# An unreachable index costs pip five retries per package (minutes for torch's dependencies): ask
# once, and where the CPU index cannot be reached use pip's own configuration (its index or
# --find-links, e.g. a mirror that holds the CPU wheel), saying so.
index_reachable() {
    python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' \
        "$1/torch/" >/dev/null 2>&1
}
case "$build" in
    cpu)
        if [[ "$dry" == 1 ]] || index_reachable "$CPU_INDEX"; then
            torch_cmd=(python3 -m pip install "$TORCH_PIN" --index-url "$CPU_INDEX")
        else
            echo "psml install: $CPU_INDEX is unreachable; torch comes from pip's configured index or links (check that it is the CPU build: python -c 'import torch; print(torch.__version__)')"
            torch_cmd=(python3 -m pip install "$TORCH_PIN")
        fi
        ;;
    cuda | default) torch_cmd=() ;;
    *) echo "error: PSML_TORCH='$build': expected cpu or cuda" >&2; exit 2 ;;
esac
target="."
[[ -n "$extras" ]] && target=".[$extras]"
psml_cmd=(python3 -m pip install -e "$target")

echo "psml install: torch build '$build' ($why)"
run() {
    echo "+ $*"
    [[ "$dry" == 1 ]] || "$@"
}
if ((${#torch_cmd[@]})); then
    run "${torch_cmd[@]}"
fi
run "${psml_cmd[@]}"
