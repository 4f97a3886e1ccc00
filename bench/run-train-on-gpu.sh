#!/usr/bin/env bash
# The training benchmark on a GPU machine (after ../shared/tools/gpu-stage): generates the big
# graphs once as files, so tcgnn and PyTorch Geometric read the very same ones, runs the PyG
# baselines (bench/pyg/train.py, bench/pyg/sample.py) and `tcgnn bench train`, and writes
# bench/results-style reports to $OUT.
#   bash bench/run-train-on-gpu.sh [quick] [STAGE...]
# Stages, in order (default: all). Each per-graph stage should stay under 10 minutes on an H100,
# so that a device call can run one or a few at a time (files in $OUT and /tmp/tcgnn-graphs carry
# over while the machine stays warm):
#   graphs         R-MAT 2^18 x 16 and SBM 1M written by `tcgnn gen` (skipped when present)
#   pyg-acc        self-check, then accuracy, 5 seeds, every model on cora and citeseer
#   pyg-cora pyg-citeseer pyg-pubmed pyg-rmat18
#                  step time of every model (GCN 2x16 and 2x128) on that graph with PyG's faster
#                  variants (--fastest: TF32, sparse CSR adj_t, torch.compile), the fastest named
#   pyg-sbm1m      the same for GCN only
#   pyg-small      = pyg-cora pyg-citeseer pyg-pubmed;  pyg-large = pyg-rmat18 pyg-sbm1m
#   pyg-sample     bench/pyg/sample.py: GCN and SAGE with every sampler on cora and citeseer
#   tcgnn          `tcgnn bench train` with the PyG figures beside its own
# quick: cora, citeseer, pubmed only (no generated graphs).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out" /tmp/tcgnn-graphs
[ -x .gpu/bin/tcgnn ] || { [ -f .gpu/unpack ] && bash .gpu/unpack; }
lib=$(dirname "$(find / -name 'libcusparse.so.12*' -not -path '/proc/*' 2>/dev/null | head -1)" 2>/dev/null)
[ -n "$lib" ] && export LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"
export TCGNN_DATASETS="$PWD/.gpu/datasets" PYTHONUNBUFFERED=1
g=/tmp/tcgnn-graphs
quick=0
stages=()
for a in "$@"; do
  case "$a" in
    quick) quick=1 ;;
    pyg-small) stages+=(pyg-cora pyg-citeseer pyg-pubmed) ;;
    pyg-large) stages+=(pyg-rmat18 pyg-sbm1m) ;;
    graphs | pyg-acc | pyg-cora | pyg-citeseer | pyg-pubmed | pyg-rmat18 | pyg-sbm1m | pyg-sample | tcgnn) stages+=("$a") ;;
    *) echo "run-train-on-gpu: unknown argument '$a'" >&2; exit 2 ;;
  esac
done
[ ${#stages[@]} -eq 0 ] && stages=(graphs pyg-acc pyg-cora pyg-citeseer pyg-pubmed pyg-rmat18 pyg-sbm1m pyg-sample tcgnn)
if [ $quick = 1 ]; then
  keep=()
  for s in "${stages[@]}"; do case "$s" in graphs | pyg-rmat18 | pyg-sbm1m) ;; *) keep+=("$s") ;; esac; done
  stages=("${keep[@]}")
fi
graphs="cora citeseer pubmed $g/rmat18.mtx.gz $g/sbm1m.mtx.gz"
[ $quick = 1 ] && graphs="cora citeseer pubmed"
models="gcn agnn gat sage gin"
# Timing input: 500 random features (no npz-dependent width), as the Rust side's timing runs.
timing=(--timing-only --features 500 --no-feature-norm --fastest)
gen_graphs() {
  [ -f $g/rmat18.mtx.gz ] || .gpu/bin/tcgnn gen rmat --scale 18 --edge-factor 16 -o $g/rmat18.mtx.gz
  [ -f $g/sbm1m.mtx.gz ] || .gpu/bin/tcgnn gen sbm --n 1000000 --classes 8 --features 64 -o $g/sbm1m.mtx.gz
}
py() { timeout 570 python3 "$@" >> "$out/pyg.log" 2>&1 || echo "pyg failed ($?): $*"; }
# One graph's timings: GCN at two widths, then the other models (all of them unless "gcn-only").
pyg_time() {
  local name=$1 path=$2
  py bench/pyg/train.py "$path" --model gcn --hidden 16 128 "${timing[@]}" --out "$out/pyg-time-gcn-$name.json"
  [ "${3:-}" = gcn-only ] || py bench/pyg/train.py "$path" --model agnn gat sage gin "${timing[@]}" --out "$out/pyg-time-$name.json"
}
for stage in "${stages[@]}"; do
  [ -z "$stage" ] && continue
  echo "== $stage ($(date -u +%T))"
  case "$stage" in
    graphs) gen_graphs ;;
    pyg-acc)
      py bench/pyg/train.py --self-check
      py bench/pyg/train.py cora citeseer --model $models --seeds 0,1,2,3,4 --no-timing --out "$out/pyg-acc.json" ;;
    pyg-cora | pyg-citeseer | pyg-pubmed) pyg_time "${stage#pyg-}" "${stage#pyg-}" ;;
    pyg-rmat18) gen_graphs; pyg_time rmat18 $g/rmat18.mtx.gz ;;
    pyg-sbm1m) gen_graphs; pyg_time sbm1m $g/sbm1m.mtx.gz gcn-only ;;
    pyg-sample)
      py bench/pyg/sample.py --self-check
      for gr in cora citeseer; do
        py bench/pyg/sample.py $gr --model gcn sage --sampler saint-rw saint-node saint-edge neighbor \
          --seeds 0,1,2,3,4 --out "$out/pyg-sample-$gr.json"
      done ;;
    tcgnn)
      [ $quick = 1 ] || gen_graphs
      pyg=()
      for f in "$out"/pyg-acc.json "$out"/pyg-time-*.json; do [ -f "$f" ] && pyg+=(--pyg "$f"); done
      .gpu/bin/tcgnn bench train $graphs "${pyg[@]}" --out "$out" 2>&1 | tee "$out/bench-train.log" | tail -60 ;;
  esac
  grep -E "step|test|fastest|variant|epoch|failed|passed" "$out/pyg.log" 2>/dev/null | tail -40 > "$out/pyg-tail.log"
done
[ -f "$out/pyg.log" ] && grep -E "fastest|Error|failed" "$out/pyg.log" | tail -40
exit 0
