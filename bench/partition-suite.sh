#!/usr/bin/env bash
# Partition statistics of every suite graph: halo / all-gather volume and edge balance for
# P = 2, 4, 8 with each method (CPU only). Prints TSV: graph method P halo/all-gather balance seconds.
#   bash bench/partition-suite.sh [TCGNN] [DATASETS] > partition-suite.tsv
set -euo pipefail
TCGNN=${1:-target/release/tcgnn}
DATASETS=${2:-../shared/datasets}
printf 'graph\tmethod\tparts\thalo_ratio\tedge_balance\tseconds\n'
for f in "$DATASETS"/*.mtx.gz; do
  g=$(basename "$f" .mtx.gz)
  for m in contiguous community metis; do
    for p in 2 4 8; do
      out=$("$TCGNN" partition "$f" --parts "$p" --method "$m") || { printf '%s\t%s\t%s\terror\n' "$g" "$m" "$p"; continue; }
      secs=$(sed -n '1s/.* by [a-z]* in \([0-9.]*\) s.*/\1/p' <<<"$out")
      bal=$(sed -n 's/^edge balance (max \/ mean) \([0-9.]*\);.*/\1/p' <<<"$out")
      ratio=$(sed -n 's/.*halo \/ all-gather \([0-9.]*\) ->.*/\1/p' <<<"$out")
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$g" "$m" "$p" "$ratio" "$bal" "$secs"
    done
  done
done
