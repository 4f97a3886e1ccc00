#!/usr/bin/env python3
"""PyTorch Geometric baseline for `tcgnn train GRAPH --task link`: link prediction as PyG's
examples/link_pred.py, on the very split tcgnn trains on (its split file), with GCN and SAGE
encoders and the dot-product decoder. Reports test ROC AUC and Hits@20/50/100 (OGB's rule) at
the best-validation-AUC epoch over seeds, and the training step time in every configuration:
eager, eager + TF32, torch.compile(model) + TF32 (compiled during the warm-up).

    tcgnn train cora --task link --split-file cora.split --epochs 1      # writes the split once
    python3 bench/pyg/link.py cora --split-file cora.split --model gcn sage --seeds 0,1,2,3,4 --out pyg-link.json

Conventions (the same as tcgnn's, see host/task/link/):
- the encoder runs on the split's training edges in both directions (the message-passing graph);
- every epoch draws len(train) negatives uniform over the whole graph's non-edges
  (torch_geometric.utils.negative_sampling on all split edges, both directions);
- loss: binary cross entropy with logits, mean over the positives and negatives; Adam lr 0.01,
  no weight decay, no dropout; encoder 2 layers, hidden 128, output 64 (link_pred.py);
- validation and test pairs (positives and fixed negatives) from the split file;
- node features: NAME.npz's x (rows scaled to sum 1, as PyG's NormalizeFeatures), else by
  default the very matrix tcgnn draws for a featureless graph (`--random-features tcgnn`: its
  SplitMix64 stream seeded with the run's seed ^ 0xFEA7, uniform in [-1, 1), reproduced here
  bit for bit), so both sides train on the same values seed by seed; `--random-features randn`
  keeps torch.randn(n, --features) seeded with --data-seed. (With randn against tcgnn's
  uniform features pubmed's test AUC differed by 1.8 / 4.5 points, GCN / SAGE.)
- step = negative sampling + forward + loss + backward + Adam, CUDA-event timed, median of
  --steps (>= 20) after --warmup steps. `--timing-only` times the three configurations without
  accuracy runs (ogbl-ddi, SBM 1M: `tcgnn bench link --pyg` reads the JSON's fastest figure);
  a generated graph is read from the .mtx.gz (+ .npz features) `tcgnn gen` writes, the same
  file `tcgnn bench link` trains on.

Needs torch, torch_geometric and numpy only.
"""

import argparse
import json
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

warnings.filterwarnings("ignore", message=".*torch.jit.script.* is deprecated")
import torch_geometric  # noqa: E402
from torch_geometric.nn import GCNConv, SAGEConv  # noqa: E402
from torch_geometric.utils import negative_sampling  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train import read_mtx, resolve_graph, row_normalize  # noqa: E402

HITS_K = (20, 50, 100)
SECTIONS = ("train", "val_pos", "val_neg", "test_pos", "test_neg")


def read_split(path, n_graph):
    """tcgnn's split file (host/task/link/split.rs documents the format) -> dict of (k, 2) arrays."""
    lines = [l.strip() for l in Path(path).read_text().splitlines()]
    lines = [l for l in lines if l and not l.startswith("#")]
    if not lines or lines[0] != "tcgnn-link-split 1":
        raise ValueError(f"{path}: not a tcgnn link split (version 1)")
    pos = 1
    head = {}
    for key in ("nodes", "edges", "seed"):
        k, v = lines[pos].split()
        if k != key:
            raise ValueError(f"{path}: expected '{key}', got '{lines[pos]}'")
        head[key] = int(v)
        pos += 1
    if head["nodes"] != n_graph:
        raise ValueError(f"{path}: split of a graph of {head['nodes']} nodes, this graph has {n_graph}")
    out = {}
    for name in SECTIONS:
        k, v = lines[pos].split()
        if k != name:
            raise ValueError(f"{path}: expected section '{name}', got '{lines[pos]}'")
        count = int(v)
        pos += 1
        body = lines[pos : pos + count]
        if len(body) != count:
            raise ValueError(f"{path}: section {name} truncated")
        out[name] = np.array([[int(t) for t in l.split()] for l in body], dtype=np.int64).reshape(-1, 2)
        pos += count
    out["seed"] = head["seed"]
    return out


