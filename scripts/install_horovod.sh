#!/usr/bin/env bash
# Install Horovod 0.28.1 (PyTorch + Gloo, CPU) against the torch already installed.
#
# Usage:
#   scripts/install_horovod.sh [--force] [--verify-only]
#   PYTHON=/path/to/python scripts/install_horovod.sh
#
#   --force        rebuild and reinstall even if a working Horovod 0.28.1 is found
#   --verify-only  skip the build; only run the verification steps
#
# Environment:
#   PYTHON              interpreter to install into (default: the active environment's
#                       `python`, i.e. $VIRTUAL_ENV/bin/python when a venv is active)
#   HOROVOD_BUILD_DIR   work directory for the sdist and the build tree
#                       (default: ${XDG_CACHE_HOME:-$HOME/.cache}/psml/horovod-0.28.1)
#   HOROVOD_BUILD_JOBS  parallel compile jobs (default: number of cores)
#
# Why a script: Horovod 0.28.1 (the last release, 2023) forces C++14 in its CMake
# files, and current torch headers (2.13) require C++17. This script downloads the
# sdist (sha256-pinned), patches every CMAKE_CXX_STANDARD 14 / -std=c++14 in Horovod's
# own CMake files to 17, and builds it with `pip install --no-deps --no-build-isolation`
# so that it compiles against the installed torch and can never replace it (an
# unpinned torch would pull several GB of CUDA wheels).
#
# Build configuration: Gloo controller and CPU ops, PyTorch only (no TensorFlow, MXNet,
# MPI, NCCL). Takes 3-5 minutes on 2 cores (observed: 3.3-4.2 min wall; budget up to ~20).
#
# Build requirements (not installed by this script): cmake >= 3.13, a C++17 compiler
# (g++ >= 9), make, and in the target environment: torch, setuptools >= 70.1 (or
# setuptools + wheel) and pip. Runtime requirements installed here with --no-deps if
# missing: cloudpickle, psutil, pyyaml, packaging (Horovod's install_requires, minus
# cffi, which the torch v2 extension does not use).
#
# Verification (always run at the end):
#   python -c "import horovod.torch as hvd; hvd.init(); print(hvd.size())"   -> 1
#   horovodrun --check-build                                                 -> [X] PyTorch, [X] Gloo
#   horovodrun -np 2 --gloo ... a 2-rank allreduce                           -> correct sum
set -euo pipefail

HOROVOD_VERSION="0.28.1"
HOROVOD_SDIST="horovod-${HOROVOD_VERSION}.tar.gz"
# sha256 published by PyPI for horovod-0.28.1.tar.gz.
HOROVOD_SHA256="92a43f5a94c43907a56805bad15f19700c62ffc83b7ca483f9e104e229f67ef0"

log() { printf '[install_horovod] %s\n' "$*" >&2; }
die() {
    printf '[install_horovod] ERROR: %s\n' "$*" >&2
    exit 1
}

FORCE=0
VERIFY_ONLY=0
for arg in "$@"; do
    case "$arg" in
        --force) FORCE=1 ;;
        --verify-only) VERIFY_ONLY=1 ;;
        -h | --help)
            sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *) die "unknown argument '$arg' (see --help)" ;;
    esac
done

# --------------------------------------------------------------------------- python
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -n "${VIRTUAL_ENV:-}" && -x "${VIRTUAL_ENV}/bin/python" ]]; then
        PYTHON="${VIRTUAL_ENV}/bin/python"
    else
        PYTHON="$(command -v python || command -v python3 || true)"
    fi
fi
[[ -n "${PYTHON}" && -x "$(command -v "${PYTHON}" || true)" ]] ||
    die "no python found: activate the environment or set PYTHON=/path/to/python"
PYTHON="$(command -v "${PYTHON}")"
PY_BIN_DIR="$("${PYTHON}" -c 'import os, sys; print(os.path.dirname(sys.executable))')"
log "python: ${PYTHON} ($("${PYTHON}" -c 'import sys; print(sys.version.split()[0])'))"

"${PYTHON}" -m pip --version >/dev/null 2>&1 || die "pip is not available for ${PYTHON}"

TORCH_VERSION="$("${PYTHON}" -c 'import torch; print(torch.__version__)' 2>/dev/null)" ||
    die "torch is not importable from ${PYTHON}; install torch first (Horovod compiles against it)"
log "torch: ${TORCH_VERSION}"

pip_install_nodeps() {
    # Never let pip resolve dependencies: that could replace the installed torch.
    "${PYTHON}" -m pip install --no-deps "$@"
}

# ------------------------------------------------------------------ verification
horovodrun_bin() {
    if [[ -x "${PY_BIN_DIR}/horovodrun" ]]; then
        echo "${PY_BIN_DIR}/horovodrun"
    else
        command -v horovodrun || die "horovodrun not found next to ${PYTHON} nor on PATH"
    fi
}

