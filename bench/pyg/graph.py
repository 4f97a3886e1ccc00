#!/usr/bin/env python3
"""PyTorch Geometric baseline for `tcgnn train tu:NAME --task graph`: the same model, the same
TU files and the same folds file; 10-fold accuracy (the GIN paper's epoch rule) and epoch / step
times, eager and torch.compile, f32 and TF32.

    # accuracy on the folds tcgnn wrote (tcgnn train tu:MUTAG --task graph --folds-file F ...)
    python3 bench/pyg/graph.py accuracy MUTAG --folds-file F --model gin --epochs 350 --out mutag.json
    # epoch and step time, every configuration (eager / compile x f32 / tf32), one fold's batches
    python3 bench/pyg/graph.py speed NCI1 --model gin --out nci1-speed.json
    # a synthetic set of 100,000 graphs of about 50 nodes in TU format (tcgnn reads DIR/SYN100K)
    python3 bench/pyg/graph.py generate --graphs 100000 --nodes 50 --dir /tmp/syn --name SYN100K
    python3 bench/pyg/graph.py speed /tmp/syn/SYN100K --model gin --out syn-speed.json

A set is NAME (looked up in $TCGNN_DATASETS/tu, default ../shared/datasets/tu) or a path
prefix DIR/NAME. Read as tcgnn's reader (host/graph/tu.rs) and PyG's read_tu_data: self-loops
dropped, duplicate edges merged, graph labels renumbered in sorted order, node labels (minus the
smallest) one-hot, or without node labels the one-hot degree up to the set's largest degree.

The model mirrors tcgnn's graph task (host/task/graph): an encoder of L convs (hidden width 64;
GAT 8 heads x 8), BatchNorm + ReLU after every hidden conv (GAT: ELU, no BatchNorm, as tcgnn's
GAT), BatchNorm + ReLU after the last conv too (the head's node norm), the node rows pooled per
graph (sum for GIN, mean otherwise), then BatchNorm1d(64) - Linear(64, 64) - ReLU -
Dropout(0.5) - Linear(64, classes); cross entropy, Adam lr 0.01 halved every 50 epochs, batch
128, no weight decay. Needs torch, torch_geometric and numpy only.
"""

import argparse
import datetime
import gzip
import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- the TU files


def tu_prefix(arg):
    if os.sep in arg or arg.startswith("."):
        p = Path(arg)
        return p.parent, p.name
    base = Path(os.environ.get("TCGNN_DATASETS", REPO.parent / "shared" / "datasets"))
    return base / "tu", arg


def tu_file(d, name, part, required=True):
    for ext in (".txt.gz", ".txt"):
        p = d / f"{name}_{part}{ext}"
        if p.exists():
            return p
    if required:
        sys.exit(f"{d / (name + '_' + part)}.txt[.gz]: no such file")
    return None


