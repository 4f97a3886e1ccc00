#!/usr/bin/env bash
# One batch on a GPU machine without a Rust toolchain, after ../shared/tools/gpu-stage:
# every test binary, then the benchmark suites; logs and reports land in $OUT (or ./gpu-out).
#   bash bench/run-on-gpu.sh [tests] [spmm] [sddmm] [quick]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
# cuSPARSE ships with the CUDA toolkit; put it on the loader path if the system does not.
lib=$(dirname "$(find / -name 'libcusparse.so.12*' -not -path '/proc/*' 2>/dev/null | head -1)" 2>/dev/null)
[ -n "$lib" ] && export LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"
export TCGNN_DATASETS="$PWD/.gpu/datasets"
what=" $* "
rc=0
if [[ "$what" == *" tests "* ]]; then
  bash .gpu/run-tests.sh --nocapture > "$out/tests.log" 2>&1 || rc=1
  grep -E "^== |test result|FAILED|panicked|error" "$out/tests.log" | head -80
fi
ks=""
[[ "$what" == *" quick "* ]] && ks="--k 128"
if [[ "$what" == *" spmm "* ]]; then
  .gpu/bin/tcgnn bench spmm --suite $ks --out "$out" > "$out/bench-spmm.log" 2>&1 || rc=1
  grep -E "^K=|error" "$out/bench-spmm.log" | head -60
fi
if [[ "$what" == *" sddmm "* ]]; then
  .gpu/bin/tcgnn bench sddmm --suite $ks --out "$out" > "$out/bench-sddmm.log" 2>&1 || rc=1
  grep -E "^K=|error" "$out/bench-sddmm.log" | head -60
fi
exit $rc
