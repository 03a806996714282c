#!/usr/bin/env bash
# The GPU check, one command, for a machine with an NVIDIA GPU, PyTorch with CUDA (python3), cmake and ninja, and no
# network, that kills the command at 600 s: whatever happens, a table comes back by 570 s. In $OUT (or the checkout),
# first: nvidia-smi.txt, torch-config.txt, then build-gpu.log and ldd.txt of the addon, then gpu-check.json row by row.
#
# The addon: the prebuild carried in .gpu/prebuilds when it matches python3's torch (made by CI's torch 2.11 stage,
# scripts/ci-torch2.sh), else built here with COMLRL_NCCL=ON and, when that fails, once more with COMLRL_NCCL=OFF
# (process_group.cc alone is recompiled; the NCCL row then SKIPs with the reason). Then scripts/gpu-check.mjs runs its
# rows under `timeout $((570 - SECONDS))`, cheap correctness first, DDP and the transformers comparisons last; a row
# whose estimate exceeds the time left SKIPs.
#
# Such a machine has no Node and no npm registry; prepare what it needs here with
#   bash scripts/gpu-check.sh pack
# which rebuilds dist/ and writes .gpu/ (ignored by git; carry .gpu and dist with the checkout): Node's binary (xz),
# the runtime npm packages plus node-addon-api/node-api-headers for a build, and keeps .gpu/prebuilds. It prints the
# size the device run will carry (limit 64 MiB).
#
#   GPU_CHECK_DEVICE=cpu bash scripts/gpu-check.sh   the same rows on the CPU, against build/ (what CI runs)
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
limit=570

if [ "${1:-}" = pack ]; then
  npm run --silent build:ts
  rm -rf .gpu/node_modules .gpu/bin && mkdir -p .gpu/node_modules
  node_binary=$(readlink -f "$(command -v node)")
  [ .gpu/node.xz -nt "$node_binary" ] || xz -T0 -6 -c "$node_binary" >.gpu/node.xz
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
  # Types, source maps and documents are never run: 2 MB of the 64 MiB the device run may carry.
  find .gpu/node_modules \( -name '*.map' -o -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -name '*.md' \) -type f -delete
  carried=$(( ($(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1) + $(du -sb .gpu dist | awk '{s += $1} END {print s}')) / 1048576 ))
  prebuilt=$(cd .gpu && { find prebuilds -name comlrl.node 2>/dev/null || true; } | tr '\n' ' ')
  echo "gpu-check: packed .gpu ($(du -sh .gpu | cut -f1); prebuilds: ${prebuilt:-none}); the device run carries ${carried} MiB (tracked files, .gpu, dist; limit 64)"
  [ "$carried" -le 64 ] || { echo "gpu-check: over the 64 MiB limit"; exit 1; }
  exit 0
fi

device=${GPU_CHECK_DEVICE:-cuda:0}
out=${OUT:-$PWD}
mkdir -p "$out"

# addon_from_prebuild: the carried prebuild, when install.mjs finds it matches python3's torch (version, variant,
# NCCL) and it loads; prints its path.
addon_from_prebuild() {
  [ -d .gpu/prebuilds ] || return 1
  rm -rf prebuilds && cp -r .gpu/prebuilds prebuilds
  COMLRL_PREBUILD_ONLY=1 node scripts/install.mjs >>"$out/build-gpu.log" 2>&1 || return 1
  node -p 'const p = require("path"); const dir = p.join("prebuilds", `${process.platform}-${process.arch}`); p.resolve(dir, require(`./${dir}/selected.json`).prebuild, "comlrl.node")'
}

# build_addon NCCL: configures and builds build-gpu/ with COMLRL_NCCL=NCCL (all cores), its output in build-gpu.log.
build_addon() {
  echo "gpu-check: building with COMLRL_NCCL=$1" >>"$out/build-gpu.log"
  COMLRL_VARIANT=cuda cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOMLRL_NCCL="$1" \
    -DCMAKE_JS_INC="$PWD/node_modules/node-api-headers/include" -DCMAKE_CXX_FLAGS=-DBUILDING_NODE_EXTENSION \
    -DCMAKE_LIBRARY_OUTPUT_DIRECTORY="$PWD/build-gpu/Release" >>"$out/build-gpu.log" 2>&1 &&
    cmake --build build-gpu -j "$(nproc)" >>"$out/build-gpu.log" 2>&1
}

