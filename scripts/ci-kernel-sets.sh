#!/usr/bin/env bash
# CI: the learning and golden tests a second time under CPU kernel sets other than the machine's own, so that a
# learning recipe or a golden tolerance that holds only on one CPU model fails here first, not on a user's machine.
# libtorch picks its vectorized kernels (ATen's "CPU capability") and OpenBLAS its core type from the CPU it runs on;
# ATEN_CPU_CAPABILITY and OPENBLAS_CORETYPE make them those of another CPU:
#   default   ATen's unvectorized kernels, OpenBLAS's Prescott (SSE3) core: any x86-64 CPU
#   avx512    ATen's AVX-512 kernels, OpenBLAS's SkylakeX core: only where the CPU has AVX-512 (read from
#             /proc/cpuinfo), since it cannot run them otherwise
# The learning tests (the assertions that a reward rises) run filtered by name; each reports its rise into a file,
# listed at the end of each kernel set. Each set's summary line is labelled "ci: kernel-set NAME:", so that the only
# bare "N passed, N failed, N skipped" line of a CI run stays the full suite's. docs/troubleshooting.md says how to
# rerun a test under a kernel set by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS

learning_files=(
  tests/e2e/magrpo.test.ts
  tests/e2e/actor-critic-learning.test.ts
  tests/e2e/objectives.test.ts
  tests/e2e/dropout.test.ts
  tests/e2e/madpo.test.ts
  tests/e2e/iterative-madpo.test.ts
  tests/e2e/marlhf.test.ts
)
learning_tests="learn|raises the|rises|rising|climbs"
# The rises those tests report (tests/support/learning.ts): fewer means a renamed test slipped past the filter.
expected_rises=15
golden_files=(tests/golden tests/native/sampling-golden.test.ts)

kernel_sets=("default Prescott")
if grep -qw avx512f /proc/cpuinfo; then kernel_sets+=("avx512 SkylakeX"); fi

margins=$(mktemp)
trap 'rm -f "$margins"' EXIT
failed=0
for kernel_set in "${kernel_sets[@]}"; do
  read -r capability coretype <<<"$kernel_set"
  stage=$SECONDS
  : >"$margins"
  echo "ci: kernel-set $capability (ATEN_CPU_CAPABILITY=$capability OPENBLAS_CORETYPE=$coretype): golden tests, then learning tests"
  for run in golden learning; do
    if [ "$run" = golden ]; then files=("${golden_files[@]}"); filter=(); else files=("${learning_files[@]}"); filter=(-t "$learning_tests"); fi
    ATEN_CPU_CAPABILITY=$capability OPENBLAS_CORETYPE=$coretype COMLRL_TEST_MARGINS=$margins \
      node scripts/test.mjs "${files[@]}" "${filter[@]}" 2>&1 |
      sed -E "s/^([0-9]+ passed, [0-9]+ failed)/ci: kernel-set $capability $run: \1/" || failed=1
  done
  echo "ci: kernel-set $capability: learning margins (rise, and what the test needs)"
  node -e '
    const lines = require("fs").readFileSync(process.argv[1], "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
    for (const m of lines) console.log(`ci: kernel-set ${m.kernels}:   ${m.rise.toFixed(3).padStart(7)} > ${m.atLeast}  ${m.name}`);
  ' "$margins"
  reported=$(wc -l <"$margins")
  if [ "$reported" -ne "$expected_rises" ]; then
    echo "ci: kernel-set $capability: $reported learning rises reported, $expected_rises expected (a learning test renamed past \"$learning_tests\"?)"
    failed=1
  fi
  echo "ci: kernel-set $capability took $((SECONDS - stage)) s"
done
echo "ci: kernel-set stage took $((SECONDS - started)) s"
exit "$failed"
