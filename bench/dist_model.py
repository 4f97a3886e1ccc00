#!/usr/bin/env python3
"""Scaling model of the distributed step (issue 46.5): predicts the 4- and 8-GPU steps from the
1- and 2-GPU points of `tcgnn bench dist --gpus 1,2` (bench/results/dist.json).

    python3 bench/dist_model.py [dist.json] [--gpus 4,8] [--link-gbs R] [--json OUT]

Per (graph, model), from the serial 2-GPU point (overlap false; the only one in older files):
- compute(P) = 2 x compute(2) / P: the work splits evenly (the 2-GPU point carries the measured
  imbalance and the extended matrices' halo rows);
- halo rows of a part: a part is 1/P of the nodes; an outside node is in its halo when one of its
  d_eff edges lands in the part, so halo / all-gather = 1 - (1 - 1/P)^d_eff, with d_eff fitted
  to the 2-GPU halo ratio r2 (d_eff = log(1 - r2) / log(1/2));
- halo time = a per-step latency (the smallest 2-GPU halo time in the file: the small graphs'
  exchanges move kilobytes, so their time is launches and handshakes) + a rank's halo bytes
  (halo rows x the bytes a halo row moves per step, measured) over the rate a rank reached at 2
  GPUs beyond that latency (or --link-gbs): NVSwitch gives every GPU its full NVLink rate
  whatever the peer count, so the per-rank rate is taken as P-independent;
- all-reduce: the gradients are kilobytes, so its time is latency (and the wait for the slower
  rank, which the 2-GPU figure includes): NCCL's tree / LL protocols on one NVSwitch host grow
  about as log2 P, so all-reduce(P) = all-reduce(2) log2 P (a ring's 2 (P - 1) steps would be
  the pessimistic bound);
- overlapped: where the file holds an overlapped 2-GPU point, the exposed fraction of the halo
  e = (step - compute - all-reduce) / halo at 2 GPUs (0..1) is kept at P GPUs (optimistic: a
  part's interior rows thin out as P grows); else e = 1 (serial).
step(P) = compute(P) + e halo(P) + all-reduce(P); speedup = step(1) / step(P).
"""
import argparse
import json
import math
import sys


def points(records):
    """(graph, model) -> {(parts, overlap): record}, device path only."""
    out = {}
    for r in records:
        if r.get("halo_path", "device") != "device":
            continue
        out.setdefault((r["graph"], r["model"]), {})[(r["parts"], bool(r.get("overlap", False)))] = r
    return out


def predict(pts, gpus, link_gbs, latency):
    one = pts.get((1, False)) or pts.get((1, True))
    two = pts.get((2, False))
    if one is None or two is None:
        return None
    over = pts.get((2, True))
    t1 = one["step_ms"]
    comp2, halo2, ar2 = two["compute_ms"], two["halo_exchange_ms"], two["all_reduce_ms"]
    r2 = min(max(two["halo_ratio"], 1e-9), 1 - 1e-9)
    d_eff = math.log(1 - r2) / math.log(0.5)
    nodes = two["nodes"]
    rows2 = two["halo_rows"] / 2  # per part
    bytes2 = two["halo_bytes"] / 2  # per rank and step
    per_row = bytes2 / max(rows2, 1)
    rate = link_gbs * 1e6 if link_gbs else bytes2 / max(halo2 - latency, 1e-3)  # bytes per ms
    exposed = 1.0
    if over is not None and halo2 > 0:
        exposed = min(max((over["step_ms"] - comp2 - over["all_reduce_ms"]) / halo2, 0.0), 1.0)
    rows = [{"gpus": 1, "measured": True, "compute_ms": one["compute_ms"], "halo_ms": 0.0, "all_reduce_ms": one["all_reduce_ms"], "step_ms": t1}]
    rows.append({"gpus": 2, "measured": True, "compute_ms": comp2, "halo_ms": halo2, "all_reduce_ms": ar2, "step_ms": two["step_ms"]})
    if over is not None:
        rows.append({"gpus": 2, "measured": True, "overlap": True, "compute_ms": comp2, "halo_ms": halo2 * exposed,
                     "all_reduce_ms": over["all_reduce_ms"], "step_ms": over["step_ms"]})
    for p in gpus:
        ratio = 1 - (1 - 1 / p) ** d_eff
        halo_rows = ratio * nodes * (p - 1) / p
        halo = latency + halo_rows * per_row / rate
        comp = 2 * comp2 / p
        ar = ar2 * math.log2(p)
        step = comp + exposed * halo + ar
        rows.append({"gpus": p, "measured": False, "overlap": over is not None, "halo_ratio": ratio, "halo_mb_per_rank": halo_rows * per_row / 1e6,
                     "compute_ms": comp, "halo_ms": exposed * halo, "all_reduce_ms": ar, "step_ms": step})
    for r in rows:
        r["speedup"] = t1 / r["step_ms"]
    return {"d_eff": d_eff, "link_gb_s": rate / 1e6, "exposed": exposed, "rows": rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file", nargs="?", default="bench/results/dist.json")
    ap.add_argument("--gpus", default="4,8")
    ap.add_argument("--link-gbs", type=float, default=None, help="per-rank halo rate in GB/s (default: the 2-GPU point's)")
    ap.add_argument("--json", default=None, help="write the predictions here")
    a = ap.parse_args()
    report = json.load(open(a.file))
    gpus = [int(g) for g in a.gpus.split(",")]
    out = {}
    pts_all = points(report["records"])
    latency = min((r["halo_exchange_ms"] for p in pts_all.values() for (n, o), r in p.items() if n == 2 and not o), default=0.0)
    print(f"# Scaling model from {a.file} ({report.get('device')}, {report.get('date')})\n")
    print(f"halo latency {latency:.3f} ms a step (the smallest 2-GPU halo time)\n")
    for (graph, model), pts in sorted(pts_all.items()):
        m = predict(pts, gpus, a.link_gbs, latency)
        if m is None:
            continue
        out[f"{graph} {model}"] = m
        print(f"## {graph} {model}: d_eff {m['d_eff']:.2f}, halo rate {m['link_gb_s']:.0f} GB/s a rank, exposed halo {m['exposed']:.2f}\n")
        print("| GPUs | | compute ms | halo ms | all-reduce ms | step ms | speedup |")
        print("|---:|---|---:|---:|---:|---:|---:|")
        for r in m["rows"]:
            kind = "measured" if r["measured"] else "predicted"
            if r.get("overlap"):
                kind += ", overlapped"
            print(f"| {r['gpus']} | {kind} | {r['compute_ms']:.2f} | {r['halo_ms']:.2f} | {r['all_reduce_ms']:.2f} | {r['step_ms']:.2f} | {r['speedup']:.2f}x |")
        print()
    if not out:
        print("no graph has both a 1- and a serial 2-GPU device-path point", file=sys.stderr)
        sys.exit(1)
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
        import os
        os.replace(a.json + ".tmp", a.json)


if __name__ == "__main__":
    main()
