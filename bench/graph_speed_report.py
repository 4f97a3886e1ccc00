#!/usr/bin/env python3
"""The epoch times of `bench/run-graph-on-gpu.sh speed` side by side: per set, tcgnn's median
training epoch per configuration (`speed-SET-CONFIG/graph.json`, epochs 2.. of one fold) and
PyG's per configuration (`pyg-speed-SET.json`: eager / torch.compile x f32 / TF32, the median
of its timed epochs), the fastest of each and their ratio (PyG's fastest / tcgnn's fastest).

    python3 bench/graph_speed_report.py OUT_DIR [--out OUT_DIR/speed-summary.json]

Standard library only.
"""

import argparse
import json
import sys
from pathlib import Path


def tcgnn_runs(out, name):
    runs = []
    for d in sorted(out.glob(f"speed-{name}-*")):
        f = d / "graph.json"
        if not d.is_dir() or not f.exists():
            continue
        r = json.loads(f.read_text())
        fold = r["folds"][0]
        epochs = [e["train_s"] for e in fold["epochs"]]
        bind = [e["build_s"] for e in fold["epochs"]]
        runs.append(dict(config=d.name[len(f"speed-{name}-"):], device=r["device"], epoch_ms=1e3 * r["summary"]["epoch_s_median"],
                         epochs_ms=[1e3 * t for t in epochs], bind_or_build_ms=[1e3 * t for t in bind],
                         bound=fold.get("bound"), train_graphs=fold["train_graphs"]))
    return runs


def pyg_runs(out, name):
    f = out / f"pyg-speed-{name}.json"
    if not f.exists():
        return []
    r = json.loads(f.read_text())
    return [dict(config=("compile" if s["compile"] else "eager") + ("-tf32" if s["tf32"] else "-f32"), epoch_ms=1e3 * s["epoch_s_median"],
                 step_ms=s["step_ms_median"], train_graphs=s["train_graphs"], batches=s["batches"]) for s in r["speed"]]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir")
    p.add_argument("--out")
    a = p.parse_args(argv)
    out = Path(a.dir)
    names = sorted({d.name[len("speed-"):].split("-", 1)[0] for d in out.glob("speed-*") if d.is_dir()})
    if not names:
        sys.exit(f"no speed-SET-CONFIG folders in {out}")
    sets = []
    for n in names:
        ours, pyg = tcgnn_runs(out, n), pyg_runs(out, n)
        best = min(ours, key=lambda r: r["epoch_ms"]) if ours else None
        best_pyg = min(pyg, key=lambda r: r["epoch_ms"]) if pyg else None
        ratio = best_pyg["epoch_ms"] / best["epoch_ms"] if best and best_pyg else None
        sets.append(dict(set=n, tcgnn=ours, pyg=pyg, tcgnn_best=best and best["config"], tcgnn_best_ms=best and best["epoch_ms"],
                         pyg_best=best_pyg and best_pyg["config"], pyg_best_ms=best_pyg and best_pyg["epoch_ms"], speedup_vs_pyg_best=ratio))
        print(f"{n}: tcgnn {best and best['config']} {best and best['epoch_ms']:.1f} ms/epoch, "
              f"PyG {best_pyg and best_pyg['config']} {best_pyg and best_pyg['epoch_ms']:.1f} ms/epoch, "
              f"{'%.1fx' % ratio if ratio else 'n/a'}" if best and best_pyg else f"{n}: incomplete ({len(ours)} tcgnn, {len(pyg)} PyG runs)")
    text = json.dumps(dict(sets=sets), indent=1)
    path = Path(a.out) if a.out else out / "speed-summary.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(text)
    tmp.replace(path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
