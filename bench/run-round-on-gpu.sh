#!/usr/bin/env bash
# This round's GPU checks beside bench/run-train-on-gpu.sh (after ../shared/tools/gpu-stage):
# every test binary, the 10M-node SBM trained full-graph, setup from a cached .tcg, and NCCL
# with a world of one. Logs land in $OUT (or ./gpu-out).
#   bash bench/run-round-on-gpu.sh [tests] [large] [nccl] [dist] [evening] [gpus2] [night] [setup3] [sample3] [bigsample] [idle] [sample5] [pygsample] [gpusample] [neighbor] [gpuneighbor] [sparseneighbor] [final16] [gatfused] [dense] [densesmall] [denselarge] [agnnfused]
# evening: the step benches of the evening round (fused input dropout, fused attention, setup
# from .tcg, the device halo exchange, the rebound sampled model); gpus2: on a two-GPU machine,
# loss curves of 1 vs 2 GPUs over NCCL and bench dist --gpus 1,2; night: every model's step on the
# small graphs beside PyG's fastest configuration measured in the same call (torch.compile on cora);
# setup3: setup of SBM 10M x 64 from .tcg, three runs; sample3: sampled training on cora and
# citeseer beside the plain-PyTorch samplers (bench/pyg/sample.py), same call, 3 seeds;
# bigsample: SBM 8M x 128 GCN 3 x 256 sampled, evaluated layer-wise; idle: GPU idle between
# sampled steps from events; sample5: 5-seed accuracy on cora, citeseer, tolokers, twitch_DE,
# musae_facebook; pygsample: the plain-PyTorch samplers on the same graphs; gpusample: GraphSAINT
# batches made on the GPU against the CPU workers and the plain-PyTorch samplers, same call;
# gpuneighbor: the same for neighbour sampling (NB_ON=gpu to skip the CPU workers, NB_QUICK=1 for
# the tests and one training run only); sparseneighbor: neighbour batches on the GPU with sparse
# features cut per batch (the default) against them dense on the device, the plain-PyTorch
# samplers in the same call, and GraphSAINT re-measured (SAINT=0 skips it); final16: every
# sampler on the five graphs on the GPU and the plain-PyTorch samplers, same call, one seed;
# gatfused: the fused GAT attention's tests, and GAT fused / unfused beside PyG's fastest GATConv
# configuration on cora, citeseer, pubmed and R-MAT 2^18 x 16, same call (GAT_SEEDS=0,1,2,3,4
# for the 5-seed accuracy; GAT_TESTS to choose the tests); dense: the streaming dropout products'
# tests and timing, then GCN / AGNN steps on an unseen R-MAT 2^18 x 16 (DENSE_SEED, default 7,
# relabelled) and SBM 1M beside PyG's fastest GCN in the same call (DENSE_NCU=1 adds a per-kernel
# ncu breakdown of a GCN step on each); densesmall / denselarge: every model on cora, citeseer,
# pubmed / GCN, AGNN, GAT on those two large graphs, beside PyG's fastest in the same call;
# agnnfused: the fused attention ops' tests (AGNN and GAT on the shared row split), the fused
# AGNN / GAT layer against the unfused one (`bench attention`) and AGNN fused / unfused steps on
# the unseen R-MAT (DENSE_SEED) with a per-op profile (AGNN_PYG=1 adds PyG's fastest AGNN).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
[ -x .gpu/bin/tcgnn ] || bash .gpu/unpack
export NCCL_NVLS_ENABLE=0 TCGNN_DATASETS="$PWD/.gpu/datasets" TCGNN_BIN="$PWD/.gpu/bin/tcgnn"
lib=$(dirname "$(find / -name 'libcusparse.so.12*' -not -path '/proc/*' 2>/dev/null | head -1)" 2>/dev/null)
[ -n "$lib" ] && export LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"
what=" $* "
T=.gpu/bin/tcgnn
if [[ "$what" == *" tests "* ]]; then
  bash .gpu/run-tests.sh --nocapture > "$out/tests.log" 2>&1
  grep -E "^== |test result|FAILED|panicked" "$out/tests.log" | grep -v "test result: ok. 0 passed" | head -90