def read_ints(path, cols=1):
    """Integers separated by commas / whitespace, `cols` a line (numpy's C parser)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        text = f.read().replace(",", " ")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        a = np.fromstring(text, dtype=np.int64, sep=" ")
    if cols > 1:
        if a.size % cols:
            sys.exit(f"{path}: {a.size} numbers, not {cols} a line")
        return a.reshape(-1, cols)
    return a


def read_tu(arg):
    d, name = tu_prefix(arg)
    batch = read_ints(tu_file(d, name, "graph_indicator")) - 1
    if np.any(np.diff(batch) < 0) or np.any(np.diff(batch) > 1) or batch[0] != 0:
        sys.exit(f"{name}: graph indicator not contiguous")
    n, graphs = len(batch), int(batch[-1]) + 1
    labels_raw = read_ints(tu_file(d, name, "graph_labels"))
    assert len(labels_raw) == graphs, f"{len(labels_raw)} graph labels for {graphs} graphs"
    classes, y = np.unique(labels_raw, return_inverse=True)
    e = read_ints(tu_file(d, name, "A"), cols=2) - 1
    e = e[e[:, 0] != e[:, 1]]
    e = np.unique(e, axis=0)  # coalesce: sorted by (row, col), duplicates merged
    assert np.all(batch[e[:, 0]] == batch[e[:, 1]]), "edge across graphs"
    nl = tu_file(d, name, "node_labels", required=False)
    if nl is not None:
        lab = read_ints(nl)
        lab = lab - lab.min()
        feat_index, width, source = lab, int(lab.max()) + 1, "node_labels"
    else:
        deg = np.bincount(e[:, 0], minlength=n)
        feat_index, width, source = deg, int(deg.max()) + 1, "degree"
    offsets = np.zeros(graphs + 1, dtype=np.int64)
    np.add.at(offsets, batch + 1, 1)
    offsets = np.cumsum(offsets)
    return dict(name=name, n=n, graphs=graphs, y=y.astype(np.int64), classes=len(classes), edges=e, batch=batch,
                offsets=offsets, feat_index=feat_index, width=width, source=source)


def to_pyg(s):
    """One torch_geometric Data per graph (node ids local to the graph)."""
    import torch
    from torch_geometric.data import Data

    e, off = s["edges"], s["offsets"]
    # Edges are sorted by source row, and a graph's nodes are contiguous: cut by the offsets.
    cut = np.searchsorted(e[:, 0], off)
    x_all = torch.zeros(s["n"], s["width"])
    x_all[torch.arange(s["n"]), torch.from_numpy(s["feat_index"])] = 1.0
    out = []
    for g in range(s["graphs"]):
        lo, hi = off[g], off[g + 1]
        ei = torch.from_numpy((e[cut[g]:cut[g + 1]] - lo).T.copy())
        out.append(Data(x=x_all[lo:hi], edge_index=ei, y=torch.tensor([s["y"][g]])))
    return out


def read_folds(path, s):
    f = json.loads(Path(path).read_text())
    if f.get("format") != "tcgnn-folds-1":
        sys.exit(f"{path}: not a tcgnn folds file")
    if f["graphs"] != s["graphs"] or list(f["labels"]) != s["y"].tolist():
        sys.exit(f"{path}: folds of another set ({f['dataset']}, {f['graphs']} graphs; this is {s['name']}, {s['graphs']})")
    seen = np.zeros(s["graphs"], dtype=np.int64)
    for t in f["test"]:
        seen[np.asarray(t, dtype=np.int64)] += 1
    if not np.all(seen == 1):
        sys.exit(f"{path}: the folds do not partition the graphs")
    return [np.asarray(t, dtype=np.int64) for t in f["test"]]


# --------------------------------------------------------------------------- the model


def build(model, f_in, classes, layers, hidden, heads, pooling, dropout):
    import torch
    from torch import nn
    from torch_geometric.nn import GATConv, GCNConv, GINConv, SAGEConv, global_add_pool, global_max_pool, global_mean_pool

    pool = dict(sum=global_add_pool, mean=global_mean_pool, max=global_max_pool)[pooling]
    width = hidden * (heads if model == "gat" else 1)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            convs, norms = [], []
            d = f_in
            for i in range(layers):
                last = i + 1 == layers
                if model == "gin":
                    c = GINConv(nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, hidden)), eps=0.0)
                    d2 = hidden
                elif model == "gcn":
                    c, d2 = GCNConv(d, hidden), hidden
                elif model == "sage":
                    c, d2 = SAGEConv(d, hidden, aggr="mean"), hidden
                elif model == "gat":
                    c = GATConv(d, width, heads=1, concat=False) if last else GATConv(d, hidden, heads=heads, concat=True)
                    d2 = width
                else:
                    raise SystemExit(f"unknown model {model}")
                convs.append(c)
                if not last and model != "gat":
                    norms.append(nn.BatchNorm1d(d2))
                d = d2
            self.convs, self.norms = nn.ModuleList(convs), nn.ModuleList(norms)
            self.node_norm = nn.BatchNorm1d(width)
            self.head = nn.Sequential(nn.BatchNorm1d(width), nn.Linear(width, width), nn.ReLU(), nn.Dropout(dropout),
                                      nn.Linear(width, classes))

        def forward(self, x, edge_index, batch, num_graphs: int):
            for i, conv in enumerate(self.convs):
                x = conv(x, edge_index)
                if i + 1 < len(self.convs):
                    x = torch.nn.functional.elu(x) if model == "gat" else torch.relu(self.norms[i](x))
            x = torch.relu(self.node_norm(x))
            return self.head(pool(x, batch, size=num_graphs))

    return Net()


# --------------------------------------------------------------------------- training


def make(args, s, device, seed):
    import torch

    torch.manual_seed(seed)
    heads = 8 if args.model == "gat" else 1
    hidden = args.hidden or (64 // heads)
    pooling = args.pooling or ("sum" if args.model == "gin" else "mean")
    m = build(args.model, s["width"], s["classes"], args.layers, hidden, heads, pooling, args.dropout).to(device)
    opt = torch.optim.Adam(m.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=50, gamma=0.5)
    return m, opt, sched, pooling


def step_fn(model, opt):
    import torch.nn.functional as F

    def step(b):
        opt.zero_grad(set_to_none=True)
        out = model(b.x, b.edge_index, b.batch, b.num_graphs)
        loss = F.cross_entropy(out, b.y)
        loss.backward()
        opt.step()
        return loss

    return step


def evaluate(model, loader, device):
    import torch

    model.eval()
    right = 0
    with torch.no_grad():
        for b in loader:
            b = b.to(device, non_blocking=True)
            right += int((model(b.x, b.edge_index, b.batch, b.num_graphs).argmax(-1) == b.y).sum())
    model.train()
    return right


def accuracy(args, s, data, folds, device):
    import torch
    from torch_geometric.loader import DataLoader

    curves, epoch_s = [], []
    if args.fold is not None and not 0 <= args.fold < len(folds):
        sys.exit(f"--fold {args.fold}: the folds file has folds 0 to {len(folds) - 1}")
    ks = [args.fold] if args.fold is not None else range(min(len(folds), args.only_folds or len(folds)))
    for k in ks:
        test = set(folds[k].tolist())
        train_ds = [data[g] for g in range(s["graphs"]) if g not in test]
        test_ds = [data[g] for g in folds[k]]
        model, opt, sched, pooling = make(args, s, device, args.seed + k)
        step = step_fn(model, opt)
        tl = DataLoader(train_ds, batch_size=args.batch_size, shuffle=True)
        vl = DataLoader(test_ds, batch_size=args.batch_size)
        curve = []
        for epoch in range(args.epochs):
            t0 = time.perf_counter()
            for b in tl:
                step(b.to(device, non_blocking=True))
            if device.type == "cuda":
                torch.cuda.synchronize()
            epoch_s.append(time.perf_counter() - t0)
            sched.step()
            curve.append(evaluate(model, vl, device) / len(test_ds))
        curves.append(curve)
        print(f"fold {k}: last {100 * curve[-1]:.2f}%, best {100 * max(curve):.2f}%", flush=True)
    return summarise(curves, epoch_s, pooling, list(ks))


def summarise(curves, epoch_s, pooling, folds_run):
    """The GIN paper's rule over the folds' held-out curves: the epoch of the best mean."""
    a = np.asarray(curves)
    best = int(np.argmax(a.mean(0)))
    return dict(best_epoch=best + 1, best_mean=float(a[:, best].mean()), best_std=float(a[:, best].std()),
                last_mean=float(a[:, -1].mean()), last_std=float(a[:, -1].std()), folds_run=len(curves),
                folds=folds_run, epoch_s_median=statistics.median(epoch_s), epoch_s=epoch_s, pooling=pooling, curves=curves)


def write_json(path, rec):
    """Written to a temporary name, then renamed: a reader never sees half a file."""
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(json.dumps(rec, indent=1))
    os.replace(tmp, path)


def merge(args):
    """One accuracy record from per-fold runs (`accuracy --fold K`, e.g. run side by side)."""
    recs = [json.loads(Path(f).read_text()) for f in args.inputs]
    keys = [(r["set"], r["model"], r["epochs"]) for r in recs]
    if len(set(keys)) != 1:
        sys.exit(f"merge: the files are of different runs: {sorted(set(keys))}")
    folds = [k for r in recs for k in r["result"]["folds"]]
    if len(set(folds)) != len(folds):
        sys.exit(f"merge: a fold appears twice: {sorted(folds)}")
    curves = [c for r in recs for c in r["result"]["curves"]]
    epoch_s = [t for r in recs for t in r["result"]["epoch_s"]]
    rec = dict(recs[0], result=summarise(curves, epoch_s, recs[0]["result"]["pooling"], folds))
    r = rec["result"]
    print(f"{rec['set']} {rec['model']}: {100 * r['best_mean']:.2f} ± {100 * r['best_std']:.2f}% at epoch {r['best_epoch']} "
          f"over folds {sorted(folds)}, last {100 * r['last_mean']:.2f} ± {100 * r['last_std']:.2f}%, epoch {r['epoch_s_median'] * 1e3:.1f} ms")
    if args.out:
        write_json(args.out, rec)


def speed(args, s, data, device):
    """Per configuration: the median of >= 20 CUDA-event-timed steps on pre-collated batches
    on the device, and the wall time of whole epochs over 90 % of the set (as one fold's
    training set) with PyG's DataLoader collating batches, compiled during warm-up."""
    import torch
    from torch_geometric.loader import DataLoader

    out = []
    n_train = int(0.9 * s["graphs"])
    for compile_ in (False, True):
        for tf32 in (False, True):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.backends.cudnn.allow_tf32 = tf32
            model, opt, _, pooling = make(args, s, device, args.seed)
            fwd = torch.compile(model, dynamic=True) if compile_ else model

            def stp(b, fwd=fwd, opt=opt):
                opt.zero_grad(set_to_none=True)
                loss = torch.nn.functional.cross_entropy(fwd(b.x, b.edge_index, b.batch, b.num_graphs), b.y)
                loss.backward()
                opt.step()

            tl = DataLoader(data[:n_train], batch_size=args.batch_size, shuffle=True)
            fixed = []
            while len(fixed) < 32:  # small sets: several passes over the loader
                fixed += [b.to(device) for _, b in zip(range(32 - len(fixed)), tl)]
            for b in fixed[:8]:  # warm-up, compilation included
                stp(b)
            torch.cuda.synchronize()
            ms = []
            for b in fixed[8:32]:
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                stp(b)
                e1.record()
                e1.synchronize()
                ms.append(e0.elapsed_time(e1))
            ep = []
            for _ in range(args.speed_epochs):
                t0 = time.perf_counter()
                for b in tl:
                    stp(b.to(device, non_blocking=True))
                torch.cuda.synchronize()
                ep.append(time.perf_counter() - t0)
            rec = dict(compile=compile_, tf32=tf32, pooling=pooling, step_ms_median=statistics.median(ms), step_ms=ms,
                       epoch_s=ep, epoch_s_median=statistics.median(ep), train_graphs=n_train, batches=len(tl))
            print(f"compile={compile_} tf32={tf32}: step {rec['step_ms_median']:.2f} ms, epoch {rec['epoch_s_median']:.3f} s", flush=True)
            out.append(rec)
    return out


