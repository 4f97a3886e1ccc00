#!/usr/bin/env bash
# Large-graph training steps beside PyG's fastest configuration, in one device call (issue 42):
# R-MAT 2^18 x 16 relabelled and SBM 1M x 64 features generated with SEED (choose one not in the
# repository), PyG's edge_index / TF32 / CSR adj_t / torch.compile variants of every model
# (bench/pyg/train.py --fastest) and `tcgnn bench train` on the very same files, then
# `tcgnn train --profile-ops` per model (where an eager step's time goes, op by op).
#   bash bench/run-large-on-gpu.sh SEED [STAGE...]     stages: graphs pyg tcgnn profile (default: all)
# Models as the issue's table: GCN 2x16, GAT 2x8x8, AGNN 4x16, SAGE 2x64, GIN 2x64.
set -uo pipefail
cd "$(dirname "$0")/.."
seed=${1:?usage: run-large-on-gpu.sh SEED [graphs] [pyg] [tcgnn] [profile]}
shift
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(graphs pyg tcgnn profile)
out=${OUT:-gpu-out}
g=/tmp/tcgnn-graphs
mkdir -p "$out" $g
[ -x .gpu/bin/tcgnn ] || bash .gpu/unpack
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
tcgnn=.gpu/bin/tcgnn
rmat=$g/rmat18-s$seed.mtx.gz
sbm=$g/sbm1m-s$seed.mtx.gz
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"
for stage in "${stages[@]}"; do
  echo "== $stage ($(date -u +%T))"
  case "$stage" in
    graphs)
      [ -f $rmat ] || $tcgnn convert rmat:18:16:$seed:relabel -o $rmat
      [ -f $sbm ] || $tcgnn gen sbm --n 1000000 --classes 8 --features 64 --seed $seed -o $sbm ;;
    pyg)
      # 500 random features on R-MAT (no node data); SBM's own 64 (its .npz beside it).
      for spec in "rmat18 $rmat" "sbm1m $sbm"; do
        set -- $spec
        common=(--timing-only --features 500 --no-feature-norm --fastest)
        timeout 240 python3 bench/pyg/train.py "$2" --model gcn gat sage gin "${common[@]}" --out "$out/pyg-$1.json" \
          > "$out/pyg-$1.log" 2>&1 || echo "pyg $1: exit $?"
        timeout 120 python3 bench/pyg/train.py "$2" --model agnn --hidden 16 "${common[@]}" --out "$out/pyg-$1-agnn.json" \
          >> "$out/pyg-$1.log" 2>&1 || echo "pyg $1 agnn: exit $?"
        grep -E "fastest|failed|Error" "$out/pyg-$1.log" | tail -12
      done ;;
    tcgnn)
      pyg=()
      for f in "$out"/pyg-*.json; do [ -f "$f" ] && pyg+=(--pyg "$f"); done
      timeout 300 $tcgnn bench train $rmat $sbm --models gcn:2x16,agnn:4x16,gat,sage,gin --precisions tf32,f16 --accuracy-max-nodes 0 \
        "${pyg[@]}" --out "$out" > "$out/bench-train.log" 2>&1 || echo "bench train: exit $?"
      tail -30 "$out/bench-train.log" ;;
    profile)
      for m in gcn:16 agnn:16 gat:8 sage:64 gin:64; do
        layers=2; [ ${m%%:*} = agnn ] && layers=4
        timeout 60 $tcgnn train $sbm --model ${m%%:*} --layers $layers --hidden ${m##*:} --precision f16 --epochs 3 --quiet \
          --profile-ops > "$out/profile-sbm-${m%%:*}.log" 2>&1 || echo "profile ${m%%:*}: exit $?"
        echo "-- ${m%%:*} on SBM 1M (f16)"; grep -A14 -iE "op.*ms|where" "$out/profile-sbm-${m%%:*}.log" | head -16
      done ;;
    *) echo "unknown stage $stage" >&2 ;;
  esac
done
# Everything in one archive (the device tool returns at most 8 files).
tar -czf "$out/large-results.tgz" -C "$out" --exclude large-results.tgz . && echo "wrote $out/large-results.tgz"