if [ "$device" = cpu ]; then
  addon=$PWD/build/Release/comlrl.node
else
  nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || true
  python3 -c "import torch; print(torch.__version__); print(torch.__config__.show())" >"$out/torch-config.txt" 2>&1 || true
  # Node: the one on PATH, else the one carried in .gpu/ (xz, or Python's lzma where xz is missing).
  if ! command -v node >/dev/null; then
    [ -f .gpu/node.xz ] || { echo "gpu-check: no node on PATH and no .gpu/node.xz (run 'bash scripts/gpu-check.sh pack' where Node is)"; exit 1; }
    mkdir -p .gpu/bin
    if command -v xz >/dev/null; then xz -dc .gpu/node.xz >.gpu/bin/node; else python3 -c "import lzma, sys; sys.stdout.buffer.write(lzma.open('.gpu/node.xz').read())" >.gpu/bin/node; fi
    chmod +x .gpu/bin/node
    export PATH="$PWD/.gpu/bin:$PATH"
  fi
  [ -e node_modules ] || ln -s .gpu/node_modules node_modules
  [ -f dist/index.js ] || { echo "gpu-check: dist/ is missing (run 'bash scripts/gpu-check.sh pack' here, carry dist)"; exit 1; }
  python3 -c "import torch; assert torch.cuda.is_available(), 'torch sees no GPU'; print('gpu-check: torch', torch.__version__, torch.cuda.get_device_name(0))"
  node scripts/find-libtorch.mjs >>"$out/build-gpu.log" 2>&1 || true
  node scripts/find-libtorch.mjs --field variant | grep -qx cuda || { echo "gpu-check: python3's torch is not a usable CUDA libtorch:"; node scripts/find-libtorch.mjs; exit 1; }
  build_started=$SECONDS
  if addon=$(addon_from_prebuild); then
    echo "gpu-check: using the carried prebuild $addon"
  else
    addon=$PWD/build-gpu/Release/comlrl.node
    if build_addon ON; then
      echo "gpu-check: addon built with NCCL in $((SECONDS - build_started)) s on $(nproc) cores"
    else
      echo "gpu-check: the build with NCCL failed; its errors (all in build-gpu.log):"
      grep -B2 -A12 'error' "$out/build-gpu.log" | head -40 || true
      build_addon OFF || { grep -B2 -A12 'error' "$out/build-gpu.log" | tail -60; exit 1; }
      echo "gpu-check: addon built WITHOUT NCCL in $((SECONDS - build_started)) s"
    fi
  fi
  ldd "$addon" >"$out/ldd.txt" 2>&1 || true
  if grep -q "not found" "$out/ldd.txt"; then echo "gpu-check: the addon's libraries are not all found:"; grep "not found" "$out/ldd.txt"; fi
fi
echo "gpu-check: libtorch $(node scripts/find-libtorch.mjs --field version) ($(node scripts/find-libtorch.mjs --field variant)); rows start at $((SECONDS - started)) s, $((limit - SECONDS)) s left"
status=0
# The rows' own deadline leaves 10 s before the limit for the summary; timeout is the backstop.
COMLRL_ADDON="$addon" GPU_CHECK_DEADLINE=$(($(date +%s) + limit - SECONDS - 10)) \
  timeout $((limit - SECONDS)) node scripts/gpu-check.mjs "$device" "$out/gpu-check.json" || status=$?
[ "$status" -eq 124 ] && echo "gpu-check: stopped at the ${limit} s limit"
# Every row PASS or SKIP with a reason.
node -e '
  const { rows } = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const bad = rows.filter((r) => r.status !== "PASS" && !(r.status === "SKIP" && r.detail));
  console.log(`gpu-check: ${rows.length} rows, ${rows.filter((r) => r.status === "PASS").length} PASS, ${rows.filter((r) => r.status === "SKIP").length} SKIP, ${bad.length} other`);
  process.exit(bad.length ? 1 : 0);
' "$out/gpu-check.json" || status=1
echo "gpu-check: total $((SECONDS - started)) s"
exit "$status"
