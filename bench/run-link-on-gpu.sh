#!/usr/bin/env bash
# Link prediction on the GPU in one device call (after ../shared/tools/gpu-stage --tests it
# --datasets cora,citeseer,pubmed,ogbl-ddi): the link tests on the GPU, the training step
# against PyG on ogbl-ddi and SBM 1M (ours: `tcgnn bench link`, GPU events, median of 30 steps;
# PyG: bench/pyg/link.py --timing-only, eager / eager+TF32 / torch.compile+TF32, on the same
# split files and the same SBM file), and the 5-seed accuracy comparison on cora, citeseer and
# pubmed for GCN and SAGE (ours `train --task link --seeds 0,1,2,3,4` and bench/pyg/link.py on
# the same --split-file). Everything lands in $OUT/link/ and $OUT/link.tgz.
#   bash bench/run-link-on-gpu.sh [STAGE...]     stages: tests speed accuracy (default: all)
# SPEED_GRAPHS (default "ddi sbm1m") limits the speed stage; PYG_STEPS (default 20) and
# PYG_WARMUP (default 3) set PyG's timed and warm-up steps (its ddi step takes seconds).
set -uo pipefail
cd "$(dirname "$0")/.."
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(tests speed accuracy)
out=${OUT:-gpu-out}/link
mkdir -p "$out/splits" "$out/graphs"
bash .gpu/unpack
export TCGNN_DATASETS=$PWD/.gpu/datasets TCGNN_BIN=$PWD/.gpu/bin/tcgnn PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
t=.gpu/bin/tcgnn
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
sbm=$out/graphs/sbm1m-s0.mtx.gz
for stage in "${stages[@]}"; do
  echo "== $stage ($(date -u +%T))"
  case "$stage" in
    tests)
      timeout 300 .gpu/bin/test-test-it link_ --test-threads 2 > "$out/tests.log" 2>&1; echo "tests: exit $?"
      grep -E "^test result|FAILED|panicked" "$out/tests.log" | head -20
      grep -c "skipped" "$out/tests.log" | sed 's/^/skipped lines: /' ;;
    speed)
      graphs=()
      [[ " ${SPEED_GRAPHS:-ddi sbm1m} " == *" ddi "* ]] && graphs+=(ogbl-ddi)
      if [[ " ${SPEED_GRAPHS:-ddi sbm1m} " == *" sbm1m "* ]]; then
        # One file for both sides (PyG reads the .mtx.gz and its .npz features).
        [ -f $sbm ] || timeout 300 $t gen sbm --n 1000000 --classes 8 --features 64 --seed 0 -o $sbm > "$out/gen-sbm.txt" 2>&1 \
          || echo "gen sbm: exit $?"
        graphs+=($sbm)
      fi
      # Ours first: it writes the split files PyG trains on.
      timeout 400 $t bench link "${graphs[@]}" --models gcn,sage --features 64 --split-dir "$out/splits" --out "$out/bench-ours" \
        > "$out/bench-link-ours.txt" 2>&1 || echo "bench link: exit $?"
      cat "$out/bench-link-ours.txt"
      pyg=()
      for g in "${graphs[@]}"; do
        name=$(basename "$g"); name=${name%.gz}; name=${name%.mtx}
        timeout 600 python3 bench/pyg/link.py "$g" --split-file "$out/splits/$name.split" --model gcn sage --features 64 --timing-only \
          --steps ${PYG_STEPS:-20} --warmup ${PYG_WARMUP:-3} --out "$out/pyg-link-$name.json" > "$out/pyg-link-$name.txt" 2>&1 \
          || echo "pyg link $name: exit $?"
        tail -3 "$out/pyg-link-$name.txt"
        [ -f "$out/pyg-link-$name.json" ] && pyg+=(--pyg "$out/pyg-link-$name.json")
      done
      # Again with PyG's figures in the table (our step takes milliseconds: cheap to repeat).
      timeout 400 $t bench link "${graphs[@]}" --models gcn,sage --features 64 --split-dir "$out/splits" "${pyg[@]}" --out "$out/bench" \
        > "$out/bench-link.txt" 2>&1 || echo "bench link with pyg: exit $?"
      cat "$out/bench-link.txt" ;;
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
    *) echo "unknown stage $stage (tests speed accuracy)" ;;
  esac
done
tar -czf "$(dirname "$out")/link.tgz" -C "$(dirname "$out")" link && echo "wrote link.tgz"
