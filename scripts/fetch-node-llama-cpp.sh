#!/usr/bin/env bash
# Installs node-llama-cpp (llama.cpp's Node binding, with its CPU prebuild for linux-x64) into a cache outside the
# repository, for the tests that run exported GGUF files in llama.cpp (tests/e2e/gguf-llama-cpp.test.ts). It stays out
# of package.json: its optional CUDA and Vulkan prebuilds are large, and comlrl itself never needs it.
# COMLRL_NODE_LLAMA_CPP_DIR overrides the cache (default ~/.cache/comlrl/node-llama-cpp).
set -euo pipefail
version=3.21.1
dir="${COMLRL_NODE_LLAMA_CPP_DIR:-$HOME/.cache/comlrl/node-llama-cpp}"
if [ -f "$dir/node_modules/node-llama-cpp/package.json" ] &&
  grep -q "\"version\": \"$version\"" "$dir/node_modules/node-llama-cpp/package.json" &&
  [ -d "$dir/node_modules/@node-llama-cpp/linux-x64" ]; then
  echo "node-llama-cpp $version already in $dir"
  exit 0
fi
mkdir -p "$dir"
[ -f "$dir/package.json" ] || echo '{ "name": "comlrl-node-llama-cpp-cache", "private": true }' >"$dir/package.json"
# --omit=optional leaves out the GPU prebuilds; the CPU one is named explicitly. --ignore-scripts: its postinstall
# would offer to build llama.cpp from source, which the prebuild makes unnecessary.
(cd "$dir" && npm install --no-save --no-audit --no-fund --ignore-scripts --omit=optional -E \
  "node-llama-cpp@$version" "@node-llama-cpp/linux-x64@$version")
echo "node-llama-cpp $version installed in $dir"
