#!/usr/bin/env python3
"""Joins `tcgnn bench sample` output(s) with bench/pyg/sample.py records of the same call into
bench/results/sample.{json,md,svg}: per (graph, model, sampler) our epoch time against the
plain-PyTorch samplers', the GPU's idle share between steps, and accuracy against full-graph
training. Standard library only (the build machine has no plotting package).

    python3 bench/sample_report.py --ours A/sample.json B/sample.json --pyg P/pyg-sample-*.json --out bench/results
"""
import argparse
import json
import os
from pathlib import Path


def write(path, text):
    """`text` to a temporary name beside `path`, renamed when complete (no half-written report)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ours", nargs="+", required=True)
    p.add_argument("--pyg", nargs="+", required=True)
    p.add_argument("--out", default="bench/results")
    p.add_argument("--note", default="")
    p.add_argument("--accuracy", nargs="+", default=[], help="an earlier sample.json whose accuracy columns (more seeds) replace these runs' "
                   "(valid where the batches, and so the training, are the same)")
    a = p.parse_args()
    earlier = {}
    for f in a.accuracy:  # later files win
        for r in json.load(open(f))["comparison"]:
            earlier[(r["graph"], r["model"], r["sampler"])] = r
    ours = [r for f in a.ours for r in json.load(open(f))]
    by = {(r["graph"], r["model"], r["sampler"]): r for r in ours}
    pyg = {}
    for f in a.pyg:
        for r in json.load(open(f))["records"]:
            c = r["config"]
            pyg[(r["graph"], c["model"], c["sampler"])] = r
    rows = []
    for key, r in by.items():
        if r["sampler"] == "full":
            continue
        full = by.get((key[0], key[1], "full"))
        q = pyg.get(key)
        acc = earlier.get(key)
        rows.append({
            "graph": key[0], "model": key[1], "sampler": key[2],
            "ours_train_ms_per_epoch": r["train_ms_per_epoch"],
            "pyg_epoch_ms": q["epoch_ms"]["median"] if q else None,
            "speedup": q["epoch_ms"]["median"] / r["train_ms_per_epoch"] if q else None,
            "gpu_idle_fraction": r.get("gpu_idle_fraction"),
            "gpu_step_ms_per_epoch": r.get("gpu_step_ms_per_epoch"),
            "sample_on": r.get("sample_on", "cpu"),
            "test_acc_mean": acc["test_acc_mean"] if acc else r["test_acc_mean"],
            "test_acc_std": acc["test_acc_std"] if acc else r["test_acc_std"],
            "seeds": acc["seeds"] if acc else r["seeds"],
            "full_graph_test_acc_mean": acc["full_graph_test_acc_mean"] if acc else (full["test_acc_mean"] if full else None),
            # Timing-only baseline runs carry no accuracy: the earlier file's, where given.
            "pyg_test_acc_mean": 100 * q["test_acc_mean"] if q and q.get("test_acc_mean") is not None else (acc or {}).get("pyg_test_acc_mean"),
            "pyg_seeds": len(q["per_seed"]) if q and q.get("per_seed") else (acc or {}).get("pyg_seeds"),
        })
    out = Path(a.out)
    write(out / "sample.json", json.dumps({"ours": ours, "pyg": list(pyg.values()), "comparison": rows, "note": a.note}, indent=1))
    md = ["| graph | model | sampler | batches made on | ours ms/epoch | plain-PyTorch ms/epoch | speedup | GPU idle | test acc (ours) | full graph | gap | PyG-style acc |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        f = lambda x, p=2: "" if x is None else f"{x:.{p}f}"
        gap = None if r["full_graph_test_acc_mean"] is None else r["test_acc_mean"] - r["full_graph_test_acc_mean"]
        idle = "" if r["gpu_idle_fraction"] is None else f"{100 * r['gpu_idle_fraction']:.1f}%"
        md.append(f"| {r['graph']} | {r['model']} | {r['sampler']} | {r['sample_on']} | {f(r['ours_train_ms_per_epoch'])} | {f(r['pyg_epoch_ms'])} | "
                  f"{f(r['speedup'], 1)}x | {idle} | {r['test_acc_mean']:.2f} ± {r['test_acc_std']:.2f} | {f(r['full_graph_test_acc_mean'])} | {f(gap)} | {f(r['pyg_test_acc_mean'])} |")
    fast = sum(1 for r in rows if r["speedup"] and r["speedup"] >= 5)
    md.append(f"\n{fast} of {sum(1 for r in rows if r['speedup'])} settings at >= 5x the plain-PyTorch samplers. {a.note}\n")
    write(out / "sample.md", "\n".join(md) + "\n")
    # Two bar rows per setting: speedup (log scale) and GPU idle.
    w, rh, left = 900, 16, 260
    h = 40 + rh * len(rows) + 30
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
         f'<text x="10" y="18" font-size="13">Sampled training on the H100: speedup over plain-PyTorch samplers (blue, log scale; line = 5x) and GPU idle between steps (orange)</text>']
    import math
    xmax = math.log10(30)
    sx = lambda v: left + (w - left - 20) * 0.6 * max(0.0, math.log10(max(v, 1.0))) / xmax
    for i, r in enumerate(rows):
        y = 34 + i * rh
        s.append(f'<text x="{left - 6}" y="{y + 11}" text-anchor="end">{r["graph"]} {r["model"]} {r["sampler"]}</text>')
        if r["speedup"]:
            s.append(f'<rect x="{left}" y="{y + 1}" width="{sx(r["speedup"]) - left:.1f}" height="{rh / 2 - 1}" fill="#3b6fb6"/>')
            s.append(f'<text x="{sx(r["speedup"]) + 3:.1f}" y="{y + 8}">{r["speedup"]:.1f}x</text>')
        if r["gpu_idle_fraction"] is not None:
            iw = (w - left - 20) * 0.3 * r["gpu_idle_fraction"]
            x0 = left + (w - left - 20) * 0.68
            s.append(f'<rect x="{x0:.1f}" y="{y + rh / 2}" width="{iw:.1f}" height="{rh / 2 - 1}" fill="#e08a2c"/>')
            s.append(f'<text x="{x0 + iw + 3:.1f}" y="{y + rh - 2}">{100 * r["gpu_idle_fraction"]:.0f}%</text>')
    x5 = sx(5)
    s.append(f'<line x1="{x5:.1f}" y1="30" x2="{x5:.1f}" y2="{h - 28}" stroke="#444" stroke-dasharray="3,3"/>')
    s.append("</svg>")
    write(out / "sample.svg", "\n".join(s) + "\n")


if __name__ == "__main__":
    main()
