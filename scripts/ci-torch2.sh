#!/usr/bin/env bash
# CI: PyPI's torch 2.x next to Debian's, in two versions: 2.11.0 (the GPU machine's) and the newest. For each, the
# smallest honest set of wheels is downloaded once into ~/.cache/comlrl-wheels and unpacked into
# ~/.cache/comlrl-torch/<version> (reused by later runs): the torch wheel without its dependencies; the CUDA runtime,
# CUPTI, CRT and CCCL wheels (libtorch_cpu.so NEEDS cudart and cupti; cuda_runtime.h includes crt/, cuda_fp16.h CCCL's
# nv/target); and only the headers of the cuBLAS, cuSPARSE, cuSOLVER and NCCL wheels, which ProcessGroupNCCL.hpp
# includes, at the versions that torch pins. Then:
#   1. compiles and links the CUDA variant WITH its NCCL process group (COMLRL_NCCL=ON) against each (no GPU and no
#      nvcc needed; libtorch_cuda's own libraries are not needed to link a shared object). The 2.11 build is stored
#      as the prebuild the GPU check carries (.gpu/prebuilds, scripts/gpu-check.sh). It cannot be loaded here:
#      libtorch_cuda.so NEEDS cuBLAS, cuDNN, ... (3 GB);
#   2. builds the CPU variant against the newest into build-torch2/ (build/ keeps Debian's) and runs the native,
#      golden and end-to-end tests on it;
#   3. packs the package with both prebuilds of the newest (cpu and cuda) and installs it into a fresh project, which
#      must pick the cpu one, load it without a compiler run and train from it.
# Compiles go through ccache when it is installed. Prints how long each step took, and the CPU seconds of the builds
# and tests (the honest number on a shared machine). .ci/run runs it before the full suite on Debian's libtorch,
# whose summary line is the one CI reads.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
wheels=${COMLRL_WHEEL_CACHE:-$HOME/.cache/comlrl-wheels}
sites=${COMLRL_TORCH_CACHE:-$HOME/.cache/comlrl-torch}
# pip, in a venv of its own (Debian's python3 has none outside one).
venv=${COMLRL_TORCH2_VENV:-$HOME/.cache/comlrl-pip}

step() { echo "ci: torch2: $1 ($((SECONDS - started)) s so far)"; }

# timed LABEL COMMAND...: runs it and prints its wall time and CPU seconds (user + sys, its children included).
timed() {
  local TIMEFORMAT="ci: torch2: $1: %0R s wall, %0U + %0S s CPU"
  shift
  time "$@"
}

if [ ! -x "$venv/bin/pip" ]; then
  step "a venv for pip"
  if ! python3 -c "import ensurepip" 2>/dev/null; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
  fi
  python3 -m venv "$venv"
fi
mkdir -p "$wheels" "$sites"

# download ARGS...: pip download into the wheel cache (a wheel already there is not fetched again); its log is shown
# on failure only.
download() {
  "$venv/bin/pip" download -q --progress-bar off -d "$wheels" "$@" >"$wheels.log" 2>&1 || { cat "$wheels.log"; exit 1; }
}