GAMMA = 0x9E3779B97F4A7C15


def tcgnn_random_features(n, f, run_seed):
    """tcgnn's `Matrix::random(n, f, seed ^ 0xFEA7)` (host/util/rng.rs, host/nn/data.rs): draw k
    of SplitMix64 mixes state seed + (k + 1) * GAMMA; the value is -1 + 2 * f32(u), u the top 53
    bits as an f64 in [0, 1), in f32 arithmetic as the Rust code does it."""
    seed = np.uint64((run_seed ^ 0xFEA7) & 0xFFFFFFFFFFFFFFFF)
    k = np.arange(1, n * f + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = seed + k * np.uint64(GAMMA)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = ((z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))).astype(np.float32)
    return (np.float32(-1.0) + np.float32(2.0) * u).reshape(n, f)


class Encoder(torch.nn.Module):
    def __init__(self, kind, fin, hidden, out):
        super().__init__()
        conv = {"gcn": GCNConv, "sage": SAGEConv}[kind]
        self.conv1 = conv(fin, hidden)
        self.conv2 = conv(hidden, out)

    def forward(self, x, edge_index):
        return self.conv2(self.conv1(x, edge_index).relu(), edge_index)


def decode(z, pairs):
    return (z[pairs[0]] * z[pairs[1]]).sum(dim=-1)


def roc_auc(pos, neg):
    """ROC AUC with ties counted half (average ranks)."""
    s = np.concatenate([pos, neg]).astype(np.float64)
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s), dtype=np.float64)
    sorted_s = s[order]
    i = 0
    while i < len(s):
        j = i
        while j < len(s) and sorted_s[j] == sorted_s[i]:
            j += 1
        ranks[order[i:j]] = (i + 1 + j) / 2.0
        i = j
    p, n = len(pos), len(neg)
    return float((ranks[:p].sum() - p * (p + 1) / 2.0) / (p * n))


def hits(pos, neg, k):
    """OGB's Hits@K: positives strictly above the K-th highest negative (1 if fewer than K negatives)."""
    if len(neg) < k:
        return 1.0
    kth = np.sort(neg)[-k]
    return float(np.mean(pos > kth))


def metrics(pos, neg):
    return {"auc": roc_auc(pos, neg), **{f"hits@{k}": hits(pos, neg, k) for k in HITS_K}}


def setup(args, graph_arg, device):
    name, mtx, npz = resolve_graph(graph_arg)
    n, n_cols, rows, cols, _ = read_mtx(mtx)
    split = read_split(args.split_file, n)
    if npz is not None and not args.synthetic:
        z = np.load(npz)
        if "x" in z.files:
            x = np.asarray(z["x"], dtype=np.float32)
        else:
            indptr, indices = np.asarray(z["x_indptr"]), np.asarray(z["x_indices"])
            shape = tuple(int(v) for v in z["x_shape"])
            x = np.zeros(shape, dtype=np.float32)
            x[np.repeat(np.arange(shape[0]), np.diff(indptr)), indices] = 1.0
        if x.min() >= 0 and not args.no_feature_norm:
            x = row_normalize(x)
        features = "npz"
    elif args.random_features == "tcgnn":
        x = None  # drawn per run seed (features_for), as tcgnn does
        features = f"tcgnn's random features: uniform [-1, 1), n x {args.features}, seeded with the run's seed ^ 0xFEA7"
    else:
        x = torch.randn(n, args.features, generator=torch.Generator().manual_seed(args.data_seed)).numpy()
        features = f"torch.randn(n, {args.features}) seeded {args.data_seed}"
    t = lambda a: torch.as_tensor(a.T.copy(), device=device)  # noqa: E731
    train = t(split["train"])
    mp = torch.cat([train, train.flip(0)], dim=1)
    all_pos = np.concatenate([split["train"], split["val_pos"], split["test_pos"]])
    full = t(np.concatenate([all_pos, all_pos[:, ::-1]]))
    d = {
        "name": name,
        "n": n,
        "x": None if x is None else torch.as_tensor(x, device=device),
        "features": args.features,
        "device": device,
        "mp": mp,
        "full": full,
        "train": train,
        "val": (t(split["val_pos"]), t(split["val_neg"])),
        "test": (t(split["test_pos"]), t(split["test_neg"])),
        "facts": {"graph": name, "nodes": n, "undirected_edges": int(len(all_pos)), "split_seed": split["seed"], "features": features},
    }
    return d


