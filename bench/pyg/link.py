#!/usr/bin/env python3
"""PyTorch Geometric baseline for `tcgnn train GRAPH --task link`: link prediction as PyG's
examples/link_pred.py, on the very split tcgnn trains on (its split file), with GCN and SAGE
encoders and the dot-product or MLP decoder. Reports test ROC AUC and Hits@20/50/100 (OGB's rule)
at the best-validation epoch (by AUC, or by Hits@K as OGB: --best-by) over seeds, and the
training step time in every configuration: eager, eager + TF32, torch.compile(model) + TF32
(compiled during the warm-up).

    tcgnn train cora --task link --split-file cora.split --epochs 1      # writes the split once
    python3 bench/pyg/link.py cora --split-file cora.split --model gcn sage --seeds 0,1,2,3,4 --out pyg-link.json

OGB's ogbl-ddi protocol (examples/linkproppred/ddi/gnn.py, SAGE) as `tcgnn train ogbl-ddi
--task link --features learnable:256 --hidden 256 --embedding 256 --dropout 0.5 --lr 0.005
--decoder mlp --batch-edges 65536 --best-by hits20` runs it:

    python3 bench/pyg/link.py ogbl-ddi --split-file ddi.split --model sage --features learnable:256 \
        --hidden 256 --embedding 256 --dropout 0.5 --lr 0.005 --decoder mlp --batch-edges 65536 \
        --best-by hits20 --epochs 200 --seeds 0 --out pyg-ddi.json

Conventions (the same as tcgnn's, see host/task/link/):
- the encoder runs on the split's training edges in both directions (the message-passing graph);
- every epoch draws len(train) negatives uniform over the whole graph's non-edges
  (torch_geometric.utils.negative_sampling on all split edges, both directions; `--negatives
  device` draws the same distribution on the GPU by rejection, see draw_negatives);
- loss: binary cross entropy with logits, mean over the positives and negatives; Adam lr 0.01,
  no weight decay, no dropout; encoder 2 layers, hidden 128, output 64 (link_pred.py);
- --dropout p: tcgnn's stack, x -> dropout -> conv -> ReLU -> dropout -> ... -> conv, except that
  a learnable input is not dropped (OGB's baselines drop between layers only);
- --decoder mlp: Linear(d, d) -> ReLU -> Linear(d, 1) on z_u * z_v (torch's default init), no
  dropout (tcgnn's `--decoder mlp`; OGB's predictor has 3 layers and dropout);
- --features learnable:D: torch.nn.Embedding(n, D) with xavier_uniform_ init as the encoder's
  input, trained by the same Adam (OGB's ddi baseline; tcgnn's `--features learnable:D`);
- --batch-edges K: an epoch is ceil(len(train) / K) optimiser steps on the training edges
  permuted, each with len(batch) fresh negatives and the encoder recomputed (OGB's DataLoader
  over the training edges, batch 64 * 1024 on ddi); timing then times one such step and reports
  the epoch as the measured wall time of the accuracy runs' training epochs too;
- --best-by: the validation metric that picks the reported epoch (auc, or hits20 as OGB's ddi
  leaderboard);
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
    """tcgnn's `Matrix::random(n, f, seed ^ 0xFEA7)` (host/util/rng.rs, host/task/node/data.rs): draw k
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
    """tcgnn's stack: [dropout] -> conv -> ReLU -> dropout -> ... -> conv (input dropout only on
    node features: `drop_input`)."""

    def __init__(self, kind, fin, hidden, out, layers=2, dropout=0.0, drop_input=True):
        super().__init__()
        conv = {"gcn": GCNConv, "sage": SAGEConv}[kind]
        widths = [fin] + [hidden] * (layers - 1) + [out]
        self.convs = torch.nn.ModuleList([conv(a, b) for a, b in zip(widths[:-1], widths[1:])])
        self.dropout, self.drop_input = dropout, drop_input

    def forward(self, x, edge_index):
        p = self.dropout
        if self.drop_input and p > 0:
            x = torch.nn.functional.dropout(x, p, self.training)
        for conv in self.convs[:-1]:
            x = conv(x, edge_index).relu()
            if p > 0:
                x = torch.nn.functional.dropout(x, p, self.training)
        return self.convs[-1](x, edge_index)


