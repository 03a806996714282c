#!/usr/bin/env bash
# The GPU check, one command, for a machine with an NVIDIA GPU, PyTorch with CUDA (python3), cmake and ninja, and no
# network. Builds the addon there against that PyTorch's libtorch (CUDA variant, all cores), then runs
# scripts/gpu-check.mjs under a 480 s limit: runtimeInfo in a fresh process, DDP with 2 ranks on one machine, every
# golden family's padded logits (eager and SDPA), the SDPA kernel chosen, the model core and every loss's gradients
# against the CPU, one AdamW step, ragged and shared-prompt batches, greedy and sampled tokens/s beside transformers,
# load cost, device memory per phase, two lanes on one GPU, seeded repeats (deterministic opt-in), the trainers' demo
# epochs, NCCL in a 1-rank group, round trips, a leak run, matmul and copy ceilings (TF32 opt-in) and the negative
# cases. Every row is PASS, FAIL or SKIP with its reason, written to gpu-check.json in $OUT (or the checkout) as it
# ends. Budget: < 8 minutes after the build on 16 cores.
#
# Such a machine has no Node and no npm registry; prepare what it needs here with
#   bash scripts/gpu-check.sh pack
# which writes .gpu/ (ignored by git; carry it and dist/ with the checkout): Node's binary (xz), and the runtime npm
# packages plus node-addon-api/node-api-headers for the build.
#
#   GPU_CHECK_DEVICE=cpu bash scripts/gpu-check.sh   the same checks on the CPU, against the addon built here
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS

if [ "${1:-}" = pack ]; then
  rm -rf .gpu && mkdir -p .gpu/node_modules
  xz -T0 -6 -c "$(readlink -f "$(command -v node)")" >.gpu/node.xz
  # The packages dist/ imports at run time, and the two the build reads headers from, with their dependencies.
  packages=$(node -e '
    const seen = new Set();
    const visit = (name) => {
      if (seen.has(name)) return;
      seen.add(name);
      const manifest = require(`./node_modules/${name}/package.json`);
      for (const dep of Object.keys(manifest.dependencies ?? {})) visit(dep);
    };
    const own = require("./package.json");
    for (const dep of Object.keys(own.dependencies)) if (dep !== "cmake-js") visit(dep);
    console.log([...seen].join(" "));')
  for package in $packages; do
    mkdir -p ".gpu/node_modules/$(dirname "$package")"
    cp -rL "node_modules/$package" ".gpu/node_modules/$package"
  done
  [ -d dist ] || npm run --silent build:ts
  echo "gpu-check: packed .gpu ($(du -sh .gpu | cut -f1)); carry .gpu and dist with the checkout"
  exit 0
fi

device=${GPU_CHECK_DEVICE:-cuda:0}
out=${OUT:-$PWD}
if [ "$device" = cpu ]; then
  addon=build/Release/comlrl.node
else
  # Node: the one on PATH, else the one carried in .gpu/.
  if ! command -v node >/dev/null; then
    [ -f .gpu/node.xz ] || { echo "gpu-check: no node on PATH and no .gpu/node.xz (run 'bash scripts/gpu-check.sh pack' where Node is)"; exit 1; }
    mkdir -p .gpu/bin && xz -dc .gpu/node.xz >.gpu/bin/node && chmod +x .gpu/bin/node
    export PATH="$PWD/.gpu/bin:$PATH"
  fi
  [ -e node_modules ] || ln -s .gpu/node_modules node_modules
  [ -f dist/index.js ] || { echo "gpu-check: dist/ is missing (npm run build:ts here, carry dist)"; exit 1; }
  python3 -c "import torch; assert torch.cuda.is_available(), 'torch sees no GPU'; print('gpu-check: torch', torch.__version__, torch.cuda.get_device_name(0))"
  node scripts/find-libtorch.mjs --field variant | grep -qx cuda || { echo "gpu-check: python3's torch is not a usable CUDA libtorch:"; node scripts/find-libtorch.mjs; exit 1; }
  build_started=$SECONDS
  COMLRL_VARIANT=cuda cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_JS_INC="$PWD/node_modules/node-api-headers/include" -DCMAKE_CXX_FLAGS=-DBUILDING_NODE_EXTENSION \
    -DCMAKE_LIBRARY_OUTPUT_DIRECTORY="$PWD/build-gpu/Release" >build-gpu.log 2>&1 || { tail -40 build-gpu.log; exit 1; }
  cmake --build build-gpu -j "$(nproc)" >>build-gpu.log 2>&1 || { grep -B2 -A12 'error' build-gpu.log | head -60; exit 1; }
  echo "gpu-check: addon built in $((SECONDS - build_started)) s on $(nproc) cores"
  addon=build-gpu/Release/comlrl.node
fi
echo "gpu-check: built against libtorch $(node scripts/find-libtorch.mjs --field version) ($(node scripts/find-libtorch.mjs --field variant))"
status=0
COMLRL_ADDON="$PWD/$addon" timeout 480 node scripts/gpu-check.mjs "$device" "$out/gpu-check.json" || status=$?
# Every row PASS or SKIP with a reason; a run cut short by the limit has fewer rows than the script holds.
node -e '
  const { rows } = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const bad = rows.filter((r) => r.status !== "PASS" && !(r.status === "SKIP" && r.detail));
  console.log(`gpu-check: ${rows.length} rows, ${rows.filter((r) => r.status === "PASS").length} PASS, ${rows.filter((r) => r.status === "SKIP").length} SKIP, ${bad.length} other`);
  process.exit(bad.length ? 1 : 0);
' "$out/gpu-check.json" || status=1
[ "$status" -eq 124 ] && echo "gpu-check: stopped at the 480 s limit"
echo "gpu-check: total $((SECONDS - started)) s"
exit "$status"
