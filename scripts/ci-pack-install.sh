#!/usr/bin/env bash
# CI: comlrl as a dependency. Packs the checkout, installs the tarball into a fresh project and trains from it with
# plain node, twice: without a prebuild (the install builds the addon from source, with hoisted build tools) and with
# one (`npm run prebuild -- --from-build`; the install must pick the prebuild matching the libtorch it finds, link that
# libtorch beside it, load it and build nothing). Prints both install times. COMLRL_PACK_FROM_SOURCE=0 skips the
# first install (ci-torch2.sh: the source build is what Debian's stage already checked).
# Needs dist/ (npm run build:ts) and a native build in the checkout (for the prebuild): build/, or COMLRL_PACK_BUILD=DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
checkout=$PWD
work=$(mktemp -d)
# A prebuild already in the checkout is set aside for the run and put back after it.
[ -e prebuilds ] && mv prebuilds "$work/prebuilds.saved"
cleanup() {
  rm -rf "$checkout/prebuilds"
  if [ -e "$work/prebuilds.saved" ]; then mv "$work/prebuilds.saved" "$checkout/prebuilds"; fi
  rm -rf "$work"
}
trap cleanup EXIT

# The training script a user of the package would write: a tiny model, a 1-epoch MAGRPO run on a few items.
cat >"$work/train.mjs" <<'EOF'
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { MAGRPOTrainer, createTinyModel } from "comlrl";

const dir = mkdtempSync(path.join(tmpdir(), "comlrl-pack-"));
await createTinyModel(path.join(dir, "model"), { seed: 1, hiddenSize: 32, numLayers: 1 });
const trainer = await MAGRPOTrainer.create({
  agents: [path.join(dir, "model"), path.join(dir, "model")],
  rewardFunc: (completions) => completions[0].map((a, j) => (a.length + completions[1][j].length) % 3),
  trainDataset: [{ prompt: "one" }, { prompt: "two" }, { prompt: "three" }],
  outputDir: path.join(dir, "run"),
  quiet: true,
  config: { numTurns: 1, numTrainEpochs: 1, numGenerations: 2, maxNewTokens: 3, loggingSteps: 1, evalInterval: 0 },
});
await trainer.train();
await trainer.saveModel(path.join(dir, "out"));
await trainer.close();
console.log(`ci: trained from the installed package: ${trainer.progress.envStep} env steps`);
EOF

# pack_and_install LABEL: packs the checkout as it is now, installs it into a new project, runs train.mjs there.
pack_and_install() {
  local label=$1 project="$work/project-$1"
  mkdir -p "$project"
  local tarball
  tarball=$(npm pack --silent --pack-destination "$work" | tail -1)
  (cd "$project" && npm init -y >/dev/null && npm pkg set type=module >/dev/null)
  cp "$work/train.mjs" "$project/"
  local started=$SECONDS
  if ! (cd "$project" && npm install --no-audit --no-fund --foreground-scripts "$work/$tarball" >"$project/install.log" 2>&1); then
    tail -40 "$project/install.log"
    echo "ci: npm install of the packed comlrl ($label) failed"
    exit 1
  fi
  echo "ci: npm install comlrl ($label) took $((SECONDS - started)) s"
  grep '^comlrl: ' "$project/install.log" | sed 's/^/ci:   /'
  (cd "$project" && node train.mjs)
  rm "$work/$tarball"
}

npm run --silent build:ts
if [ "${COMLRL_PACK_FROM_SOURCE:-1}" != 0 ]; then
  pack_and_install no-prebuild
  grep -q 'building the native addon' "$work/project-no-prebuild/install.log" || { echo "ci: the install without a prebuild did not build"; exit 1; }
fi

npm run --silent prebuild -- --from-build "${COMLRL_PACK_BUILD:-build}"
# COMLRL_PACK_CUDA_BUILD=DIR: the CUDA variant built in DIR goes into the package too; the install must still pick
# the prebuild of the variant it detects.
if [ -n "${COMLRL_PACK_CUDA_BUILD:-}" ]; then COMLRL_VARIANT=cuda node scripts/prebuild.mjs --from-build "$COMLRL_PACK_CUDA_BUILD"; fi
echo "ci: prebuilds packed: $(cd prebuilds && find . -name comlrl.node | sort | tr '\n' ' ')"
pack_and_install prebuild
if grep -q 'building the native addon' "$work/project-prebuild/install.log" || [ -e "$work/project-prebuild/node_modules/comlrl/build" ]; then
  echo "ci: the install with a matching prebuild built the addon anyway"
  exit 1
fi
grep -q 'using prebuild' "$work/project-prebuild/install.log" || { echo "ci: the install did not report using the prebuild"; exit 1; }