class MlpDecoder(torch.nn.Module):
    """tcgnn's `--decoder mlp`: Linear(d, d) -> ReLU -> Linear(d, 1) on z_u * z_v."""

    def __init__(self, d):
        super().__init__()
        self.lin1, self.lin2 = torch.nn.Linear(d, d), torch.nn.Linear(d, 1)

    def forward(self, z, pairs):
        return self.lin2(self.lin1(z[pairs[0]] * z[pairs[1]]).relu()).squeeze(-1)


def dot_decode(z, pairs):
    return (z[pairs[0]] * z[pairs[1]]).sum(dim=-1)


class Net(torch.nn.Module):
    """Input (node features, or a learnable embedding table), encoder, decoder: every trained
    parameter in one module, so one Adam steps them all."""

    def __init__(self, kind, d, args):
        super().__init__()
        if args.learnable:
            self.emb = torch.nn.Embedding(d["n"], args.learnable)
            torch.nn.init.xavier_uniform_(self.emb.weight)
            fin = args.learnable
        else:
            self.emb, fin = None, d["x"].size(1)
        self.encoder = Encoder(kind, fin, args.hidden, args.embedding, args.layers, args.dropout, drop_input=self.emb is None)
        self.decoder = MlpDecoder(args.embedding) if args.decoder == "mlp" else None
        self.x = d["x"]

    def encode(self, mp):
        return self.encoder(self.emb.weight if self.emb is not None else self.x, mp)

    def decode(self, z, pairs):
        return self.decoder(z, pairs) if self.decoder is not None else dot_decode(z, pairs)


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
    if args.learnable:
        x, features = None, f"learnable torch.nn.Embedding(n, {args.learnable}), xavier_uniform_"
    elif npz is not None and not args.synthetic:
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
        "learnable": args.learnable,
        "mp": mp,
        "full": full,
        "full_keys": torch.sort(full[0] * n + full[1]).values,
        "negatives": args.negatives,
        "train": train,
        "val": (t(split["val_pos"]), t(split["val_neg"])),
        "test": (t(split["test_pos"]), t(split["test_neg"])),
        "facts": {"graph": name, "nodes": n, "undirected_edges": int(len(all_pos)), "split_seed": split["seed"], "features": features},
    }
    return d


def train_step(net, opt, d, pos=None):
    """One optimiser step on the positives `pos` (default: every training edge) and as many
    fresh negatives; the encoder recomputed on the whole message-passing graph."""
    pos = d["train"] if pos is None else pos
    net.train()
    opt.zero_grad()
    z = net.encode(d["mp"])
    neg = draw_negatives(d, pos.size(1))
    pairs = torch.cat([pos, neg], dim=1)
    label = torch.cat([torch.ones(pos.size(1), device=z.device), torch.zeros(neg.size(1), device=z.device)])
    loss = torch.nn.functional.binary_cross_entropy_with_logits(net.decode(z, pairs), label)
    loss.backward()
    opt.step()
    return loss


def draw_negatives(d, count):
    """`count` pairs uniform over the non-edges (u != v) of every split edge: PyG's own
    negative_sampling(method="sparse") on the host (`--negatives pyg`, link_pred.py's), or the
    same distribution drawn on the device (`--negatives device`): uniform pairs, those that hit an
    edge or a self-loop rejected by a binary search in the sorted edge keys, redrawn until
    `count` are kept. The device draw makes PyG's step a kernel-for-kernel figure; PyG's own
    sampler dominates its step on dense graphs (ogbl-ddi: ~0.8 s of a 0.85 s step)."""
    if d["negatives"] == "pyg":
        return negative_sampling(d["full"], num_nodes=d["n"], num_neg_samples=count, method="sparse")
    n, keys, dev = d["n"], d["full_keys"], d["full"].device
    kept, need = [], count
    while need > 0:
        m = need + need // 4 + 64
        u = torch.randint(0, n, (m,), device=dev)
        v = torch.randint(0, n, (m,), device=dev)
        k = u * n + v
        at = torch.searchsorted(keys, k).clamp_(max=keys.numel() - 1)
        ok = (keys[at] != k) & (u != v)
        pairs = torch.stack([u[ok], v[ok]])[:, :need]
        kept.append(pairs)
        need -= pairs.size(1)
    return torch.cat(kept, dim=1)


