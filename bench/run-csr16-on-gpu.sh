#!/usr/bin/env bash
# The f16 CSR SpMM on large sparse graphs (issue 42, first lever), in one device call: the SBM
# 1M x 64 features generated with SEED (choose one not in the repository), `bench spmm` at the
# widths the models use (8, 16, 64) in f16 and f32 beside TC8, HP, Auto and cuSPARSE in the same
# process, then `train --profile-ops` of GCN 2x16, SAGE 2x64, GIN 2x64 in f16 with Auto (which
# measures TC8 against the CSR kernel per side and width) and with TC8 forced (the step before),
# and `bench train` of the three for the CUDA-graph step times.
#   bash bench/run-csr16-on-gpu.sh SEED [STAGE...]     stages: graphs spmm profile train (default: all)
set -uo pipefail
cd "$(dirname "$0")/.."
seed=${1:?usage: run-csr16-on-gpu.sh SEED [graphs] [spmm] [profile] [train]}
shift
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(graphs spmm profile train)
out=${OUT:-gpu-out}
g=/tmp/tcgnn-graphs
mkdir -p "$out" $g
[ -x .gpu/bin/tcgnn ] || bash .gpu/unpack
tcgnn=${TCGNN:-.gpu/bin/tcgnn}
sbm=$g/sbm1m-s$seed.mtx.gz
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"
for stage in "${stages[@]}"; do
  echo "== $stage ($(date -u +%T))"
  case "$stage" in
    graphs)
      [ -f $sbm ] || $tcgnn gen sbm --n 1000000 --classes 8 --features 64 --seed $seed -o $sbm ;;
    spmm)
      # cuSPARSE f32 and f16 are always measured; "csr f16" is the new kernel, "auto f16" Auto's pick.
      timeout 400 $tcgnn bench spmm $sbm --k 8,16,64 --only csr,hp,tc8,auto --out "$out/spmm" \
        > "$out/bench-spmm.log" 2>&1 || echo "bench spmm: exit $?"
      tail -40 "$out/bench-spmm.log" ;;
    profile)
      for m in gcn:16 sage:64 gin:64; do
        for imp in auto tc8; do
          timeout 90 $tcgnn train $sbm --model ${m%%:*} --layers 2 --hidden ${m##*:} --precision f16 --impl $imp --epochs 3 \
            --quiet --profile-ops > "$out/profile-sbm-${m%%:*}-$imp.log" 2>&1 || echo "profile ${m%%:*} $imp: exit $?"
          echo "-- ${m%%:*} on SBM 1M (f16, --impl $imp)"; grep -A14 -iE "per-op time" "$out/profile-sbm-${m%%:*}-$imp.log" | head -16
        done
      done ;;
    train)
      timeout 300 $tcgnn bench train $sbm --models gcn:2x16,sage,gin --precisions f16,tf32 --accuracy-max-nodes 0 \
        --out "$out" > "$out/bench-train.log" 2>&1 || echo "bench train: exit $?"
      tail -30 "$out/bench-train.log" ;;
    *) echo "unknown stage $stage" >&2 ;;
  esac
done
tar -czf "$out/csr16-results.tgz" -C "$out" --exclude csr16-results.tgz . && echo "wrote $out/csr16-results.tgz"