fi
if [[ "$what" == *" large "* ]]; then
  # SBM 10M x 500 features, GCN in tf32: peak host memory and the setup split.
  /usr/bin/time -v $T train sbm:10000000 --features 500 --model gcn --precision tf32 --epochs 3 --quiet > "$out/sbm10m.log" 2>&1
  grep -E "accuracy|time:|setup|Maximum resident|Elapsed|error" "$out/sbm10m.log"
  # Setup from a cached binary graph (SBM 10M x 64 features: 100M edges).
  $T gen sbm --n 10000000 --avg-degree 10 --features 64 -o /tmp/s.mtx.gz > /dev/null 2>&1
  /usr/bin/time -f "parse .mtx.gz: %e s, %M KB" $T info /tmp/s.mtx.gz > "$out/parse.log" 2>&1; tail -1 "$out/parse.log"
  $T convert /tmp/s.mtx.gz --to tcg -o /tmp/s.tcg > /dev/null 2>&1
  /usr/bin/time -f "load .tcg: %e s, %M KB" $T info /tmp/s.tcg > "$out/tcg.log" 2>&1; tail -1 "$out/tcg.log"
  $T train /tmp/s.tcg --features 64 --precision tf32 --epochs 3 --quiet 2>&1 | grep -E "accuracy|time:|setup"
  # Setup alone from the .tcg, split (issue 15: under 3 s), and with the first step.
  $T bench setup /tmp/s.tcg --features 64 --precision tf32 --first-step --out "$out" 2>&1 | tail -3
fi
if [[ "$what" == *" nccl "* ]]; then
  ls /usr/lib/x86_64-linux-gnu/libnccl* 2>/dev/null | head -2
  .gpu/bin/test-test-dist_halo --nocapture 2>&1 | grep -E "nccl|skipped|test result" | head
fi
if [[ "$what" == *" dist "* ]]; then
  # The distributed step on one GPU: in-process parts, NCCL world of one, --gpus 1, bench dist.
  .gpu/bin/test-test-dist_train_gpu --nocapture 2>&1 | grep -E "skipped|P = |test result|panicked" | head -30
  $T train sbm:100000 --model gat --partitions 2 --epochs 5 --quiet 2>&1 | tail -4
  $T train sbm:100000 --model gcn --gpus 1 --epochs 5 --quiet --verbose 2>&1 | tail -4
  $T bench dist --parts 1,2,4 --models gcn,gat --out "$out" 2>&1 | tail -8
fi
if [[ "$what" == *" evening "* ]]; then
  timeout 120 $T bench train rmat:18:16:1:relabel --models gcn:2x16,sage,gin,agnn --precisions tf32,f16 --seeds 0 --out "$out/bt" 2>&1 | tail -14
  timeout 60 $T bench attention rmat:18:16:1:relabel pubmed --k 32,128 --out "$out/att" 2>&1 | tail -8
  [ -f /tmp/s.tcg ] || timeout 60 $T gen sbm --n 10000000 --avg-degree 10 --features 1 -o /tmp/s.tcg > /dev/null 2>&1
  timeout 60 $T bench setup /tmp/s.tcg --features 64 --precision tf32 --first-step --out "$out/setup" 2>&1 | tail -4
  timeout 90 $T bench dist sbm:1000000 --parts 1,2 --models gcn,gat --halo-path device,host --out "$out/dist" 2>&1 | tail -8
  timeout 120 $T bench sample cora citeseer --device gpu --no-full --epochs 200 --seeds 0,1,2 --out "$out/sample" 2>&1 | tail -20
