#!/usr/bin/env bash
# CI: the second libtorch, PyPI's torch 2.x, next to Debian's. Installs the smallest honest set for it into a venv
# (the torch wheel without its dependencies, plus the CUDA runtime and CUPTI wheels that libtorch_cpu.so NEEDS and
# the CUDA C runtime headers wheel that cuda_runtime.h includes: 0.55 GB of downloads instead of ≈ 4 GB), then
#   1. compiles and links the CUDA variant (COMLRL_VARIANT=cuda; no GPU and no nvcc needed), without its NCCL
#      process group: ProcessGroupNCCL.hpp pulls in cuBLAS/cuSPARSE/cuSOLVER headers, which ship only inside
#      those libraries' wheels (≈ 1 GB more); that part is compiled where the full wheel set is (a developer's
#      venv, scripts/gpu-check.sh). It cannot be loaded here: libtorch_cuda.so NEEDS cuBLAS, cuDNN, ... (3 GB);
#   2. builds the CPU variant against the wheel into build-torch2/ (build/ keeps Debian's) and runs the native,
#      golden and end-to-end tests on it;
#   3. packs the package with both prebuilds (cpu and cuda for this torch) and installs it into a fresh project,
#      which must pick the cpu one, load it without a compiler run and train from it.
# Prints how long each step took, and the CPU seconds of the builds and tests (the honest number on a shared
# machine). .ci/run runs it before the full suite on Debian's libtorch, whose summary line is the one CI reads.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
venv=${COMLRL_TORCH2_VENV:-/tmp/comlrl-torch2}

step() { echo "ci: torch2: $1 ($((SECONDS - started)) s so far)"; }

if [ ! -x "$venv/bin/python" ]; then
  step "installing PyPI's torch without dependencies"
  if ! python3 -c "import ensurepip" 2>/dev/null; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
  fi
  python3 -m venv "$venv"
  # pip's resolver complains at length about the dependencies left out on purpose: its log is shown on failure only.
  "$venv/bin/pip" install -q --no-cache-dir --no-deps torch >"$venv.log" 2>&1 || { cat "$venv.log"; exit 1; }
  # The CUDA runtime wheels at the versions this torch was built with (its cuda-toolkit requirement pins them).
  toolkit=$("$venv/bin/python" -c "
from importlib.metadata import requires
print(next(r.split(';')[0].split('[')[0] + r.split(';')[0].split(']')[1] for r in requires('torch') if r.startswith('cuda-toolkit[')))")
  "$venv/bin/pip" install -q --no-cache-dir "${toolkit/cuda-toolkit/cuda-toolkit[cudart,cupti,crt]}" >>"$venv.log" 2>&1 ||
    { cat "$venv.log"; exit 1; }
fi
export PATH="$venv/bin:$PATH"
node scripts/find-libtorch.mjs --field version >/dev/null
step "libtorch $(node scripts/find-libtorch.mjs --field version) ($(node scripts/find-libtorch.mjs --field variant)) from $(node scripts/find-libtorch.mjs --field libDir)"

# timed LABEL COMMAND...: runs it and prints its wall time and CPU seconds (user + sys, its children included).
timed() {
  local TIMEFORMAT="ci: torch2: $1: %0R s wall, %0U + %0S s CPU"
  shift
  time "$@"
}
# build DIR: a fresh cmake-js build of the variant COMLRL_VARIANT (default: what the libtorch offers) into DIR; its log
# is shown on failure.
build() {
  npx cmake-js rebuild --out "$1" >"$1.log" 2>&1 || { tail -60 "$1.log"; exit 1; }
}

step "compiling the CUDA variant into build-cuda/"
COMLRL_VARIANT=cuda timed "CUDA variant built" build build-cuda
[[ $(readelf -d build-cuda/Release/comlrl.node) == *libtorch_cuda.so* ]] || { echo "ci: torch2: the CUDA variant does not link libtorch_cuda"; exit 1; }

step "building the CPU variant into build-torch2/ (build/ keeps Debian's)"
timed "CPU variant built" build build-torch2
addon=$PWD/build-torch2/Release/comlrl.node
COMLRL_ADDON=$addon node --input-type=module -e "
  const { runtimeInfo } = await import('./dist/index.js');
  const info = runtimeInfo();
  console.log('ci: torch2: addon loads: libtorch ' + info.torchVersion + ', cuda compiled ' + info.cudaCompiled + ', ' + info.blas);
"

step "native, golden and end-to-end tests on libtorch 2.x"
# The tests load build/ (the loader's own tests check exactly that, so COMLRL_ADDON will not do): Debian's build/ is
# set aside for them and put back after, whatever happens.
restore() {
  mv build build-torch2
  if [ -e build-debian ]; then mv build-debian build; fi
}
trap restore EXIT
[ -e build ] && mv build build-debian
mv build-torch2 build
# The line CI reads ("N passed, N failed, N skipped") comes from the full suite on Debian's libtorch, run after this
# script; this one is relabelled so that it cannot be mistaken for it.
timed "tests" npm test -- tests/native tests/golden tests/e2e 2>&1 |
  sed -E 's/^([0-9]+ passed, [0-9]+ failed)/ci: torch2 tests: \1/'
restore
trap - EXIT

step "npm pack with a prebuild for libtorch 2.x, installed into a fresh project"
COMLRL_PACK_FROM_SOURCE=0 COMLRL_PACK_BUILD=build-torch2 COMLRL_PACK_CUDA_BUILD=build-cuda \
  timed "pack and install" bash scripts/ci-pack-install.sh
step "done"
