#!/usr/bin/env bash
# The training benchmark on a GPU machine (after ../shared/tools/gpu-stage): generates the big
# graphs once as files, so tcgnn and PyTorch Geometric read the very same ones, runs
# `tcgnn bench train` and bench/pyg/train.py, and writes bench/results-style reports to $OUT.
#   bash bench/run-train-on-gpu.sh [quick]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out" /tmp/tcgnn-graphs
lib=$(dirname "$(find / -name 'libcusparse.so.12*' -not -path '/proc/*' 2>/dev/null | head -1)" 2>/dev/null)
[ -n "$lib" ] && export LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"
export TCGNN_DATASETS="$PWD/.gpu/datasets" PYTHONUNBUFFERED=1
g=/tmp/tcgnn-graphs
[ -f $g/rmat18.mtx.gz ] || .gpu/bin/tcgnn gen rmat --scale 18 --edge-factor 16 -o $g/rmat18.mtx.gz
[ -f $g/sbm1m.mtx.gz ] || .gpu/bin/tcgnn gen sbm --n 1000000 --classes 8 --features 64 -o $g/sbm1m.mtx.gz
graphs="cora citeseer pubmed $g/rmat18.mtx.gz $g/sbm1m.mtx.gz"
[[ " $* " == *" quick "* ]] && graphs="cora citeseer pubmed"
# PyG first (its accuracy runs on the labelled graphs, timing on all), then ours with its figures.
py() { timeout 900 python3 bench/pyg/train.py "$@" >> "$out/pyg.log" 2>&1 || echo "pyg failed: $*"; }
py cora citeseer --model gcn agnn --seeds 0,1,2,3,4 --no-timing --out "$out/pyg-acc.json"
py $graphs --model gcn --hidden 16 128 --timing-only --features 500 --no-feature-norm --out "$out/pyg-gcn.json"
py $graphs --model agnn --timing-only --features 500 --no-feature-norm --out "$out/pyg-agnn.json"
grep -E "step|test" "$out/pyg.log" | tail -30
.gpu/bin/tcgnn bench train $graphs --pyg "$out/pyg-acc.json" --pyg "$out/pyg-gcn.json" --pyg "$out/pyg-agnn.json" --out "$out" 2>&1 | tee "$out/bench-train.log" | tail -60
