#!/usr/bin/env bash
# Accuracy of sampled training against full-graph training (CPU or GPU): GCN and SAGE with each
# sampler at its defaults on cora and citeseer, mean ± std of 5 seeds. One line per run.
# Usage: bash bench/sample-accuracy.sh [extra train options, e.g. --device cpu]
set -u
BIN=${TCGNN_BIN:-target/release/tcgnn}
for g in cora citeseer; do
  for m in gcn sage; do
    for s in full saint-rw saint-node saint-edge neighbor; do
      opt=(); [ "$s" != full ] && opt=(--sampler "$s")
      line=$("$BIN" train "$g" --model "$m" --seeds 0,1,2,3,4 --quiet "${opt[@]}" "$@" 2>&1 | grep "test accuracy")
      echo "$g $m $s: ${line#*test accuracy at best validation epoch }"
    done
  done
done