fi
if [[ "$what" == *" gpus2 "* ]]; then
  nvidia-smi -L
  for m in gcn agnn gat sage; do for g in 1 2; do
    timeout 60 $T train sbm:100000 --model $m --gpus $g --epochs 20 --quiet --out "$out/loss-$m-$g" > "$out/loss-$m-$g.log" 2>&1 || echo "$m --gpus $g failed"; done; done
  timeout 200 $T bench dist sbm:2000000 --gpus 1,2 --models gcn,gat --out "$out/sbm2m" 2>&1 | tail -10
fi
if [[ "$what" == *" night "* ]]; then
  # PyG first (its records feed bench train's speedup column): 500 random features as ours.
  pt=(--timing-only --features 500 --no-feature-norm --fastest)
  timeout 200 python3 bench/pyg/train.py cora citeseer pubmed --model gcn agnn gat sage gin "${pt[@]}" \
    --variants edge_index,edge_index+tf32,csr+tf32 --out "$out/pyg-time-small.json" > "$out/pyg-small.log" 2>&1 || echo "pyg small failed ($?)"
  timeout 200 python3 bench/pyg/train.py cora --model gcn agnn gat sage gin "${pt[@]}" \
    --variants edge_index+tf32,compile+best+tf32 --out "$out/pyg-time-compile.json" > "$out/pyg-compile.log" 2>&1 || echo "pyg compile failed ($?)"
  grep -hE "fastest|Error" "$out"/pyg-small.log "$out"/pyg-compile.log | tail -20
  pyg=(); for f in "$out"/pyg-time-compile.json "$out"/pyg-time-small.json; do [ -f "$f" ] && pyg+=(--pyg "$f"); done
  timeout 150 $T bench train cora citeseer pubmed --models gcn:2x16,agnn:4x32,gat,sage,gin --precisions tf32 --seeds 0 "${pyg[@]}" --out "$out/bt" 2>&1 | tail -18
fi
if [[ "$what" == *" setup3 "* ]]; then
  [ -f /tmp/s.tcg ] || { /usr/bin/time -f "gen .tcg: %e s" timeout 120 $T gen sbm --n 10000000 --avg-degree 10 --features 1 -o /tmp/s.tcg > /dev/null; }
  for i in 1 2 3; do
    timeout 60 $T bench setup /tmp/s.tcg --features 64 --precision tf32 --out "$out/setup$i" 2>&1 | tail -3
  done
fi
if [[ "$what" == *" sample3 "* ]]; then
  timeout 150 $T bench sample cora citeseer --device gpu --no-full --epochs 200 --seeds 0,1,2 --out "$out/sample" 2>&1 | tail -20
  for gr in cora citeseer; do
    timeout 100 python3 bench/pyg/sample.py $gr --model gcn sage --sampler saint-rw saint-node saint-edge neighbor \
      --seeds 0,1,2 --epochs 200 --out "$out/pyg-sample-$gr.json" > "$out/pyg-sample-$gr.log" 2>&1 || echo "pyg sample $gr failed ($?)"
    grep -E "epoch|ms" "$out/pyg-sample-$gr.log" | tail -10
  done
fi
if [[ "$what" == *" bigsample "* ]]; then
  # Issue 16: an SBM whose full-graph GCN 3 x 256 does not fit the GPU trains in sampling mode,
  # evaluated layer-wise (the run says why it did not train full-graph).
  /usr/bin/time -v timeout 420 $T train sbm:8000000 --features 128 --model gcn --layers 3 --hidden 256 \
    --sampler neighbor --fanout 15,10,5 --batch-size 1024 --steps-per-epoch 40 --sample-workers 12 --epochs 4 \
    --out "$out/bigsample" > "$out/bigsample.log" 2>&1
  grep -E "does not fit|layer-wise|sampled training|accuracy|setup|Maximum resident|Elapsed|rror" "$out/bigsample.log" | cut -c1-600
  grep -E '"(val_acc|test_acc)"' "$out/bigsample/train.json" | head -8
