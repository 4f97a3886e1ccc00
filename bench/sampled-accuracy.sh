#!/usr/bin/env bash
# Sampled vs full-graph accuracy on the CPU (issue 45): 5 seeds per setting, one line per
# setting "graph model sampler epochs: mean ± std". Usage: bench/sampled-accuracy.sh BINARY OUT
# [GRAPHS...]. DEVICE=gpu runs on the GPU. Neighbour sampling runs NB_EPOCHS epochs on the larger graphs (default 50: an
# epoch visits every train node, 20-30 steps there) and 200 on cora / citeseer (one batch an
# epoch); the others 200 (one step an epoch in full-graph, GraphSAINT's epoch draws about N
# nodes). EXTRA adds options to every run.
set -u
BIN=${1:?binary}; OUT=${2:?output file}; shift 2
GRAPHS=${*:-cora citeseer twitch_DE musae_facebook}
SEEDS=${SEEDS:-0,1,2,3,4}
NB_EPOCHS=${NB_EPOCHS:-50}
SETTINGS=${SETTINGS:-"full neighbor saint-rw"}
MODELS=${MODELS:-"gcn sage"}
for g in $GRAPHS; do
  for m in $MODELS; do
    for s in $SETTINGS; do
      case $s in
        full) args=(); ep=200 ;;
        # cora / citeseer: 140 / 120 train nodes, one batch an epoch: as many steps as full-graph.
        neighbor) args=(--sampler neighbor); case $g in cora|citeseer) ep=200 ;; *) ep=$NB_EPOCHS ;; esac ;;
        *) args=(--sampler "$s"); ep=200 ;;
      esac
      t0=$(date +%s)
      line=$(nice -n 10 "$BIN" train "$g" --device "${DEVICE:-cpu}" --model "$m" --seeds "$SEEDS" --epochs "$ep" "${args[@]}" ${EXTRA:-} 2>&1 | grep "test accuracy")
      acc=$(echo "$line" | sed -E 's/.*epoch ([0-9.]+ ± [0-9.]+)%.*/\1/')
      echo "$g $m $s $ep ${EXTRA:-} : $acc ($(( $(date +%s) - t0 )) s)" >> "$OUT"
    done
  done
done