def train_epoch(net, opt, d, batch_edges):
    """One epoch: one step on every training edge, or (--batch-edges K) one step per K of them,
    permuted; returns the mean loss over the steps' pairs."""
    m = d["train"].size(1)
    if not batch_edges:
        return float(train_step(net, opt, d))
    perm = torch.randperm(m, device=d["train"].device)
    total, count = 0.0, 0
    for lo in range(0, m, batch_edges):
        idx = perm[lo : lo + batch_edges]
        total += float(train_step(net, opt, d, d["train"][:, idx])) * len(idx)
        count += len(idx)
    return total / count


@torch.no_grad()
def evaluate(net, d):
    net.eval()
    z = net.encode(d["mp"])
    out = []
    for pos, neg in (d["val"], d["test"]):
        out.append(metrics(net.decode(z, pos).cpu().numpy(), net.decode(z, neg).cpu().numpy()))
    return out


def features_for(d, seed):
    """The setup with the node features of the run with `seed` (tcgnn's random features
    depend on it; file features and randn do not; a learnable input has none)."""
    if d["x"] is not None or d["learnable"]:
        return d
    return {**d, "x": torch.as_tensor(tcgnn_random_features(d["n"], d["features"], seed), device=d["device"])}


def best_key(args):
    return {"auc": "auc", "hits20": "hits@20", "hits50": "hits@50", "hits100": "hits@100"}[args.best_by]


def accuracy_run(kind, d, seed, args, device):
    d = features_for(d, seed)
    torch.manual_seed(seed)
    net = Net(kind, d, args).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    key = best_key(args)
    best, epoch_s, curve = None, [], []
    for epoch in range(1, args.epochs + 1):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        loss = train_epoch(net, opt, d, args.batch_edges)
        if device.type == "cuda":
            torch.cuda.synchronize()
        epoch_s.append(time.perf_counter() - t)
        val, test = evaluate(net, d)
        curve.append({"epoch": epoch, "loss": loss, "val_hits@20": val["hits@20"], "val_auc": val["auc"], "test_hits@20": test["hits@20"]})
        if best is None or val[key] > best["val"][key]:
            best = {"epoch": epoch, "loss": loss, "val": val, "test": test}
        if args.verbose:
            print(f"  seed {seed} epoch {epoch}: loss {loss:.4f} val AUC {val['auc']:.4f} val Hits@20 {val['hits@20']:.4f} test Hits@20 {test['hits@20']:.4f} ({epoch_s[-1]:.2f} s)", flush=True)
    best["train_epoch_s_median"] = statistics.median(epoch_s)
    best["curve"] = curve
    return best