fi
if [[ "$what" == *" idle "* ]]; then
  # The GPU's idle time between sampled steps (events), steps running ahead as in train.
  timeout 200 $T bench sample cora citeseer tolokers --device gpu --epochs 100 --seeds 0 --out "$out/idle" 2>&1 | grep -E "idle|wrote" | tail -30
fi
if [[ "$what" == *" sample5 "* ]]; then
  # Accuracy over 5 seeds against full-graph training (and the split of the epoch), our side.
  timeout 240 $T bench sample cora citeseer --device gpu --epochs 200 --seeds 0,1,2,3,4 --out "$out/sample5" 2>&1 | tail -22
  timeout 240 $T bench sample tolokers twitch_DE musae_facebook --device gpu --epochs 50 --seeds 0,1,2,3,4 --out "$out/sample5big" 2>&1 | tail -32
fi
if [[ "$what" == *" pygsample "* ]]; then
  # The plain-PyTorch samplers with PyG's convs on the same graphs and settings.
  for gr in cora citeseer tolokers twitch_DE musae_facebook; do
    ep=200; case $gr in cora|citeseer) ;; *) ep=50;; esac
    timeout 150 python3 bench/pyg/sample.py $gr --model gcn sage --sampler saint-rw saint-node saint-edge neighbor \
      --seeds 0,1 --epochs $ep --out "$out/pyg-sample-$gr.json" > "$out/pyg-sample-$gr.log" 2>&1 || echo "pyg sample $gr failed ($?)"
    grep -E "epoch|ms" "$out/pyg-sample-$gr.log" | tail -10
  done
fi
if [[ "$what" == *" gpusample "* ]]; then
  # Few files come back from $OUT: two bench JSONs and one JSON per graph of the baseline.
  for t in sample_device sample_train sample_bound layerwise_inference; do
    echo "== $t"; .gpu/bin/test-test-$t --nocapture 2>&1 | grep -E "test result|FAILED|panicked|skipped"
  done
  for on in ${GS_ON:-gpu cpu}; do
    samplers=saint-rw,saint-node,saint-edge; [ $on = cpu ] && samplers=$samplers,neighbor
    timeout 240 $T bench sample cora citeseer tolokers twitch_DE musae_facebook --device gpu --samplers $samplers \
      --no-full --sample-on $on --epochs 60 --seeds 0 --out "/tmp/gs-$on" > /tmp/gs-$on.log 2>&1 || echo "bench sample --sample-on $on failed ($?)"
    grep -E "rror" /tmp/gs-$on.log; cp /tmp/gs-$on/sample.json "$out/gs-$on.json"; cut -d'|' -f2-8,12-17 /tmp/gs-$on/sample.md
  done
  for gr in cora citeseer tolokers twitch_DE musae_facebook; do
    timeout 100 python3 bench/pyg/sample.py $gr --model gcn sage --sampler saint-rw saint-node saint-edge neighbor \
      --seeds 0 --epochs 20 --out "$out/pyg-gs-$gr.json" > /tmp/pyg-gs-$gr.log 2>&1 || echo "pyg sample $gr failed ($?)"
    grep -E "epoch .* ms" /tmp/pyg-gs-$gr.log | sed 's/(.*//' | tail -8
  done
fi
if [[ "$what" == *" neighbor "* ]]; then
  # Neighbour sampling with the defaults (sparse features dense on the GPU) beside the baseline.
  timeout 200 $T bench sample tolokers twitch_DE musae_facebook --device gpu --samplers neighbor --no-full --epochs 30 --seeds 0 \
    --out /tmp/nb > /tmp/nb.log 2>&1 || echo "bench sample neighbor failed ($?)"
  cp /tmp/nb/sample.json "$out/nb.json"; cut -d'|' -f2-7,14-17 /tmp/nb/sample.md
  for gr in tolokers twitch_DE musae_facebook; do
    timeout 100 python3 bench/pyg/sample.py $gr --model gcn sage --sampler neighbor --seeds 0 --epochs 10 \
      --out "$out/pyg-nb-$gr.json" > /tmp/pyg-nb-$gr.log 2>&1 || echo "pyg sample $gr failed ($?)"
    grep -E "epoch .* ms" /tmp/pyg-nb-$gr.log | sed 's/(.*//'
  done