def train_step(model, opt, d):
    model.train()
    opt.zero_grad()
    z = model(d["x"], d["mp"])
    neg = negative_sampling(d["full"], num_nodes=d["n"], num_neg_samples=d["train"].size(1), method="sparse")
    pairs = torch.cat([d["train"], neg], dim=1)
    label = torch.cat([torch.ones(d["train"].size(1), device=z.device), torch.zeros(neg.size(1), device=z.device)])
    loss = torch.nn.functional.binary_cross_entropy_with_logits(decode(z, pairs), label)
    loss.backward()
    opt.step()
    return loss


@torch.no_grad()
def evaluate(model, d):
    model.eval()
    z = model(d["x"], d["mp"])
    out = []
    for pos, neg in (d["val"], d["test"]):
        out.append(metrics(decode(z, pos).cpu().numpy(), decode(z, neg).cpu().numpy()))
    return out


def features_for(d, seed):
    """The setup with the node features of the run with `seed` (tcgnn's random features
    depend on it; file features and randn do not)."""
    if d["x"] is not None:
        return d
    return {**d, "x": torch.as_tensor(tcgnn_random_features(d["n"], d["features"], seed), device=d["device"])}


def accuracy_run(kind, d, seed, args, device):
    d = features_for(d, seed)
    torch.manual_seed(seed)
    model = Encoder(kind, d["x"].size(1), args.hidden, args.embedding).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    best = None
    for epoch in range(1, args.epochs + 1):
        loss = float(train_step(model, opt, d))
        val, test = evaluate(model, d)
        if best is None or val["auc"] > best["val"]["auc"]:
            best = {"epoch": epoch, "loss": loss, "val": val, "test": test}
    return best


def time_steps(kind, d, args, device, tf32, compiled):
    d = features_for(d, 0)
    torch.manual_seed(0)
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    try:
        model = Encoder(kind, d["x"].size(1), args.hidden, args.embedding).to(device)
        if compiled:
            model = torch.compile(model)
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
        t0 = time.perf_counter()
        for _ in range(args.warmup):
            train_step(model, opt, d)
        if device.type == "cuda":
            torch.cuda.synchronize()
        warm_s = time.perf_counter() - t0
        ms = []
        for _ in range(args.steps):
            if device.type == "cuda":
                torch.cuda.synchronize()
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                train_step(model, opt, d)
                b.record()
                b.synchronize()
                ms.append(a.elapsed_time(b))
            else:
                t = time.perf_counter()
                train_step(model, opt, d)
                ms.append((time.perf_counter() - t) * 1e3)
        return {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms), "steps": len(ms), "warmup_s": warm_s}
    except Exception as e:  # a configuration that cannot run here is recorded, not fatal
        return {"error": f"{type(e).__name__}: {e}"}
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved


