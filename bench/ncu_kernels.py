#!/usr/bin/env python3
"""Sums `ncu --csv` output per kernel name (top 25): time, share of the profiled window, and where
the window asked for them (`--metrics gpu__time_duration.sum,dram__bytes.sum,lts__t_bytes.sum`)
DRAM and L2 traffic with their rates, for the per-kernel step accounts in bench/NOTES.md.
    python3 bench/ncu_kernels.py ncu.csv [DRAM_PEAK_GBPS]
The window should span whole steps (a launch count of several steps), so the shares are a step's."""
import csv, sys, collections

peak = float(sys.argv[2]) if len(sys.argv) > 2 else 4800.0  # H200 HBM3e, GB/s
scale = {'nsecond': 1, 'usecond': 1e3, 'msecond': 1e6, 'second': 1e9,
         'byte': 1, 'Kbyte': 1e3, 'Mbyte': 1e6, 'Gbyte': 1e9, 'Tbyte': 1e12,
         'KB': 1e3, 'MB': 1e6, 'GB': 1e9}
rows = list(csv.reader(open(sys.argv[1])))
hdr = None
# name -> {metric: total}; launches counted on the time metric
agg = collections.defaultdict(lambda: collections.defaultdict(float))
calls = collections.Counter()
for r in rows:
    if 'Kernel Name' in r and 'Metric Value' in r:
        hdr = r
        continue
    if hdr is None or len(r) != len(hdr):
        continue
    d = dict(zip(hdr, r))
    try:
        v = float(d['Metric Value'].replace(',', ''))
    except ValueError:
        continue
    v *= scale.get(d.get('Metric Unit', ''), 1)
    k = d['Kernel Name'][:70]
    m = d.get('Metric Name')
    agg[k][m] += v
    if m == 'gpu__time_duration.sum':
        calls[k] += 1
tot = sum(a['gpu__time_duration.sum'] for a in agg.values())
print(f"total {tot / 1e3:.1f} us over {sum(calls.values())} kernels; DRAM peak {peak:.0f} GB/s")
print(f"{'us':>9} {'share':>6} {'calls':>5} {'DRAM MB':>8} {'GB/s':>6} {'%peak':>5} {'L2 MB':>8} {'L2 GB/s':>7}  kernel")
for k, a in sorted(agg.items(), key=lambda x: -x[1]['gpu__time_duration.sum'])[:25]:
    t = a['gpu__time_duration.sum']
    dram, l2 = a.get('dram__bytes.sum', 0.0), a.get('lts__t_bytes.sum', 0.0)
    bw = dram / t if t else 0.0  # bytes/ns = GB/s
    print(f"{t / 1e3:9.1f} {100 * t / tot:5.1f}% {calls[k]:5d} {dram / 1e6:8.1f} {bw:6.0f} {100 * bw / peak:4.0f}% "
          f"{l2 / 1e6:8.1f} {l2 / t if t else 0:7.0f}  {k}")