fi
if [[ "$what" == *" gpuneighbor "* ]]; then
  for t in sample_device_neighbor sample_device sample_train sample_bound; do
    echo "== $t"; .gpu/bin/test-test-$t --nocapture 2>&1 | grep -E "test result|FAILED|panicked|skipped" | head -20
  done
  for on in gpu cpu; do
    # The GPU sampler makes the union batches (--neighbor-union); the default per-layer ones are the CPU workers'.
    $T train tolokers --model gcn --sampler neighbor --sample-on $on $([ $on = gpu ] && echo --neighbor-union) --epochs 10 2>&1 | grep -E "rror|accuracy|idle|epoch 10|sampl" | tail -6
  done
  if [ -z "${NB_QUICK:-}" ]; then
    for on in ${NB_ON:-gpu cpu}; do
      timeout 200 $T bench sample cora citeseer tolokers twitch_DE musae_facebook --device gpu --samplers neighbor --no-full \
        --sample-on $on $([ $on = gpu ] && echo --neighbor-union) --epochs 30 --seeds 0 --out "/tmp/nb-$on" > /tmp/nb-$on.log 2>&1 || echo "bench sample neighbor --sample-on $on failed ($?)"
      grep -E "rror" /tmp/nb-$on.log; cp /tmp/nb-$on/sample.json "$out/nb-$on.json"; cut -d'|' -f2-8,12-17 /tmp/nb-$on/sample.md
    done
    for gr in cora citeseer tolokers twitch_DE musae_facebook; do
      timeout 100 python3 bench/pyg/sample.py $gr --model gcn sage --sampler neighbor --seeds 0 --epochs 10 \
        --out "$out/pyg-nb-$gr.json" > /tmp/pyg-nb-$gr.log 2>&1 || echo "pyg sample $gr failed ($?)"
      grep -E "epoch .* ms" /tmp/pyg-nb-$gr.log | sed 's/(.*//'
    done
  fi
fi
if [[ "$what" == *" sparseneighbor "* ]]; then
  for t in sample_device_neighbor sample_device; do
    echo "== $t"; .gpu/bin/test-test-$t --nocapture 2>&1 | grep -E "test result|FAILED|panicked|skipped" | head -20
  done
  for fo in auto gpu; do
    timeout 150 $T bench sample twitch_DE musae_facebook --device gpu --samplers neighbor --neighbor-union --no-full --features-on $fo \
      --epochs 30 --seeds 0 --out "/tmp/snb-$fo" > /tmp/snb-$fo.log 2>&1 || echo "bench sample neighbor --features-on $fo failed ($?)"
    grep -E "rror" /tmp/snb-$fo.log; cp /tmp/snb-$fo/sample.json "$out/snb-$fo.json"; cut -d'|' -f2-8,12-17 /tmp/snb-$fo/sample.md
  done
  if [ "${SAINT:-1}" = 1 ]; then
    timeout 200 $T bench sample cora citeseer tolokers twitch_DE musae_facebook --device gpu --samplers saint-rw,saint-node,saint-edge --no-full \
      --epochs 30 --seeds 0 --out /tmp/saint > /tmp/saint.log 2>&1 || echo "bench sample saint failed ($?)"
    grep -E "rror" /tmp/saint.log; cp /tmp/saint/sample.json "$out/saint-gpu.json"; cut -d'|' -f2-8,12-17 /tmp/saint/sample.md
  fi
  for gr in twitch_DE musae_facebook; do
    timeout 100 python3 bench/pyg/sample.py $gr --model gcn sage --sampler neighbor --seeds 0 --epochs 10 \
      --out "$out/pyg-nb-$gr.json" > /tmp/pyg-nb-$gr.log 2>&1 || echo "pyg sample $gr failed ($?)"
    grep -E "epoch .* ms" /tmp/pyg-nb-$gr.log | sed 's/(.*//'
  done
