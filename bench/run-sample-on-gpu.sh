#!/usr/bin/env bash
# Sampled training on a GPU machine (after ../shared/tools/gpu-stage), side by side with the
# plain-PyTorch baseline: `tcgnn bench sample` (GCN and SAGE, every sampler at its defaults, and
# full-graph training, 5 seeds, 200 epochs) and bench/pyg/sample.py with the same samplers,
# batch sizes, walk length, fan-outs, coverage, epochs and seeds (both tools' defaults agree:
# max(1000, N/20) roots x walk 2, 4000 node draws, 500 edges, 512 seeds x fan-out 15,10, coverage 50).
#   bash bench/run-sample-on-gpu.sh [GRAPH...]        (default: cora citeseer tolokers twitch_DE musae_facebook)
# One graph per device call keeps each call under 10 minutes (cora: ~3-5 min, estimated).
# twitch_DE and musae_facebook have sparse multi-hot features and no split of their own (a
# seeded random 60/20/20 one, as for every graph without masks).
# Writes $OUT (default gpu-out): sample-GRAPH/sample.{json,md} (tcgnn), pyg-sample-GRAPH.json, logs.
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
[ ${#graphs[@]} -eq 0 ] && graphs=(cora citeseer tolokers twitch_DE musae_facebook)
# One graph at a time, each under the device's 10-minute limit: tcgnn <= 280 s, PyG <= 280 s.
for g in "${graphs[@]}"; do
  name=$(basename "$g" | sed 's/\.mtx.*//; s/:/-/g')
  echo "== $name: tcgnn bench sample ($(date -u +%T))"
  timeout 280 $T bench sample "$g" --device gpu --epochs 200 --seeds 0,1,2,3,4 --out "$out/sample-$name" > "$out/bench-sample-$name.log" 2>&1 || echo "tcgnn bench sample $g failed ($?)"
  grep -E "test|error|wrote" "$out/bench-sample-$name.log" | tail -12
  echo "== $name: bench/pyg/sample.py ($(date -u +%T))"
  timeout 280 python3 bench/pyg/sample.py "$g" --model gcn sage --sampler saint-rw saint-node saint-edge neighbor \
    --epochs 200 --seeds 0,1,2,3,4 --out "$out/pyg-sample-$name.json" > "$out/pyg-sample-$name.log" 2>&1 || echo "pyg sample.py $g failed ($?)"
  grep -E "test|epoch|Error|failed" "$out/pyg-sample-$name.log" | tail -12
done
exit 0