# --------------------------------------------------------------------------- generator


def generate(args):
    """A synthetic graph-classification set in TU format: graphs of nodes ~ U[n/2, 3n/2], about
    4 random undirected edges a node (listed both ways), 8 node labels; class 1 when the graph
    holds more nodes of label 0 than of label 1 (learnable from labels + structure)."""
    rng = np.random.default_rng(args.seed)
    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    sizes = rng.integers(args.nodes // 2, args.nodes * 3 // 2 + 1, size=args.graphs)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    n = int(offsets[-1])
    graph_of = np.repeat(np.arange(args.graphs), sizes)
    labels = rng.integers(0, 8, size=n)
    m = 2 * n  # undirected edges: 4 entries a node
    src_g = rng.integers(0, args.graphs, size=m)
    src_g = np.sort(src_g)
    lo, sz = offsets[src_g], sizes[src_g]
    u = lo + rng.integers(0, sz)
    v = lo + rng.integers(0, sz)
    keep = u != v
    u, v = u[keep], v[keep]
    rows = np.concatenate([u, v]) + 1
    cols = np.concatenate([v, u]) + 1
    order = np.lexsort((cols, rows))
    c0 = np.bincount(graph_of[labels == 0], minlength=args.graphs)
    c1 = np.bincount(graph_of[labels == 1], minlength=args.graphs)
    y = (c0 > c1).astype(np.int64)

    def write(part, columns):
        """One line per row of `columns` (a list of int arrays joined by ', '), in chunks."""
        with gzip.open(d / f"{args.name}_{part}.txt.gz", "wt", compresslevel=1) as f:
            for lo in range(0, len(columns[0]), 1 << 20):
                parts = [c[lo:lo + (1 << 20)].astype(str) for c in columns]
                rows_ = parts[0] if len(parts) == 1 else np.char.add(np.char.add(parts[0], ", "), parts[1])
                f.write("\n".join(rows_.tolist()) + "\n")

    write("A", [rows[order], cols[order]])
    write("graph_indicator", [graph_of + 1])
    write("graph_labels", [y])
    write("node_labels", [labels])
    print(f"{d / args.name}: {args.graphs} graphs, {n} nodes, {len(rows)} entries, classes {np.bincount(y).tolist()}")


# --------------------------------------------------------------------------- main


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["accuracy", "speed", "generate", "merge"])
    p.add_argument("set", nargs="?")
    p.add_argument("inputs", nargs="*", help="merge: the per-fold accuracy files")
    p.add_argument("--model", default="gin", choices=["gin", "gcn", "sage", "gat"])
    p.add_argument("--layers", type=int, default=5)
    p.add_argument("--hidden", type=int, default=None)
    p.add_argument("--pooling", choices=["sum", "mean", "max"], default=None)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--epochs", type=int, default=350)
    p.add_argument("--only-folds", type=int, default=None)
    p.add_argument("--fold", type=int, default=None, help="accuracy: run this fold alone (merge the files after)")
    p.add_argument("--speed-epochs", type=int, default=3)
    p.add_argument("--folds-file")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--graphs", type=int, default=100_000)
    p.add_argument("--nodes", type=int, default=50)
    p.add_argument("--dir", default="syn")
    p.add_argument("--name", default="SYN100K")
    p.add_argument("--device", default="cuda")
    p.add_argument("--out")
    args = p.parse_args(argv)
    if args.what == "generate":
        return generate(args)
    if args.what == "merge":
        args.inputs = [args.set] + args.inputs if args.set else args.inputs
        return merge(args)
    if not args.set:
        sys.exit("give a set: NAME or DIR/NAME")
    warnings.filterwarnings("ignore", message=".*torch.jit.script.* is deprecated")
    import torch
    import torch_geometric

    device = torch.device(args.device if torch.cuda.is_available() or args.device == "cpu" else "cpu")
    s = read_tu(args.set)
    data = to_pyg(s)
    rec = dict(set=s["name"], graphs=s["graphs"], classes=s["classes"], features=s["source"], width=s["width"], model=args.model,
               layers=args.layers, batch_size=args.batch_size, lr=args.lr, dropout=args.dropout, torch=torch.__version__,
               torch_geometric=torch_geometric.__version__, device=torch.cuda.get_device_name() if device.type == "cuda" else platform.processor(),
               date=datetime.datetime.now(datetime.timezone.utc).isoformat())
    if args.what == "accuracy":
        if not args.folds_file:
            sys.exit("accuracy needs --folds-file (tcgnn train ... --task graph --folds-file F writes it)")
        folds = read_folds(args.folds_file, s)
        rec.update(epochs=args.epochs, epoch_rule="epoch of the best mean held-out accuracy over the folds (GIN paper)",
                   result=accuracy(args, s, data, folds, device))
        r = rec["result"]
        print(f"{s['name']} {args.model}: {100 * r['best_mean']:.2f} ± {100 * r['best_std']:.2f}% at epoch {r['best_epoch']}, "
              f"last {100 * r['last_mean']:.2f} ± {100 * r['last_std']:.2f}%, epoch {r['epoch_s_median'] * 1e3:.1f} ms")
    else:
        if device.type != "cuda":
            sys.exit("speed needs a GPU")
        rec["speed"] = speed(args, s, data, device)
    if args.out:
        write_json(args.out, rec)


if __name__ == "__main__":
    main()