fi
if [[ "$what" == *" final16 "* ]]; then
  for t in sample_device_neighbor sample_device sample_train sample_bound spmm; do
    echo "== $t"; .gpu/bin/test-test-$t --nocapture 2>&1 | grep -E "test result|FAILED|panicked|skipped" | head -20
  done
  timeout 240 $T bench sample cora citeseer tolokers twitch_DE musae_facebook --device gpu --no-full \
    --epochs 30 --seeds 0 --out /tmp/f16 > /tmp/f16.log 2>&1 || echo "bench sample failed ($?)"
  grep -E "rror" /tmp/f16.log; cp /tmp/f16/sample.json "$out/ours-gpu.json"; cut -d'|' -f2-8,12-17 /tmp/f16/sample.md
  for gr in cora citeseer tolokers twitch_DE musae_facebook; do
    timeout 100 python3 bench/pyg/sample.py $gr --model gcn sage --sampler saint-rw saint-node saint-edge neighbor --seeds 0 \
      --epochs 10 --timing-only --out "$out/pyg-$gr.json" > /tmp/pyg-$gr.log 2>&1 || echo "pyg sample $gr failed ($?)"
    grep -E "epoch .* ms" /tmp/pyg-$gr.log | sed 's/(.*//'
  done
fi
if [[ "$what" == *" gatfused "* ]]; then
  for t in ${GAT_TESTS:-nn_gat_attention nn_gat_ops nn_ops nn_gpu nn_train sample_device_neighbor sample_device spmm}; do
    echo "== $t"; .gpu/bin/test-test-$t --test-threads=1 2>&1 | grep -E "test result|panicked|rel. error" | head -8
  done
  # Per-kernel time of the (fused) GAT step on pubmed (ncu-serialised).
  if [ -x /usr/local/cuda/bin/ncu ]; then
    /usr/local/cuda/bin/ncu --csv --metrics gpu__time_duration.sum --launch-skip 200 --launch-count 200 $T train pubmed --model gat --epochs 8 > "$out/ncu-gat.csv" 2>/dev/null
    python3 bench/ncu_kernels.py "$out/ncu-gat.csv" > "$out/ncu-gat.txt"; head -16 "$out/ncu-gat.txt"
  fi
  g=/tmp/tcgnn-graphs; mkdir -p $g
  [ -f $g/rmat18.mtx.gz ] || $T gen rmat --scale 18 --edge-factor 16 -o $g/rmat18.mtx.gz > /dev/null
  timeout 300 python3 bench/pyg/train.py cora citeseer pubmed $g/rmat18.mtx.gz --model gat --timing-only --features 500 --no-feature-norm \
    --fastest --variants ${GAT_PYG_VARIANTS:-edge_index,edge_index+tf32} --out "$out/pyg-gat.json" > /tmp/pyg-gat.log 2>&1 || echo "pyg gat failed ($?)"
  grep -hE "fastest|Error" /tmp/pyg-gat.log | tail -8
  timeout 300 $T bench train cora citeseer pubmed $g/rmat18.mtx.gz --models gat,gat+variant --precisions ${GAT_PRECISIONS:-tf32} --seeds ${GAT_SEEDS:-0} \
    --pyg "$out/pyg-gat.json" --out "$out/bt" 2>&1 | tail -14
