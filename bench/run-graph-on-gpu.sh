#!/usr/bin/env bash
# Graph classification on the GPU machine (issue 44), in one call: the GPU tests of the task,
# tcgnn's 10-fold accuracy on the four TU sets (GIN sum pooling; GCN / SAGE / GAT mean pooling)
# on the folds files in bench/results/graph/, PyG's on the same folds, then epoch times on NCI1
# and a generated set of 100,000 graphs (tcgnn per SpMM kernel and precision, the rebound net
# replayed / eager / built per batch; PyG eager / compile x f32 / TF32; speed-summary.json).
#   bash bench/run-graph-on-gpu.sh [STAGE...]   stages: tests acc pyg-acc speed (default: all)
# EPOCHS (default 350), MODELS (default "gin gcn sage gat"), SETS (default the four) override.
set -uo pipefail
cd "$(dirname "$0")/.."
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(tests acc pyg-acc speed)
out=${OUT:-gpu-out/graph}
epochs=${EPOCHS:-350}
models=${MODELS:-gin gcn sage gat}
sets=${SETS:-MUTAG PROTEINS_full NCI1 IMDB-BINARY}
folds=bench/results/graph
syn=/tmp/tcgnn-syn
mkdir -p "$out"
[ -x .gpu/bin/tcgnn ] || bash .gpu/unpack
export PYTHONUNBUFFERED=1
# The TU sets: staged with `gpu-stage --datasets all` (.gpu/datasets/tu), else ../shared/datasets.
if [ -z "${TCGNN_DATASETS:-}" ]; then
  if [ -d .gpu/datasets/tu ]; then export TCGNN_DATASETS=$PWD/.gpu/datasets; else export TCGNN_DATASETS=$PWD/../shared/datasets; fi
fi
tcgnn=.gpu/bin/tcgnn
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
for stage in "${stages[@]}"; do
  echo "== $stage ($(date -u +%T))"
  case "$stage" in
    tests)
      .gpu/bin/test-test-it graph_task:: graph_bound:: --test-threads 1 --nocapture 2>&1 | tee "$out/tests.txt" ;;
    acc)
      for s in $sets; do for m in $models; do
        $tcgnn train tu:$s --task graph --model $m --epochs $epochs --folds-file $folds/$s.folds.json --quiet \
          --out "$out/$s-$m" 2>&1 | tee "$out/$s-$m.txt"
      done; done ;;
    pyg-acc)
      for s in $sets; do for m in $models; do
        python3 bench/pyg/graph.py accuracy $s --model $m --epochs $epochs --folds-file $folds/$s.folds.json \
          --out "$out/pyg-$s-$m.json" 2>&1 | tee "$out/pyg-$s-$m.txt"
      done; done ;;
    speed)
      [ -f $syn/SYN100K_A.txt.gz ] || python3 bench/pyg/graph.py generate --graphs 100000 --nodes 50 --dir $syn --name SYN100K
      for s in tu:NCI1 $syn/SYN100K; do
        n=$(basename ${s#tu:})
        # f32 hp / csr: one net per fold rebound per batch, its step replayed (a CUDA graph);
        # the same eager (--eager-steps) and with a net built per batch (--build-per-batch, the
        # old path); the tensor-core kernels cannot rebind a graph: a net per batch.
        for v in "f32 hp" "f32 hp eager --eager-steps" "f32 hp perbatch --build-per-batch" "f32 csr" "f32 cusparse" "tf32 tc8" "f16 tc8"; do
          set -- $v
          tag=$1-$2${3:+-$3}
          $tcgnn train $s --task graph --model gin --epochs 4 --only-folds 1 --precision $1 --impl $2 ${4:-} --quiet \
            --out "$out/speed-$n-$tag" 2>&1 | tee "$out/speed-$n-$tag.txt"
        done
        p=$s; [ "${s#tu:}" != "$s" ] && p=${s#tu:}
        python3 bench/pyg/graph.py speed $p --model gin --out "$out/pyg-speed-$n.json" 2>&1 | tee "$out/pyg-speed-$n.txt"
      done
      # Side by side, with the ratio to PyG's fastest configuration: speed-summary.json.
      python3 bench/graph_speed_report.py "$out" 2>&1 | tee "$out/speed-summary.txt" ;;
    *) echo "unknown stage $stage" ;;
  esac
done