def write_json(path, result):
    """`result` into `path` through a temporary name (never a half-written file)."""
    tmp = Path(path + ".tmp")
    tmp.write_text(json.dumps(result, indent=1))
    tmp.replace(path)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("graph", help="dataset name (TCGNN_DATASETS or ../shared/datasets) or .mtx[.gz] path")
    p.add_argument("--split-file", required=True, help="the split written by `tcgnn train GRAPH --task link --split-file F`")
    p.add_argument("--model", nargs="+", default=["gcn", "sage"], choices=["gcn", "sage"])
    p.add_argument("--seeds", default="0", help="comma-separated seeds of the accuracy runs")
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--embedding", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--features", type=int, default=64, help="random feature width for graphs without node data")
    p.add_argument("--random-features", choices=["tcgnn", "randn"], default="tcgnn",
                   help="for graphs without node data: tcgnn's own matrix per run seed (default) or torch.randn seeded with --data-seed")
    p.add_argument("--data-seed", type=int, default=0, help="seeds --random-features randn")
    p.add_argument("--synthetic", action="store_true", help="random features even where NAME.npz exists")
    p.add_argument("--no-feature-norm", action="store_true")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--no-timing", action="store_true")
    p.add_argument("--timing-only", action="store_true", help="only the step timing (no accuracy runs; --seeds ignored)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--out", help="JSON file to write")
    args = p.parse_args()
    if args.steps < 20 and not args.no_timing:
        p.error("--steps must be >= 20 (medians of at least 20 timed steps)")
    if args.timing_only and args.no_timing:
        p.error("--timing-only and --no-timing leave nothing to do")
    device = torch.device(args.device)
    d = setup(args, args.graph, device)
    seeds = [] if args.timing_only else [int(s) for s in args.seeds.split(",") if s]
    if not seeds and not args.timing_only:
        p.error("--seeds is empty (use --timing-only for the step timing alone)")
    result = {
        "facts": d["facts"],
        "torch": torch.__version__,
        "torch_geometric": torch_geometric.__version__,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "config": {k: getattr(args, k) for k in ("epochs", "hidden", "embedding", "lr", "warmup", "steps")},
        "models": {},
    }
    for kind in args.model:
        runs = [accuracy_run(kind, d, s, args, device) for s in seeds]
        rec = {"runs": runs}
        for part in ("val", "test"):
            for key in ["auc"] + [f"hits@{k}" for k in HITS_K]:
                v = [100 * r[part][key] for r in runs]
                rec[f"{part}_{key}_mean"] = statistics.fmean(v) if v else None
                rec[f"{part}_{key}_std"] = statistics.pstdev(v) if len(v) > 1 else 0.0
        if not args.no_timing:
            rec["timing"] = {
                "eager": time_steps(kind, d, args, device, tf32=False, compiled=False),
                "eager+tf32": time_steps(kind, d, args, device, tf32=True, compiled=False),
                "compile+tf32": time_steps(kind, d, args, device, tf32=True, compiled=True),
            }
            ok = {k: v["median_ms"] for k, v in rec["timing"].items() if "median_ms" in v}
            rec["fastest"] = min(ok, key=ok.get) if ok else None
        result["models"][kind] = rec
        if args.out:
            write_json(args.out, result)  # after every model: a run cut short keeps what it measured
        timing = " ".join(f"{k} {v.get('median_ms', float('nan')):.3f} ms" for k, v in rec.get("timing", {}).items())
        if not runs:
            print(f"{d['name']} {kind}: step {timing}", flush=True)
            continue
        print(
            f"{d['name']} {kind}: test AUC {rec['test_auc_mean']:.2f} ± {rec['test_auc_std']:.2f}, "
            f"Hits@20 {rec['test_hits@20_mean']:.2f}, Hits@50 {rec['test_hits@50_mean']:.2f}, Hits@100 {rec['test_hits@100_mean']:.2f} "
            f"({len(seeds)} seeds); step {timing}",
            flush=True,
        )
    if args.out:
        write_json(args.out, result)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