fi
if [[ "$what" == *" dense "* ]]; then
  for t in ${DENSE_TESTS-nn_dropout_gemm nn_gpu}; do
    echo "== $t"; .gpu/bin/test-test-$t --test-threads=1 --nocapture 2>&1 | grep -E "test result|panicked|rel error|dropout_gemm .* ms" | head -14
  done
  g=/tmp/g; mkdir -p $g; seed=${DENSE_SEED:-7}
  if [ "${DENSE_BENCH:-1}" = 1 ]; then
    [ -f $g/rmat18s$seed.mtx.gz ] || $T convert rmat:18:16:$seed:relabel -o $g/rmat18s$seed.mtx.gz > /dev/null
    [ -f $g/sbm1m.mtx.gz ] || $T gen sbm --n 1000000 --classes 8 --features 64 -o $g/sbm1m.mtx.gz > /dev/null
    if [ "${DENSE_NCU:-0}" = 1 ] && [ -x /usr/local/cuda/bin/ncu ]; then
      for gr in ${DENSE_NCU_GRAPHS:-rmat18s$seed}; do for pr in ${DENSE_NCU_PREC:-tf32}; do
        /usr/local/cuda/bin/ncu --csv --metrics gpu__time_duration.sum --launch-skip 300 --launch-count 120 $T train $g/$gr.mtx.gz --model gcn --precision $pr --epochs 12 > "$out/ncu-gcn-$gr-$pr.csv" 2>/dev/null
        python3 bench/ncu_kernels.py "$out/ncu-gcn-$gr-$pr.csv" > "$out/ncu-gcn-$gr-$pr.txt"; echo "-- ncu gcn $gr $pr"; head -16 "$out/ncu-gcn-$gr-$pr.txt"
      done; done
    fi
    if [ "${DENSE_PYG:-1}" = 1 ]; then
      timeout 240 python3 bench/pyg/train.py $g/rmat18s$seed.mtx.gz $g/sbm1m.mtx.gz --model gcn --timing-only --features 500 --no-feature-norm \
        --fastest --variants edge_index+tf32,csr+tf32 --out "$out/pyg-gcn.json" > /tmp/pyg-gcn.log 2>&1 || echo "pyg gcn failed ($?)"
      grep -hE "fastest|Error" /tmp/pyg-gcn.log | tail -4
    fi
    pyg=(--pyg "$out/pyg-gcn.json")
    [ -n "${DENSE_PYG_EXTRA:-}" ] && pyg+=(--pyg "$DENSE_PYG_EXTRA")
    timeout 300 $T bench train $g/rmat18s$seed.mtx.gz $g/sbm1m.mtx.gz --models ${DENSE_MODELS:-gcn:2x16,agnn} --precisions tf32,f16 --seeds 0 \
      "${pyg[@]}" --out "$out/bt" 2>&1 | tail -14
  fi
fi
if [[ "$what" == *" densesmall "* ]]; then
  # Every model on cora, citeseer, pubmed beside PyG's fastest (no torch.compile: it was never
  # fastest by much on these, NOTES 2026-11-23 night), same call.
  timeout 300 python3 bench/pyg/train.py cora citeseer pubmed --model gcn agnn gat sage gin --timing-only --features 500 --no-feature-norm \
    --fastest --variants edge_index,edge_index+tf32,csr+tf32 --out "$out/pyg-small.json" > /tmp/pyg-small.log 2>&1 || echo "pyg small failed ($?)"
  grep -hE "fastest|Error" /tmp/pyg-small.log | tail -16
  timeout 240 $T bench train cora citeseer pubmed --models gcn:2x16,agnn,gat,sage,gin --precisions tf32 --seeds ${DENSE_SEEDS:-0} \
    --pyg "$out/pyg-small.json" --out "$out/bts" 2>&1 | tail -18
