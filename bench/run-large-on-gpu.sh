#!/usr/bin/env bash
# Large-graph training steps beside PyG's fastest configuration, in one device call (issue 42):
# R-MAT 2^18 x 16 relabelled and SBM 1M x 64 features generated with SEED (choose one not in the
# repository), PyG's edge_index / TF32 / CSR adj_t / torch.compile variants of every model
# (bench/pyg/train.py --fastest) and `tcgnn bench train` on the very same files, then
# `tcgnn train --profile-ops` per model (where an eager step's time goes, op by op).
#   bash bench/run-large-on-gpu.sh SEED [STAGE...]     stages: graphs pyg tcgnn profile ncu (default: all but ncu)
# LARGE_GRAPHS (default "rmat18 sbm1m") limits the pyg and tcgnn stages; PYG_AGNN=0 skips PyG's AGNN.
# MEMORY_LEDGER=1: the tcgnn stage also prints each row's device memory by allocating line.
# ncu: per-kernel time, DRAM and L2 traffic of ~NCU_COUNT consecutive eager launches in the steady
# state of each model (NCU_MODELS, default all five) on each graph (NCU_GRAPHS: sbm rmat).
# NCU_CACHE=none keeps the caches warm between kernels (ncu's default, all, flushes L2 before each:
# right for SBM 1M, whose gathered rows do not fit L2; wrong for R-MAT 2^18, whose do).
# Models as the issue's table: GCN 2x16, GAT 2x8x8, AGNN 4x16, SAGE 2x64, GIN 2x64.
set -uo pipefail
cd "$(dirname "$0")/.."
seed=${1:?usage: run-large-on-gpu.sh SEED [graphs] [pyg] [tcgnn] [profile]}
shift
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(graphs pyg tcgnn profile)
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
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
        [[ " ${LARGE_GRAPHS:-rmat18 sbm1m} " == *" $1 "* ]] || continue
        common=(--timing-only --features 500 --no-feature-norm --fastest)
        timeout 240 python3 bench/pyg/train.py "$2" --model gcn gat sage gin "${common[@]}" --out "$out/pyg-$1.json" \
          > "$out/pyg-$1.log" 2>&1 || echo "pyg $1: exit $?"
        [ "${PYG_AGNN:-1}" = 1 ] && timeout 120 python3 bench/pyg/train.py "$2" --model agnn --hidden 16 "${common[@]}" --out "$out/pyg-$1-agnn.json" \
          >> "$out/pyg-$1.log" 2>&1 || echo "pyg $1 agnn: exit $?"
        grep -E "fastest|failed|Error" "$out/pyg-$1.log" | tail -12
      done ;;
    tcgnn)
      pyg=()
      for f in "$out"/pyg-*.json; do [ -f "$f" ] && pyg+=(--pyg "$f"); done
      graphs=(); [[ " ${LARGE_GRAPHS:-rmat18 sbm1m} " == *" rmat18 "* ]] && graphs+=($rmat); [[ " ${LARGE_GRAPHS:-rmat18 sbm1m} " == *" sbm1m "* ]] && graphs+=($sbm)
      timeout 300 $tcgnn bench train "${graphs[@]}" --models gcn:2x16,agnn:4x16,gat,sage,gin --precisions tf32,f16 --accuracy-max-nodes 0 \
        ${MEMORY_LEDGER:+--memory-ledger} "${pyg[@]}" --out "$out" > "$out/bench-train.log" 2>&1 || echo "bench train: exit $?"
      tail -30 "$out/bench-train.log" ;;
    profile)
      for m in gcn:16 agnn:16 gat:8 sage:64 gin:64; do
        layers=2; [ ${m%%:*} = agnn ] && layers=4
        timeout 60 $tcgnn train $sbm --model ${m%%:*} --layers $layers --hidden ${m##*:} --precision f16 --epochs 3 --quiet \
          --profile-ops > "$out/profile-sbm-${m%%:*}.log" 2>&1 || echo "profile ${m%%:*}: exit $?"
        echo "-- ${m%%:*} on SBM 1M (f16)"; grep -A14 -iE "op.*ms|where" "$out/profile-sbm-${m%%:*}.log" | head -16
      done ;;
    ncu)
      for gr in ${NCU_GRAPHS:-sbm rmat}; do
        f=$sbm; extra=(); [ $gr = rmat ] && { f=$rmat; extra=(--features 500 --classes 16); }
        for m in ${NCU_MODELS:-gcn:16 gat:8 agnn:16 sage:64 gin:64}; do
          layers=2; [ ${m%%:*} = agnn ] && layers=4
          timeout 240 $ncu --clock-control none --cache-control ${NCU_CACHE:-all} --csv --metrics gpu__time_duration.sum,dram__bytes.sum,lts__t_bytes.sum \
            --launch-skip ${NCU_SKIP:-600} --launch-count ${NCU_COUNT:-300} \
            $tcgnn train $f "${extra[@]}" --model ${m%%:*} --layers $layers --hidden ${m##*:} --precision f16 --epochs 40 \
            --no-cuda-graph --quiet > "$out/ncu-$gr-${m%%:*}.csv" 2> "$out/ncu-$gr-${m%%:*}.err" || echo "ncu $gr ${m%%:*}: exit $?"
          python3 bench/ncu_kernels.py "$out/ncu-$gr-${m%%:*}.csv" > "$out/ncu-$gr-${m%%:*}.txt" 2>&1
          echo "-- ncu ${m%%:*} on $gr (f16, eager)"; head -9 "$out/ncu-$gr-${m%%:*}.txt"
        done
      done ;;
    reorder)
      # The same graph renumbered once (Louvain communities, RCM) against as generated, node data
      # left out (synthetic features of the same width), for the step time alone.
      d=$g/plain; mkdir -p $d; cp $sbm $d/sbm.mtx.gz
      for method in ${REORDER_METHODS:-community rcm}; do
        [ -f $d/sbm-$method.mtx.gz ] || { s0=$SECONDS; timeout 300 $tcgnn reorder $d/sbm.mtx.gz --method $method -o $d/sbm-$method.mtx.gz \
          > "$out/reorder-$method.log" 2>&1; echo "reorder $method: exit $? in $((SECONDS - s0)) s"; tail -3 "$out/reorder-$method.log"; }
      done
      for f in sbm $(for m in ${REORDER_METHODS:-community rcm}; do echo sbm-$m; done); do
        for m in ${REORDER_MODELS:-gcn:16 gat:8 sage:64}; do
          timeout 120 $tcgnn train $d/$f.mtx.gz --features 64 --classes 8 --model ${m%%:*} --hidden ${m##*:} --precision f16 --epochs 20 --quiet \
            > "$out/reorder-train-$f-${m%%:*}.log" 2>&1 || echo "train $f ${m%%:*}: exit $?"
          echo "$f ${m%%:*}: $(grep -o 'step [0-9.]* ms[a-z ]*' "$out/reorder-train-$f-${m%%:*}.log" | head -1)"
        done
      done ;;
    *) echo "unknown stage $stage" >&2 ;;
  esac
done
# Everything in one archive (the device tool returns at most 8 files).
tar -czf "$out/large-results.tgz" -C "$out" --exclude large-results.tgz . && echo "wrote $out/large-results.tgz"
