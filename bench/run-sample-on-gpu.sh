#!/usr/bin/env bash
# Sampled training on a GPU machine (after ../shared/tools/gpu-stage), side by side with the
# plain-PyTorch baseline: `tcgnn bench sample` (GCN and SAGE, every sampler at its defaults, and
# full-graph training, 5 seeds, 200 epochs) and bench/pyg/sample.py with the same samplers,
# batch sizes, walk length, fan-outs, coverage, epochs and seeds (both tools' defaults agree:
# 500 roots x walk 2, 4000 node draws, 500 edges, 512 seeds x fan-out 15,10, coverage 50).
#   bash bench/run-sample-on-gpu.sh [GRAPH...]        (default: cora citeseer tolokers)
# Writes $OUT (default gpu-out): sample.json / sample.md (tcgnn), pyg-sample-GRAPH.json, logs.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
[ -x .gpu/bin/tcgnn ] || { [ -f .gpu/unpack ] && bash .gpu/unpack; }
lib=$(dirname "$(find / -name 'libcusparse.so.12*' -not -path '/proc/*' 2>/dev/null | head -1)" 2>/dev/null)
[ -n "$lib" ] && export LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"
export TCGNN_DATASETS="$PWD/.gpu/datasets" PYTHONUNBUFFERED=1
T=${TCGNN_BIN:-.gpu/bin/tcgnn}
graphs=("$@")
[ ${#graphs[@]} -eq 0 ] && graphs=(cora citeseer tolokers)
echo "== tcgnn bench sample ($(date -u +%T))"
timeout 1200 $T bench sample "${graphs[@]}" --device gpu --epochs 200 --seeds 0,1,2,3,4 --out "$out" > "$out/bench-sample.log" 2>&1 || echo "tcgnn bench sample failed ($?)"
grep -E "test|error|wrote" "$out/bench-sample.log" | tail -50
echo "== bench/pyg/sample.py ($(date -u +%T))"
for g in "${graphs[@]}"; do
  timeout 570 python3 bench/pyg/sample.py "$g" --model gcn sage --sampler saint-rw saint-node saint-edge neighbor \
    --epochs 200 --seeds 0,1,2,3,4 --out "$out/pyg-sample-$g.json" >> "$out/pyg-sample.log" 2>&1 || echo "pyg sample.py $g failed ($?)"
done
grep -E "test|epoch|Error|failed" "$out/pyg-sample.log" | tail -50
exit 0