fi
if [[ "$what" == *" denselarge "* ]]; then
  g=/tmp/g; mkdir -p $g; seed=${DENSE_SEED:-7}
  [ -f $g/rmat18s$seed.mtx.gz ] || $T convert rmat:18:16:$seed:relabel -o $g/rmat18s$seed.mtx.gz > /dev/null
  [ -f $g/sbm1m.mtx.gz ] || $T gen sbm --n 1000000 --classes 8 --features 64 -o $g/sbm1m.mtx.gz > /dev/null
  timeout 300 python3 bench/pyg/train.py $g/rmat18s$seed.mtx.gz --model gcn agnn gat --timing-only --features 500 --no-feature-norm \
    --fastest --variants edge_index,edge_index+tf32,csr+tf32 --out "$out/pyg-rmat.json" > /tmp/pyg-rmat.log 2>&1 || echo "pyg rmat failed ($?)"
  timeout 120 python3 bench/pyg/train.py $g/sbm1m.mtx.gz --model gcn --timing-only --features 500 --no-feature-norm \
    --fastest --variants edge_index+tf32,csr+tf32 --out "$out/pyg-sbm.json" > /tmp/pyg-sbm.log 2>&1 || echo "pyg sbm failed ($?)"
  grep -hE "fastest|Error" /tmp/pyg-rmat.log /tmp/pyg-sbm.log | tail -8
  timeout 240 $T bench train $g/rmat18s$seed.mtx.gz $g/sbm1m.mtx.gz --models gcn:2x16,agnn,gat --precisions tf32,f16 --seeds 0 \
    --pyg "$out/pyg-rmat.json" --pyg "$out/pyg-sbm.json" --out "$out/btl" 2>&1 | tail -14
fi
if [[ "$what" == *" agnnfused "* ]]; then
  g=/tmp/g; mkdir -p $g; seed=${DENSE_SEED:-7}
  for t in ${AGNN_TESTS:-fused_attention nn_gat_attention nn_gat_ops nn_gpu nn_train}; do
    timeout 200 .gpu/bin/test-test-$t --test-threads=1 > "$out/t-$t.log" 2>&1; echo "$t: rc $? $(grep -E '^test result' "$out/t-$t.log" | tail -1)"
    grep -E "FAILED|panicked" "$out/t-$t.log" | head -5
  done
  [ -f $g/rmat18s$seed.mtx.gz ] || $T convert rmat:18:16:$seed:relabel -o $g/rmat18s$seed.mtx.gz > /dev/null
  timeout 120 $T bench attention $g/rmat18s$seed.mtx.gz pubmed --k 32,64,128 --out "$out/att-agnn" 2>&1 | tail -8
  timeout 120 $T bench attention $g/rmat18s$seed.mtx.gz pubmed --model gat --k 64 --out "$out/att-gat" 2>&1 | tail -4
  for v in "" "--variant"; do
    timeout 60 $T train $g/rmat18s$seed.mtx.gz --model agnn $v --precision f16 --features 500 --epochs 5 --profile-ops > "$out/prof-agnn$v.log" 2>&1
    echo "agnn $v:"; grep -E " ms|time:" "$out/prof-agnn$v.log" | head -24
  done
  if [ "${AGNN_PYG:-0}" = 1 ]; then
    timeout 200 python3 bench/pyg/train.py $g/rmat18s$seed.mtx.gz --model agnn gat --timing-only --features 500 --no-feature-norm \
      --fastest --variants edge_index,edge_index+tf32 --out "$out/pyg-rmat.json" > /tmp/pyg-rmat.log 2>&1 || echo "pyg rmat failed ($?)"
    grep -hE "fastest|Error" /tmp/pyg-rmat.log | tail -4
    pyg="--pyg $out/pyg-rmat.json"
  fi
  timeout 200 $T bench train $g/rmat18s$seed.mtx.gz --models agnn,agnn+variant,gat --precisions tf32,f16 --seeds 0 ${pyg:-} --out "$out/bta" 2>&1 | tail -10
fi
exit 0