# torch_site SPEC: downloads torch (SPEC: "torch==2.11.0", or "torch" for the newest) and the CUDA wheels it pins
# (into a folder per version), unpacks them into $sites/<version> once, and prints that torch's folder (what LIBTORCH
# takes).
torch_site() {
  download --no-deps "$1"
  local wheel
  if [ "$1" = torch ]; then
    wheel=$(find "$wheels" -maxdepth 1 -name 'torch-*.whl' | sort -V | tail -1)
  else
    wheel=$(find "$wheels" -maxdepth 1 -name "torch-${1#torch==}-*.whl" | head -1)
  fi
  local version
  version=$(basename "$wheel" | cut -d- -f2)
  local site=$sites/$version
  if [ ! -e "$site/.complete" ]; then
    # The CUDA toolkit and NCCL versions this torch was built with: its cuda-toolkit[...]==X and nvidia-nccl-*==Y.
    local pins
    pins=$(python3 -c 'import sys, zipfile; sys.stdout.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]).decode())' "$wheel" "torch-$version.dist-info/METADATA" | python3 -c '
import sys
requires = [line.split(":", 1)[1].split(";")[0].strip() for line in sys.stdin if line.startswith("Requires-Dist:")]
toolkit = next(r for r in requires if r.startswith("cuda-toolkit["))
nccl = next(r for r in requires if r.startswith("nvidia-nccl"))
print("cuda-toolkit[cudart,cupti,crt,cccl,cublas,cusparse,cusolver]" + toolkit.split("]", 1)[1].replace(" ", ""), nccl.replace(" ", ""))')
    local cuda=$wheels/cuda-for-torch-$version
    mkdir -p "$cuda"
    # shellcheck disable=SC2086 # two requirement specifiers
    "$venv/bin/pip" download -q --progress-bar off -d "$cuda" $pins >"$wheels.log" 2>&1 || { cat "$wheels.log"; exit 1; }
    rm -rf "$site" && mkdir -p "$site"
    # torch without what linking the addon never reads; the CUDA runtime, CUPTI, CRT and CCCL wheels whole
    # (libraries and headers); the cuBLAS, cuSPARSE, cuSOLVER and NCCL wheels' headers only.
    python3 - "$site" "$wheel" "$cuda"/*.whl <<'EOF'
import os, re, sys, zipfile
site, *wheels = sys.argv[1:]
for wheel in wheels:
    name = os.path.basename(wheel)
    if name.startswith("torch-"):
        keep = lambda member: not re.match(r"torch/lib/lib(torch_cuda_linalg|torch_python)", member)
    elif re.match(r"nvidia_cuda_(runtime|cupti|crt|cccl)-", name):
        keep = lambda member: member.startswith("nvidia/")
    elif re.match(r"nvidia_(cublas|cusparse|cusolver|nccl_cu\d+)-", name):
        keep = lambda member: re.match(r"nvidia/[^/]+/include/", member) is not None
    else:
        continue
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site, [member for member in archive.namelist() if keep(member)])
EOF
    touch "$site/.complete"
  fi
  echo "$site/torch"
}

# build DIR: a fresh cmake-js build of the variant COMLRL_VARIANT (default: what the libtorch offers) into DIR, through
# ccache when it is installed; its log is shown on failure.
launcher=()
if command -v ccache >/dev/null; then
  # A precompiled header is cacheable when ccache may ignore its timestamps and defines.
  export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
  launcher=(--CDCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
build() {
  local dir=$1
  shift
  npx cmake-js rebuild --out "$dir" "${launcher[@]}" "$@" >"$dir.log" 2>&1 || { tail -60 "$dir.log"; exit 1; }
}

# cuda_build SITE DIR: the CUDA variant with NCCL against SITE's torch into DIR, checked: it links libtorch_cuda, and
# its process group calls into ProcessGroupNCCL (the NCCL half was compiled, not left out).
cuda_build() {
  LIBTORCH=$1 COMLRL_VARIANT=cuda timed "CUDA variant with NCCL against $(basename "$(dirname "$1")")" build "$2" --CDCOMLRL_NCCL=ON
  [[ $(readelf -d "$2/Release/comlrl.node") == *libtorch_cuda.so* ]] || { echo "ci: torch2: $2: the CUDA variant does not link libtorch_cuda"; exit 1; }
  # Captured whole, not piped into grep -q: under pipefail nm's SIGPIPE, once grep has its match, would fail the check.
  [[ $(nm -D --undefined-only "$2/Release/comlrl.node") == *ProcessGroupNCCL* ]] || { echo "ci: torch2: $2: no NCCL process group in the CUDA variant"; exit 1; }
}

step "torch 2.11.0 (the GPU machine's) and the newest, with their CUDA headers (cached in $wheels and $sites)"
wheels_started=$SECONDS
gpu_torch=$(torch_site "torch==2.11.0")
newest_torch=$(torch_site torch)
echo "ci: torch2: wheels ready in $((SECONDS - wheels_started)) s ($(du -sh "$wheels" | cut -f1) downloaded, $(du -sh "$sites" | cut -f1) unpacked)"
step "torch $(LIBTORCH=$gpu_torch node scripts/find-libtorch.mjs --field version) and $(LIBTORCH=$newest_torch node scripts/find-libtorch.mjs --field version) unpacked"

step "compiling the CUDA variant with NCCL against 2.11.0 into build-cuda-2.11/, stored as the GPU check's prebuild"
cuda_build "$gpu_torch" build-cuda-2.11
LIBTORCH=$gpu_torch COMLRL_VARIANT=cuda node scripts/prebuild.mjs --from-build build-cuda-2.11 --out .gpu

step "compiling the CUDA variant with NCCL against the newest into build-cuda/"
cuda_build "$newest_torch" build-cuda
export LIBTORCH=$newest_torch

step "building the CPU variant into build-torch2/ (build/ keeps Debian's)"
COMLRL_VARIANT=cpu timed "CPU variant built" build build-torch2
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
