#!/usr/bin/env bash
# Multi-GPU checks and figures (issue 46) in one device call on nvidia-h200-x2:
#   bash bench/run-dist-on-gpu.sh SEED [STAGE...]    stages: tests small exchange rmat buckets balance input partition sbm
#                                                    (default: all but alone; alone needs one GPU only)
# tests: the GPU dist tests; small: `bench dist` on citeseer, cora, pubmed at 1 and 2 GPUs (GCN,
# GAT); exchange: citeseer's 2-GPU step with NCCL's transport log; rmat: `bench dist` on R-MAT
# 2^22 x 16 relabelled with SEED, lp partition; partition: an SBM of 10M nodes / 100M entries
# generated with SEED, partitioned by lp into 2 parts and written (`partition -o`), timed; sbm:
# `bench dist` on an SBM of 10M nodes / mean degree 10 / 64 features (generated in the run, lp
# partition) for GCN and GAT on 1 and 2 GPUs, the halo exchange overlapped and serial.
# rmat and sbm measure overlapped and serial steps (`--overlap true,false`); small and rmat each
# eagerly and recorded as a CUDA graph (`--cuda-graph true,false`). buckets: R-MAT 2^22 x 16
# as rmat, the overlapped step with the gradient all-reduce in per-layer buckets during the
# backward and after it (`--grad-buckets true,false`), and citeseer's 2-GPU step the same way.
# balance: R-MAT 2^22 x 16 as rmat (overlapped), the row-weighted cut (rows weigh 7 edges, the
# default) against edges alone (--row-weight 1) and against two rounds cut again on the parts'
# measured times (--rebalance 2). input: SBM 2M (sbm:2000000) at 1 and 2
# GPUs, overlapped and serial, the input layer's halo rows formed locally or exchanged
# (`--local-input true,false`), overlapped products split by columns or rows: what the link
# makes of the bytes the local input saves and of the work the column split adds (one GPU
# measured the compute of each, bench/NOTES.md). alone (one GPU): each part of the 2-part cuts alone on the one
# device (`bench dist --alone`, per-op times with --profile-ops), R-MAT 2^22 x 16 and SBM 2M.
# pull: SBM 10M GCN at 1 and 2 GPUs, input exchanged, the pulling backward against the give-back
# (`--pull-backward true,false`), split by rows and columns; then with NCCL's copy-engine transfers.
set -uo pipefail
cd "$(dirname "$0")/.."
seed=${1:?usage: run-dist-on-gpu.sh SEED [STAGE...]}
shift
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(tests small exchange rmat buckets balance input partition sbm)
out=${OUT:-gpu-out}
mkdir -p "$out"
[ -x .gpu/bin/tcgnn ] || bash .gpu/unpack
export NCCL_NVLS_ENABLE=0 TCGNN_DATASETS=$PWD/.gpu/datasets TCGNN_BIN=$PWD/.gpu/bin/tcgnn PYTHONUNBUFFERED=1
T=.gpu/bin/tcgnn
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
for stage in "${stages[@]}"; do
  echo "== $stage ($(date -u +%T))"
  case "$stage" in
    tests)
      timeout 300 .gpu/bin/test-test-it dist_train dist_device_gpu dist_halo dist_overlap nn_gat_attention nn_ops::gpu_dropout > "$out/tests.log" 2>&1
      grep -E "test result|FAILED|panicked" "$out/tests.log" | head ;;
    small)
      timeout 150 $T bench dist citeseer cora pubmed --gpus 1,2 --models gcn,gat --overlap true,false --cuda-graph true,false --reps 30 --out "$out/dist_small" > "$out/dist-small.log" 2>&1 \
        || echo "bench dist small: exit $?"
      tail -12 "$out/dist-small.log" ;;
    exchange)
      NCCL_DEBUG=INFO timeout 60 $T train citeseer --model gcn --gpus 2 --epochs 50 --verbose > "$out/citeseer-2gpu.log" 2>&1 || echo "2-GPU citeseer: exit $?"
      grep -E " via |NET/|step" "$out/citeseer-2gpu.log" | grep -v "^\s*$" | head -12 ;;
    rmat)
      timeout 300 $T bench dist rmat:22:16:$seed:relabel --gpus 1,2 --partition-method lp --models gcn,gat --overlap true,false --cuda-graph true,false --reps 20 --out "$out/dist_rmat22" \
        > "$out/dist-rmat22.log" 2>&1 || echo "bench dist rmat22: exit $?"
      tail -12 "$out/dist-rmat22.log" ;;
    buckets)
      timeout 300 $T bench dist rmat:22:16:$seed:relabel --gpus 1,2 --partition-method lp --models gcn,gat --overlap true --grad-buckets true,false --reps 20 --out "$out/dist_buckets" \
        > "$out/dist-buckets.log" 2>&1 || echo "bench dist buckets: exit $?"
      tail -10 "$out/dist-buckets.log"
      timeout 120 $T bench dist citeseer --gpus 1,2 --models gcn,gat --overlap false --grad-buckets true,false --reps 30 --out "$out/dist_buckets_small" \
        > "$out/dist-buckets-small.log" 2>&1 || echo "bench dist buckets (citeseer): exit $?"
      tail -10 "$out/dist-buckets-small.log" ;;
    balance)
      timeout 300 $T bench dist rmat:22:16:$seed:relabel --gpus 1,2 --partition-method lp --models gcn,gat --overlap true --row-weight 7,1 --reps 20 --out "$out/dist_balance" \
        > "$out/dist-balance.log" 2>&1 || echo "bench dist balance: exit $?"
      tail -8 "$out/dist-balance.log"
      timeout 300 $T bench dist rmat:22:16:$seed:relabel --gpus 2 --partition-method lp --models gcn,gat --overlap true --rebalance 2 --reps 20 --out "$out/dist_rebalance" \
        > "$out/dist-rebalance.log" 2>&1 || echo "bench dist rebalance: exit $?"
      tail -8 "$out/dist-rebalance.log" ;;
    input)
      timeout 300 $T bench dist sbm:2000000 --gpus 1,2 --partition-method lp --models gcn,gat --overlap true,false --local-input true,false --overlap-split columns,rows --reps 20 \
        --out "$out/dist_input" > "$out/dist-input.log" 2>&1 || echo "bench dist input: exit $?"
      grep "GPU(s)" "$out/dist-input.log" | tail -16 ;;
    alone)
      timeout 300 $T bench dist rmat:22:16:$seed:relabel --parts 1,2 --alone --profile-ops --partition-method lp --models gcn,gat --overlap true --row-weight 7,1 --reps 20 \
        --out "$out/alone_rmat22" > "$out/alone-rmat22.log" 2>&1 || echo "bench dist alone rmat22: exit $?"
      grep "P = " "$out/alone-rmat22.log"
      timeout 200 $T bench dist sbm:2000000 --parts 1,2 --alone --profile-ops --partition-method lp --models gcn,gat --overlap true --reps 20 \
        --out "$out/alone_sbm2m" > "$out/alone-sbm2m.log" 2>&1 || echo "bench dist alone sbm2m: exit $?"
      grep "P = " "$out/alone-sbm2m.log" ;;
    partition)
      s0=$SECONDS
      timeout 100 $T gen sbm --n 10000000 --avg-degree 10 --seed $seed -o /tmp/sbm10m.tcg > "$out/sbm10m-gen.log" 2>&1 || echo "gen: exit $?"
      echo "generated in $((SECONDS - s0)) s"; s0=$SECONDS
      mkdir -p /tmp/sbm10m-lp
      timeout 150 $T partition /tmp/sbm10m.tcg --parts 2 --method lp -o /tmp/sbm10m-lp > "$out/sbm10m-partition.log" 2>&1 || echo "partition: exit $?"
      echo "partitioned (lp, 2 parts, written) in $((SECONDS - s0)) s"; tail -8 "$out/sbm10m-partition.log" ;;
    sbm)
      # sbm:N:CLASSES:DEGREE generates the graph, its label-correlated features (--features 64)
      # and masks in the run; every rank generates the same one and partitions it by lp.
      timeout 590 $T bench dist sbm:10000000:8:10 --gpus 1,2 --partition-method lp --models gcn,gat --features 64 --overlap true,false \
        --warmup 3 --reps 10 --out "$out/dist_sbm10m" > "$out/dist-sbm10m.log" 2>&1 || echo "bench dist sbm10m: exit $?"
      tail -12 "$out/dist-sbm10m.log" ;;
    pull)
      # SBM 10M GCN with the input exchanged: the pulling backward (and X W's interior rows beside
      # the fill) against the give-back, rows and columns split; then the best point with NCCL's
      # copy-engine transfers (NCCL_P2P_USE_CUDA_MEMCPY=1: no SMs taken from the product beside).
      timeout 300 $T bench dist sbm:10000000:8:10 --gpus 1,2 --partition-method lp --models gcn --features 64 --overlap true --local-input false \
        --overlap-split rows,columns --pull-backward true,false --warmup 3 --reps 20 --out "$out/dist_sbm10m_pull" > "$out/dist-sbm10m-pull.log" 2>&1 \
        || echo "bench dist sbm10m pull: exit $?"
      grep "GPU(s)" "$out/dist-sbm10m-pull.log"
      NCCL_P2P_USE_CUDA_MEMCPY=1 timeout 150 $T bench dist sbm:10000000:8:10 --gpus 2 --partition-method lp --models gcn --features 64 --overlap true \
        --local-input false --overlap-split rows --warmup 3 --reps 20 --out "$out/dist_sbm10m_ce" > "$out/dist-sbm10m-ce.log" 2>&1 || echo "bench dist sbm10m ce: exit $?"
      grep "GPU(s)" "$out/dist-sbm10m-ce.log" ;;
    *) echo "unknown stage $stage" >&2 ;;
  esac
done
tar -czf "$out/dist-results.tgz" -C "$out" --exclude dist-results.tgz . && echo "wrote $out/dist-results.tgz"