verify() {
    log "verify 1/3: import horovod.torch; hvd.init(); hvd.size()"
    local size
    size="$("${PYTHON}" -c 'import horovod.torch as hvd; hvd.init(); print(hvd.size())' | tail -n 1)" ||
        die "'import horovod.torch as hvd; hvd.init()' failed (see the traceback above)"
    [[ "${size}" == "1" ]] || die "hvd.size() printed '${size}', expected 1"
    echo "hvd.size() = ${size}"

    log "verify 2/3: horovodrun --check-build"
    local hr check
    hr="$(horovodrun_bin)"
    check="$(PATH="${PY_BIN_DIR}:${PATH}" "${hr}" --check-build)" || die "horovodrun --check-build failed"
    echo "${check}"
    grep -Eq '\[X\] PyTorch' <<<"${check}" || die "horovodrun --check-build: PyTorch support missing"
    grep -Eq '\[X\] Gloo' <<<"${check}" || die "horovodrun --check-build: Gloo controller missing"

    log "verify 3/3: 2-rank Gloo allreduce/allgather via horovodrun"
    local out
    out="$(PATH="${PY_BIN_DIR}:${PATH}" "${hr}" -np 2 -H localhost:2 --gloo "${PYTHON}" -c '
import torch, horovod.torch as hvd
hvd.init()
s = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum)
g = hvd.allgather(torch.zeros(hvd.rank() + 1, dtype=torch.uint8))
assert s.item() == 3.0 and g.numel() == 3, (s, g)
print("rank", hvd.rank(), "of", hvd.size(), "allreduce ok")
' 2>&1)" || {
        echo "${out}" >&2
        die "2-rank horovodrun smoke test failed"
    }
    echo "${out}"
    [[ "$(grep -c 'allreduce ok' <<<"${out}")" == "2" ]] || die "2-rank smoke test: not both ranks reported"
    log "Horovod ${HOROVOD_VERSION} verified for ${PYTHON}"
}

installed_version() {
    "${PYTHON}" -c 'import horovod; print(horovod.__version__)' 2>/dev/null || true
}

if [[ "${VERIFY_ONLY}" == "1" ]]; then
    verify
    exit 0
fi

if [[ "${FORCE}" == "0" && "$(installed_version)" == "${HOROVOD_VERSION}" ]] &&
    "${PYTHON}" -c 'import horovod.torch as hvd; assert hvd.gloo_built()' >/dev/null 2>&1; then
    log "Horovod ${HOROVOD_VERSION} with torch+gloo already installed (use --force to rebuild)"
    verify
    exit 0
fi

# ------------------------------------------------------------------ preflight
command -v cmake >/dev/null || die "cmake not found (need >= 3.13; e.g. apt-get install cmake)"
CMAKE_VERSION="$(cmake --version | sed -n 's/^cmake version \([0-9.]*\).*/\1/p')"
"${PYTHON}" - "${CMAKE_VERSION}" <<'EOF' || die "cmake ${CMAKE_VERSION} is too old: Horovod needs >= 3.13"
import sys
v = tuple(int(x) for x in sys.argv[1].split(".")[:2])
sys.exit(0 if v >= (3, 13) else 1)
EOF
CXX="${CXX:-g++}"
command -v "${CXX}" >/dev/null || die "C++ compiler '${CXX}' not found (e.g. apt-get install g++)"
command -v make >/dev/null || die "make not found (e.g. apt-get install make)"
echo 'int main() { if constexpr (true) return 0; }' | "${CXX}" -std=c++17 -x c++ -o /dev/null - ||
    die "${CXX} cannot compile C++17"
"${PYTHON}" - <<'EOF' || die "setuptools >= 70.1 (or setuptools + wheel) is required in ${PYTHON}'s environment for --no-build-isolation"
import importlib.util, sys
import setuptools
from packaging.version import Version
ok = Version(setuptools.__version__) >= Version("70.1") or importlib.util.find_spec("wheel")
sys.exit(0 if ok else 1)
EOF

for mod_pkg in cloudpickle:cloudpickle psutil:psutil yaml:pyyaml packaging:packaging; do
    mod="${mod_pkg%%:*}"
    pkg="${mod_pkg##*:}"
    if ! "${PYTHON}" -c "import ${mod}" >/dev/null 2>&1; then
        log "installing runtime dependency ${pkg} (--no-deps)"
        pip_install_nodeps "${pkg}" || die "pip could not install ${pkg}"
    fi
done

# ------------------------------------------------------------------ download
BUILD_DIR="${HOROVOD_BUILD_DIR:-${XDG_CACHE_HOME:-${HOME}/.cache}/psml/horovod-${HOROVOD_VERSION}}"
mkdir -p "${BUILD_DIR}"
BUILD_DIR="$(cd "${BUILD_DIR}" && pwd)"
log "build directory: ${BUILD_DIR}"

