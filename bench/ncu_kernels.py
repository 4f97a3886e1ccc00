#!/usr/bin/env python3
"""Sums `ncu --csv --metrics gpu__time_duration.sum` output per kernel name (top 25), for the
per-kernel step breakdowns in bench/NOTES.md:  python3 bench/ncu_kernels.py ncu.csv"""
import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1])))
hdr = None
agg = collections.defaultdict(lambda: [0, 0.0])
for r in rows:
    if 'Kernel Name' in r and 'Metric Value' in r:
        hdr = r; continue
    if hdr is None or len(r) != len(hdr): continue
    d = dict(zip(hdr, r))
    if d.get('Metric Name') != 'gpu__time_duration.sum': continue
    v = float(d['Metric Value'].replace(',', ''))
    unit = d.get('Metric Unit', 'ns')
    if unit == 'usecond': v *= 1000
    if unit == 'msecond': v *= 1e6
    k = d['Kernel Name'][:60]
    agg[k][0] += 1; agg[k][1] += v
tot = sum(v for _, v in agg.values())
print(f"total {tot/1e3:.1f} us over {sum(c for c,_ in agg.values())} kernels")
for k, (c, v) in sorted(agg.items(), key=lambda x: -x[1][1])[:25]:
    print(f"{v/1e3:9.1f} us {c:5d}x {k}")
