#!/usr/bin/env bash
# Link prediction on the GPU (after ../shared/tools/gpu-stage --tests it --datasets
# cora,citeseer,pubmed,ogbl-ddi): the link tests on the GPU; the training step against PyG on
# ogbl-ddi and on SBM 1M (ours: `tcgnn bench link`, GPU events, median of 30 steps; PyG:
# bench/pyg/link.py --timing-only, eager / eager+TF32 / torch.compile+TF32, on the same split
# file and, for SBM, the same .mtx.gz + .npz written by `tcgnn gen sbm`); the 5-seed accuracy
# comparison on cora, citeseer and pubmed for GCN and SAGE (ours `train --task link --seeds
# 0,1,2,3,4` and bench/pyg/link.py on the same --split-file). Each stage is self-contained
# (it rewrites the split files it needs: the same seed gives the same file), so stages can go
# in separate device calls of at most 10 minutes. Everything lands in $OUT/link/ and $OUT/link.tgz.
#   bash bench/run-link-on-gpu.sh [STAGE...]     stages: tests ddi sbm1m accuracy (default: all)
# PYG_STEPS (default 20) and PYG_WARMUP (default 3): PyG's timed and warm-up steps per
# configuration (its step samples negatives on the host: seconds on these graphs).
set -uo pipefail
cd "$(dirname "$0")/.."
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(tests ddi sbm1m accuracy)
out=${OUT:-gpu-out}/link
mkdir -p "$out/splits" "$out/graphs"
bash .gpu/unpack
export TCGNN_DATASETS=$PWD/.gpu/datasets TCGNN_BIN=$PWD/.gpu/bin/tcgnn PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
t=.gpu/bin/tcgnn
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"

# speed GRAPH NAME: the split (one cheap epoch of ours writes it), PyG's step per encoder (one
# JSON each, kept if a later one times out), then ours with PyG's figures beside.
speed() {
  local g=$1 name=$2 pyg=()
  local split="$out/splits/$name.split"
  [ -f "$split" ] || timeout 300 $t train "$g" --task link --epochs 1 --features 64 --split-file "$split" --quiet \
    > "$out/split-$name.txt" 2>&1 || echo "split $name: exit $?"
  for m in gcn sage; do
    timeout 280 python3 bench/pyg/link.py "$g" --split-file "$split" --model $m --features 64 --timing-only \
      --steps ${PYG_STEPS:-20} --warmup ${PYG_WARMUP:-3} --out "$out/pyg-link-$name-$m.json" > "$out/pyg-link-$name-$m.txt" 2>&1 \
      || echo "pyg link $name $m: exit $?"
    tail -2 "$out/pyg-link-$name-$m.txt"
    [ -f "$out/pyg-link-$name-$m.json" ] && pyg+=(--pyg "$out/pyg-link-$name-$m.json")
  done
  timeout 300 $t bench link "$g" --models gcn,sage --features 64 --split-dir "$out/splits" "${pyg[@]}" --out "$out/bench-$name" \
    > "$out/bench-link-$name.txt" 2>&1 || echo "bench link $name: exit $?"
  cat "$out/bench-link-$name.txt"
}

for stage in "${stages[@]}"; do
  echo "== $stage ($(date -u +%T))"
  case "$stage" in
    tests)
      timeout 300 .gpu/bin/test-test-it link_ --test-threads 2 > "$out/tests.log" 2>&1; echo "tests: exit $?"
      grep -E "^test result|FAILED|panicked" "$out/tests.log" | head -20
      grep -c "skipped" "$out/tests.log" | sed 's/^/skipped lines: /' ;;
    ddi)
      speed ogbl-ddi ogbl-ddi ;;
    sbm1m)
      sbm=$out/graphs/sbm1m-s0.mtx.gz
      [ -f $sbm ] || timeout 300 $t gen sbm --n 1000000 --classes 8 --features 64 --seed 0 -o $sbm > "$out/gen-sbm.txt" 2>&1 \
        || echo "gen sbm: exit $?"
      speed $sbm sbm1m-s0 ;;
    accuracy)
      for g in cora citeseer pubmed; do
        for m in gcn sage; do
          timeout 300 $t train $g --task link --model $m --epochs 100 --seeds 0,1,2,3,4 --split-file "$out/splits/$g.split" --quiet \
            --out "$out/link-$g-$m" > "$out/link-$g-$m.txt" 2>&1 || echo "link $g $m: exit $?"
          tail -4 "$out/link-$g-$m.txt"
        done
        timeout 600 python3 bench/pyg/link.py $g --split-file "$out/splits/$g.split" --model gcn sage --seeds 0,1,2,3,4 --epochs 100 \
          --no-timing --out "$out/pyg-link-$g.json" > "$out/pyg-link-$g.txt" 2>&1 || echo "pyg link $g: exit $?"
        tail -3 "$out/pyg-link-$g.txt"
      done ;;
    *) echo "unknown stage $stage (tests ddi sbm1m accuracy)" ;;
  esac
done
tar -czf "$(dirname "$out")/link.tgz" -C "$(dirname "$out")" link && echo "wrote link.tgz"