def time_steps(kind, d, args, device, tf32, compiled):
    d = features_for(d, 0)
    torch.manual_seed(0)
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    try:
        net = Net(kind, d, args).to(device)
        if compiled:
            net.encoder = torch.compile(net.encoder)
        opt = torch.optim.Adam(net.parameters(), lr=args.lr)
        # One optimiser step: on every training edge, or on a batch of --batch-edges of them.
        pos = d["train"][:, : args.batch_edges] if args.batch_edges else None
        t0 = time.perf_counter()
        for _ in range(args.warmup):
            train_step(net, opt, d, pos)
        if device.type == "cuda":
            torch.cuda.synchronize()
        warm_s = time.perf_counter() - t0
        ms = []
        for _ in range(args.steps):
            if device.type == "cuda":
                torch.cuda.synchronize()
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                train_step(net, opt, d, pos)
                b.record()
                b.synchronize()
                ms.append(a.elapsed_time(b))
            else:
                t = time.perf_counter()
                train_step(net, opt, d, pos)
                ms.append((time.perf_counter() - t) * 1e3)
        steps = -(-d["train"].size(1) // args.batch_edges) if args.batch_edges else 1
        return {
            "median_ms": statistics.median(ms),
            "min_ms": min(ms),
            "max_ms": max(ms),
            "steps": len(ms),
            "warmup_s": warm_s,
            "steps_per_epoch": steps,
            "epoch_ms": steps * statistics.median(ms),
        }
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
    p.add_argument("--features", default="500", help="random feature width for graphs without node data (default: tcgnn train's, 500), or learnable:D (an embedding table)")
    p.add_argument("--random-features", choices=["tcgnn", "randn"], default="tcgnn",
                   help="for graphs without node data: tcgnn's own matrix per run seed (default) or torch.randn seeded with --data-seed")
    p.add_argument("--data-seed", type=int, default=0, help="seeds --random-features randn")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--decoder", choices=["dot", "mlp"], default="dot")
    p.add_argument("--batch-edges", type=int, default=None, help="training edges per optimiser step (default: all, one step an epoch)")
    p.add_argument("--best-by", choices=["auc", "hits20", "hits50", "hits100"], default="auc")
    p.add_argument("--negatives", choices=["pyg", "device"], default="pyg",
                   help="the training negatives' sampler: PyG's negative_sampling on the host (link_pred.py's, default) "
                   "or the same uniform-over-non-edges draw on the device (rejection against the sorted edge keys)")
    p.add_argument("--verbose", action="store_true", help="print every epoch of the accuracy runs")
    p.add_argument("--synthetic", action="store_true", help="random features even where NAME.npz exists")
    p.add_argument("--no-feature-norm", action="store_true")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--no-timing", action="store_true")
    p.add_argument("--configs", default="eager,eager+tf32,compile+tf32",
                   help="the configurations timed (comma-separated; a step of seconds, as PyG's host sampler on a 1M-node graph, may need fewer)")
    p.add_argument("--timing-only", action="store_true", help="only the step timing (no accuracy runs; --seeds ignored)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--out", help="JSON file to write")
    args = p.parse_args()
    if args.steps < 20 and not args.no_timing:
        p.error("--steps must be >= 20 (medians of at least 20 timed steps)")
    args.configs = [c for c in args.configs.split(",") if c]
    if not args.configs or any(c not in ("eager", "eager+tf32", "compile+tf32") for c in args.configs):
        p.error(f"--configs: a comma-separated subset of eager,eager+tf32,compile+tf32 (got {args.configs})")
    if args.timing_only and args.no_timing:
        p.error("--timing-only and --no-timing leave nothing to do")
    args.learnable = None
    if args.features.startswith("learnable:"):
        try:
            args.learnable = int(args.features[len("learnable:") :])
        except ValueError:
            p.error(f"--features {args.features}: learnable:D with D a width")
        if args.learnable < 1:
            p.error("--features learnable:D needs D >= 1")
        args.features = args.learnable
    else:
        try:
            args.features = int(args.features)
        except ValueError:
            p.error(f"--features {args.features}: a width, or learnable:D")
    if args.batch_edges is not None and args.batch_edges < 1:
        p.error("--batch-edges must be >= 1")
    if args.layers < 1 or not 0.0 <= args.dropout < 1.0:
        p.error("--layers >= 1 and --dropout in [0, 1)")
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
        "config": {
            k: getattr(args, k)
            for k in ("epochs", "layers", "hidden", "embedding", "lr", "dropout", "decoder", "batch_edges", "best_by", "learnable", "negatives", "warmup", "steps")
        },
        "models": {},
    }
    for kind in args.model:
        runs = [accuracy_run(kind, d, s, args, device) for s in seeds]
        rec = {"runs": runs, "train_epoch_s_median": statistics.median(r["train_epoch_s_median"] for r in runs) if runs else None}
        for part in ("val", "test"):
            for key in ["auc"] + [f"hits@{k}" for k in HITS_K]:
                v = [100 * r[part][key] for r in runs]
                rec[f"{part}_{key}_mean"] = statistics.fmean(v) if v else None
                rec[f"{part}_{key}_std"] = statistics.pstdev(v) if len(v) > 1 else 0.0
        if not args.no_timing:
            # The sampler is part of the configuration's name (`tcgnn bench link --pyg` picks the
            # fastest over every file it is given and prints the name).
            sfx = "+device-negatives" if args.negatives == "device" else ""
            flags = {"eager": (False, False), "eager+tf32": (True, False), "compile+tf32": (True, True)}
            rec["timing"] = {c + sfx: time_steps(kind, d, args, device, tf32=flags[c][0], compiled=flags[c][1]) for c in args.configs}
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
            f"Hits@20 {rec['test_hits@20_mean']:.2f} ± {rec['test_hits@20_std']:.2f}, Hits@50 {rec['test_hits@50_mean']:.2f}, "
            f"Hits@100 {rec['test_hits@100_mean']:.2f} ({len(seeds)} seeds, best by validation {args.best_by}, "
            f"epochs {[r['epoch'] for r in runs]}); training epoch {rec['train_epoch_s_median']:.3f} s; step {timing}",
            flush=True,
        )
    if args.out:
        write_json(args.out, result)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