sdist_ok() {
    [[ -f "${BUILD_DIR}/${HOROVOD_SDIST}" ]] &&
        [[ "$(sha256sum "${BUILD_DIR}/${HOROVOD_SDIST}" | cut -d' ' -f1)" == "${HOROVOD_SHA256}" ]]
}
if ! sdist_ok; then
    rm -f "${BUILD_DIR}/${HOROVOD_SDIST}"
    log "downloading ${HOROVOD_SDIST}"
    "${PYTHON}" -m pip download --no-deps --no-binary :all: "horovod==${HOROVOD_VERSION}" \
        -d "${BUILD_DIR}" || die "pip download of horovod==${HOROVOD_VERSION} failed"
    sdist_ok || die "${HOROVOD_SDIST}: missing or sha256 mismatch (expected ${HOROVOD_SHA256})"
fi
log "sdist sha256 ok"

# ------------------------------------------------------------------ unpack + patch
SRC_DIR="${BUILD_DIR}/horovod-${HOROVOD_VERSION}"
rm -rf "${SRC_DIR}"
tar -xzf "${BUILD_DIR}/${HOROVOD_SDIST}" -C "${BUILD_DIR}"
[[ -f "${SRC_DIR}/setup.py" ]] || die "unexpected sdist layout: ${SRC_DIR}/setup.py missing"

# Horovod's own CMake files (third_party/ is left alone: gloo is built as C++11 and
# never includes torch headers; eigen/flatbuffers only mention 14 in unused examples).
CXX14_PATTERN='CMAKE_CXX_STANDARD[[:space:]]+14|-std=c\+\+14'
# Print Horovod's CMake files that match CXX14_PATTERN (grep "$1": -l names, -n lines).
cmake_cxx14() {
    (cd "${SRC_DIR}" &&
        find . -path ./third_party -prune -o \( -name CMakeLists.txt -o -name '*.cmake' \) -print0 |
        xargs -0 grep "$1" -E "${CXX14_PATTERN}") || true
}
mapfile -t TO_PATCH < <(cmake_cxx14 -l)
[[ "${#TO_PATCH[@]}" -ge 2 ]] ||
    die "expected >= 2 CMake files forcing C++14 (CMakeLists.txt, horovod/torch/CMakeLists.txt), found ${#TO_PATCH[@]}: ${TO_PATCH[*]:-none}"
for f in "${TO_PATCH[@]}"; do
    log "patching C++14 -> C++17 in ${f#./}"
    sed -i -E \
        -e 's/(CMAKE_CXX_STANDARD[[:space:]]+)14/\117/g' \
        -e 's/-std=c\+\+14/-std=c++17/g' \
        "${SRC_DIR}/${f}"
done
REMAINING="$(cmake_cxx14 -n)"
[[ -z "${REMAINING}" ]] || die "C++14 settings remain after patching:
${REMAINING}"
grep -q 'set(CMAKE_CXX_STANDARD 17)' "${SRC_DIR}/CMakeLists.txt" ||
    die "patch check failed: CMakeLists.txt does not set CMAKE_CXX_STANDARD 17"
grep -q 'set(CMAKE_CXX_STANDARD 17)' "${SRC_DIR}/horovod/torch/CMakeLists.txt" ||
    die "patch check failed: horovod/torch/CMakeLists.txt does not set CMAKE_CXX_STANDARD 17"
log "C++17 patch applied to ${#TO_PATCH[@]} file(s)"

# ------------------------------------------------------------------ build + install
JOBS="${HOROVOD_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"
export HOROVOD_WITH_PYTORCH=1
export HOROVOD_WITHOUT_TENSORFLOW=1
export HOROVOD_WITHOUT_MXNET=1
export HOROVOD_WITHOUT_MPI=1
export HOROVOD_WITH_GLOO=1
export HOROVOD_CPU_OPERATIONS=gloo
export HOROVOD_WITHOUT_NVTX=1
unset HOROVOD_GPU HOROVOD_GPU_OPERATIONS HOROVOD_GPU_ALLREDUCE HOROVOD_GPU_BROADCAST HOROVOD_GPU_ALLGATHER HOROVOD_WITH_MPI || true
export MAKEFLAGS="-j${JOBS}" # setup.py otherwise hard-codes -j8
export CXX

log "building Horovod ${HOROVOD_VERSION} (${JOBS} jobs; a few minutes)"
start=$(date +%s)
pip_install_nodeps --no-build-isolation --no-cache-dir --use-pep517 -v "${SRC_DIR}" ||
    die "building/installing Horovod failed (scroll up for the first compiler/cmake error)"
log "build + install took $(($(date +%s) - start)) s"

[[ "$(installed_version)" == "${HOROVOD_VERSION}" ]] ||
    die "after install, 'import horovod' reports '$(installed_version)', expected ${HOROVOD_VERSION}"
[[ "$("${PYTHON}" -c 'import torch; print(torch.__version__)')" == "${TORCH_VERSION}" ]] ||
    die "torch changed during the install (was ${TORCH_VERSION}); reinstall it"

verify
