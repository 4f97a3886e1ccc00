#!/usr/bin/env bash
# The GPU half of the session's checks in one device call (after ../shared/tools/gpu-stage
# --tests it, with the TU sets copied to .gpu/datasets/tu): the integration tests on the GPU,
# link prediction (ours and bench/pyg/link.py on the same split files: accuracy on cora, epoch
# time on ogbl-ddi) and graph classification (ours and bench/pyg/graph.py on the same folds:
# MUTAG 10-fold accuracy, NCI1 epoch time). Everything lands in $OUT/tasks.tgz.
#   bash bench/run-tasks-on-gpu.sh [STAGE...]     stages: tests link graph (default: all)
set -uo pipefail
cd "$(dirname "$0")/.."
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(tests link graph)
out=${OUT:-gpu-out}/tasks
mkdir -p "$out"
bash .gpu/unpack
export TCGNN_DATASETS=$PWD/.gpu/datasets TCGNN_BIN=$PWD/.gpu/bin/tcgnn PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
t=.gpu/bin/tcgnn
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
for stage in "${stages[@]}"; do
  echo "== $stage ($(date -u +%T))"
  case "$stage" in
    tests)
      timeout 240 .gpu/bin/test-test-it --test-threads 4 > "$out/tests.log" 2>&1; echo "tests: exit $?"
      grep -E "^test result|FAILED|panicked" "$out/tests.log" | head -20
      grep -c "skipped" "$out/tests.log" | sed 's/^/skipped lines: /' ;;
    link)
      for m in gcn sage; do
        timeout 60 $t train cora --task link --model $m --epochs 100 --seeds 0,1,2,3,4 --split-file "$out/cora.split" --quiet \
          --out "$out/link-cora-$m" > "$out/link-cora-$m.txt" 2>&1 || echo "link cora $m: exit $?"
        tail -4 "$out/link-cora-$m.txt"
      done
      if [ -z "${SKIP_PYG_CORA:-}" ]; then
        timeout 120 python3 bench/pyg/link.py cora --split-file "$out/cora.split" --model gcn sage --seeds 0,1,2,3,4 --epochs 100 \
          --out "$out/pyg-link-cora.json" > "$out/pyg-link-cora.txt" 2>&1 || echo "pyg link cora: exit $?"
        tail -8 "$out/pyg-link-cora.txt"
      fi
      timeout 90 $t train ogbl-ddi --task link --model sage --features 64 --epochs 5 --split-file "$out/ddi.split" --quiet \
        --out "$out/link-ddi" > "$out/link-ddi.txt" 2>&1 || echo "link ddi: exit $?"
      tail -6 "$out/link-ddi.txt"
      [ -n "${SKIP_PYG_DDI:-}" ] || timeout 90 python3 bench/pyg/link.py ogbl-ddi --split-file "$out/ddi.split" --model sage --features 64 --seeds 0 --epochs 5 \
        --out "$out/pyg-link-ddi.json" > "$out/pyg-link-ddi.txt" 2>&1 || echo "pyg link ddi: exit $?"
      tail -6 "$out/pyg-link-ddi.txt" ;;
    graph)
      f=bench/results/graph
      timeout 100 $t train tu:MUTAG --task graph --model gin --epochs 350 --folds-file $f/MUTAG.folds.json --quiet \
        --out "$out/graph-mutag" > "$out/graph-mutag.txt" 2>&1 || echo "graph mutag: exit $?"
      tail -4 "$out/graph-mutag.txt"
      timeout 120 python3 bench/pyg/graph.py accuracy MUTAG --model gin --epochs 350 --folds-file $f/MUTAG.folds.json \
        --out "$out/pyg-graph-mutag.json" > "$out/pyg-graph-mutag.txt" 2>&1 || echo "pyg graph mutag: exit $?"
      tail -4 "$out/pyg-graph-mutag.txt"
      for v in "f32 hp" "f16 tc8"; do
        set -- $v
        timeout 60 $t train tu:NCI1 --task graph --model gin --epochs 3 --only-folds 1 --precision $1 --impl $2 --quiet \
          --out "$out/speed-nci1-$1-$2" > "$out/speed-nci1-$1-$2.txt" 2>&1 || echo "speed nci1 $v: exit $?"
        tail -3 "$out/speed-nci1-$1-$2.txt"
      done
      timeout 120 python3 bench/pyg/graph.py speed NCI1 --model gin --out "$out/pyg-speed-nci1.json" \
        > "$out/pyg-speed-nci1.txt" 2>&1 || echo "pyg speed nci1: exit $?"
      tail -6 "$out/pyg-speed-nci1.txt" ;;
  esac
done
tar -czf "$(dirname "$out")/tasks.tgz" -C "$(dirname "$out")" tasks && echo "wrote tasks.tgz"
