#!/usr/bin/env python3
"""PyTorch Geometric baseline for the tcgnn trainer: GCN and AGNN, accuracy and step time.

    python3 bench/pyg/train.py cora citeseer --model gcn agnn --seeds 0,1,2,3,4 --out pyg.json

Needs torch, torch_geometric and numpy only (no torch_sparse / torch_scatter / scipy).
See bench/pyg/README.md for the conventions (edge direction, features, splits, timing).
"""

import argparse
import copy
import datetime
import gzip
import itertools
import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

# PyG 2.8 scripts some helpers with torch.jit, which newer torch calls deprecated (set before import).
warnings.filterwarnings("ignore", message=".*torch.jit.script.* is deprecated")
import torch_geometric  # noqa: E402
from torch_geometric.nn import AGNNConv, GATConv, GCNConv, GINConv, SAGEConv

# torch's notices about its sparse CSR support (beta, invariant checks) on every run of --adj csr.
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled")

REPO = Path(__file__).resolve().parents[2]
# Every model's defaults in one table, mirrored by the Rust trainer's model registry
# (`--print-defaults` prints it as JSON). hidden is per head for GAT; heads is GAT's hidden-layer
# head count (its output layer has out_heads = 1 head, averaged, as PyG's examples/gat.py).
DEFAULTS = {
    "gcn": dict(layers=2, hidden=16, heads=None, dropout=0.5, lr=0.01, wd=5e-4),
    "agnn": dict(layers=4, hidden=32, heads=None, dropout=0.5, lr=0.01, wd=5e-4),
    "gat": dict(layers=2, hidden=8, heads=8, dropout=0.6, lr=0.005, wd=5e-4),
    "sage": dict(layers=2, hidden=64, heads=None, dropout=0.5, lr=0.01, wd=5e-4),
    "gin": dict(layers=2, hidden=64, heads=None, dropout=0.5, lr=0.01, wd=5e-4),
}
SPLIT = (0.6, 0.2)  # train, val fractions of a random split; the rest is test


# --------------------------------------------------------------------------- loading


def read_mtx(path):
    """Matrix Market coordinate file (optionally gzipped) -> (n_rows, n_cols, rows, cols, info).

    rows/cols are 0-based int64 arrays, one per stored entry, in file order (no dedup).
    Values of a real/integer file are read past and ignored (the graph is used as a pattern).
    A symmetric file is expanded to both triangles (the diagonal once), as the Rust reader does.
    """
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    pos = 0
    header = None
    size = None
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            end = len(data)
        line = data[pos:end].strip()
        pos = end + 1
        if header is None:
            if not line.lower().startswith(b"%%matrixmarket"):
                raise ValueError(f"{path}: first line is not a %%MatrixMarket header")
            header = line.decode("ascii", "replace").lower().split()
            continue
        if not line or line.startswith(b"%"):
            continue
        size = [int(t) for t in line.split()]
        break
    if header is None or size is None or len(size) != 3:
        raise ValueError(f"{path}: missing header or size line")
    if len(header) < 5 or header[1] != "matrix" or header[2] != "coordinate":
        raise ValueError(f"{path}: only 'matrix coordinate' files are supported, got {' '.join(header)}")
    field, symmetry = header[3], header[4]
    if field not in ("pattern", "real", "integer"):
        raise ValueError(f"{path}: field '{field}' not supported (pattern, real, integer)")
    if symmetry not in ("general", "symmetric"):
        raise ValueError(f"{path}: symmetry '{symmetry}' not supported (general, symmetric)")
    n_rows, n_cols, nnz = size
    per_line = 2 if field == "pattern" else 3
    body = data[pos:]
    if b"%" in body:  # comment lines after the size line: drop them (rare, slow path)
        body = b"\n".join(l for l in body.split(b"\n") if not l.lstrip().startswith(b"%"))
    # float64 holds every index below 2^53 exactly; numpy's C text parser. It stops at the
    # first token it cannot read, which the count check below catches.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tok = np.fromstring(body, dtype=np.float64, sep=" ") if body.strip() else np.zeros(0)
        except ValueError as e:
            raise ValueError(f"{path}: an entry is not numeric ({e})") from None
    if tok.size != nnz * per_line:
        raise ValueError(f"{path}: expected {nnz} entries of {per_line} numbers, found {tok.size} numbers")
    tok = tok.reshape(nnz, per_line)
    rows = tok[:, 0].astype(np.int64) - 1
    cols = tok[:, 1].astype(np.int64) - 1
    if nnz and (rows.min() < 0 or cols.min() < 0 or rows.max() >= n_rows or cols.max() >= n_cols):
        raise ValueError(f"{path}: an index is outside 1..{n_rows} x 1..{n_cols}")
    if symmetry == "symmetric":
        off = rows != cols
        rows, cols = np.concatenate([rows, cols[off]]), np.concatenate([cols, rows[off]])
    info = {"field": field, "symmetry": symmetry, "entries_in_file": int(nnz)}
    return n_rows, n_cols, rows, cols, info


def datasets_dir():
    env = os.environ.get("TCGNN_DATASETS")
    if env:
        return Path(env)
    for cand in (REPO.parent / "shared" / "datasets", REPO / "shared" / "datasets"):
        if cand.is_dir():
            return cand
    return REPO.parent / "shared" / "datasets"


def resolve_graph(arg):
    """A graph argument -> (name, mtx path, npz path or None)."""
    p = Path(arg)
    if arg.endswith(".mtx") or arg.endswith(".mtx.gz") or p.is_file():
        name = p.name
        for suf in (".gz", ".mtx"):
            if name.endswith(suf):
                name = name[: -len(suf)]
        npz = p.with_name(name + ".npz")
        return name, p, (npz if npz.is_file() else None)
    d = datasets_dir()
    mtx = d / f"{arg}.mtx.gz"
    if not mtx.is_file() and (d / f"{arg}.mtx").is_file():
        mtx = d / f"{arg}.mtx"
    if not mtx.is_file():
        raise FileNotFoundError(f"graph '{arg}': no {arg}.mtx.gz in {d} (set TCGNN_DATASETS)")
    npz = d / f"{arg}.npz"
    return arg, mtx, (npz if npz.is_file() else None)


def random_split(n, seed):
    """Seeded random 60/20/20 split (numpy PCG64 permutation) -> three bool masks."""
    perm = np.random.default_rng(seed).permutation(n)
    n_train, n_val = int(round(SPLIT[0] * n)), int(round(SPLIT[1] * n))
    masks = []
    for idx in (perm[:n_train], perm[n_train : n_train + n_val], perm[n_train + n_val :]):
        m = np.zeros(n, dtype=bool)
        m[idx] = True
        masks.append(m)
    return masks


def row_normalize(x):
    """Rows scaled to sum 1; rows summing to 0 stay 0."""
    s = x.sum(axis=1, keepdims=True, dtype=np.float64)
    s[s == 0] = 1.0
    return (x / s).astype(np.float32)


def load_graph(arg, args):
    """Read one graph + node data on the host. Returns a dict of numpy arrays and facts."""
    name, mtx, npz = resolve_graph(arg)
    if args.synthetic:
        npz = None
    n_rows, n_cols, rows, cols, info = read_mtx(mtx)
    if n_rows != n_cols:
        raise ValueError(f"{mtx}: adjacency must be square, got {n_rows} x {n_cols}")
    n = n_rows
    g = {"name": name, "mtx": str(mtx), "npz": str(npz) if npz else None, "n": n, "rows": rows, "cols": cols}
    g["mtx_info"] = info
    z = np.load(npz) if npz else None
    notes = []
    # Features.
    if z is not None and "x" in z.files:
        x = np.asarray(z["x"], dtype=np.float32)
        g["feature_source"] = "npz dense"
    elif z is not None and "x_indptr" in z.files:
        indptr = np.asarray(z["x_indptr"], dtype=np.int64)
        indices = np.asarray(z["x_indices"], dtype=np.int64)
        shape = tuple(int(v) for v in z["x_shape"])
        x = np.zeros(shape, dtype=np.float32)
        x[np.repeat(np.arange(shape[0]), np.diff(indptr)), indices] = 1.0
        g["feature_source"] = "npz sparse multi-hot (densified)"
    else:
        x = None
    if x is not None:
        if x.shape[0] != n:
            raise ValueError(f"{npz}: x has {x.shape[0]} rows, graph has {n} nodes")
        if x.size and x.min() < 0:
            notes.append("features have negative entries: row sums may be 0 or negative")
        if args.no_feature_norm:
            g["feature_norm"] = "none (--no-feature-norm)"
        else:
            x = row_normalize(x)
            g["feature_norm"] = "row sums to 1 (zero rows stay 0)"
        g["synthetic_features"] = False
    else:
        gen = torch.Generator().manual_seed(args.data_seed)
        x = torch.randn(n, args.features, generator=gen).numpy()
        g["feature_source"] = f"torch.randn seeded with --data-seed {args.data_seed}"
        g["feature_norm"] = "none"
        g["synthetic_features"] = True
    g["x"] = x
    # Labels.
    if z is not None and "y" in z.files:
        y = np.asarray(z["y"], dtype=np.int64)
        if y.shape != (n,):
            raise ValueError(f"{npz}: y has shape {y.shape}, expected ({n},)")
        g["synthetic_labels"] = False
    else:
        gen = torch.Generator().manual_seed(args.data_seed + 1)
        y = torch.randint(args.classes, (n,), generator=gen).numpy()
        g["synthetic_labels"] = True
    g["y"] = y
    g["classes"] = int(y.max()) + 1 if n else 0
    # Split.
    if z is not None and all(k in z.files for k in ("train_mask", "val_mask", "test_mask")):
        masks = [np.asarray(z[k], dtype=bool) for k in ("train_mask", "val_mask", "test_mask")]
        g["split"] = "npz masks"
    else:
        masks = random_split(n, args.split_seed)
        g["split"] = f"random 60/20/20, numpy default_rng({args.split_seed}).permutation"
    g["masks"] = masks
    g["notes"] = notes
    loops = int(np.count_nonzero(rows == cols))
    g["nnz"] = int(rows.size)
    g["self_loops_in_file"] = loops
    # GCNConv (add_remaining_self_loops) and AGNNConv (remove + add) both end with every
    # non-loop entry plus exactly one loop per node.
    g["nnz_with_self_loops"] = int(rows.size - loops + n)
    return g


# --------------------------------------------------------------------------- models


class GCN(nn.Module):
    def __init__(self, f_in, hidden, classes, layers, dropout, cached):
        super().__init__()
        dims = [f_in] + [hidden] * (layers - 1) + [classes]
        self.convs = nn.ModuleList(GCNConv(a, b, cached=cached) for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.dropout(x, self.dropout, self.training)
        for i, conv in enumerate(self.convs):
            x = conv(x, adj)
            if i + 1 < len(self.convs):
                x = F.relu(x)
                x = F.dropout(x, self.dropout, self.training)
        return F.log_softmax(x, dim=1)


class AGNN(nn.Module):
    def __init__(self, f_in, hidden, classes, layers, dropout, dropout_each):
        super().__init__()
        self.lin1 = nn.Linear(f_in, hidden)
        self.props = nn.ModuleList(AGNNConv(requires_grad=True) for _ in range(layers))
        self.lin2 = nn.Linear(hidden, classes)
        self.dropout = dropout
        self.dropout_each = dropout_each  # after every AGNNConv instead of once after the last

    def forward(self, x, adj):
        x = F.dropout(x, self.dropout, self.training)
        x = F.relu(self.lin1(x))
        for prop in self.props:
            x = prop(x, adj)
            if self.dropout_each:
                x = F.dropout(x, self.dropout, self.training)
        if not self.dropout_each:
            x = F.dropout(x, self.dropout, self.training)
        x = self.lin2(x)
        return F.log_softmax(x, dim=1)


class GAT(nn.Module):
    """PyG's examples/gat.py generalised to L layers: dropout(x); hidden layers
    GATConv(in, H, heads=K, dropout=p) concatenating to K*H, each followed by ELU + dropout;
    output layer GATConv(K*H, classes, heads=out_heads, concat=False, dropout=p) (the mean of
    its heads; one head by default, as the example); log_softmax."""

    def __init__(self, f_in, hidden, classes, layers, heads, out_heads, dropout):
        super().__init__()
        convs = []
        d = f_in
        for _ in range(layers - 1):
            convs.append(GATConv(d, hidden, heads=heads, concat=True, dropout=dropout))
            d = hidden * heads
        convs.append(GATConv(d, classes, heads=out_heads, concat=False, dropout=dropout))
        self.convs = nn.ModuleList(convs)
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.dropout(x, self.dropout, self.training)
        for i, conv in enumerate(self.convs):
            x = conv(x, adj)
            if i + 1 < len(self.convs):
                x = F.elu(x)
                x = F.dropout(x, self.dropout, self.training)
        return F.log_softmax(x, dim=1)


class SAGE(nn.Module):
    """dropout(x); L SAGEConv(aggr='mean', root_weight=True) in -> H -> ... -> classes with
    relu + dropout between them; log_softmax (the GCN model's structure with SAGEConv)."""

    def __init__(self, f_in, hidden, classes, layers, dropout):
        super().__init__()
        dims = [f_in] + [hidden] * (layers - 1) + [classes]
        self.convs = nn.ModuleList(SAGEConv(a, b, aggr="mean") for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = dropout

    forward = GCN.forward


def gin_mlp(a, hidden, b):
    """A GINConv's MLP: Linear(a, H) - ReLU - Linear(H, b) (H inside every layer's MLP, so
    the output layer's is not squeezed through the class count)."""
    return nn.Sequential(nn.Linear(a, hidden), nn.ReLU(), nn.Linear(hidden, b))


class GIN(nn.Module):
    """dropout(x); L GINConv(MLP, eps=0, train_eps=--gin-train-eps) in -> H -> ... -> classes
    with relu + dropout between them; log_softmax."""

    def __init__(self, f_in, hidden, classes, layers, dropout, train_eps):
        super().__init__()
        dims = [f_in] + [hidden] * (layers - 1) + [classes]
        self.convs = nn.ModuleList(
            GINConv(gin_mlp(a, hidden, b), eps=0.0, train_eps=train_eps) for a, b in zip(dims[:-1], dims[1:])
        )
        self.dropout = dropout

    forward = GCN.forward


def build_model(cfg, g, device):
    f_in, classes, m = g["x"].shape[1], g["classes"], cfg["model"]
    if m == "gcn":
        model = GCN(f_in, cfg["hidden"], classes, cfg["layers"], cfg["dropout"], cfg["gcn_cached"])
    elif m == "agnn":
        model = AGNN(f_in, cfg["hidden"], classes, cfg["layers"], cfg["dropout"], cfg["agnn_dropout"] == "each")
    elif m == "gat":
        model = GAT(f_in, cfg["hidden"], classes, cfg["layers"], cfg["heads"], cfg["out_heads"], cfg["dropout"])
    elif m == "sage":
        model = SAGE(f_in, cfg["hidden"], classes, cfg["layers"], cfg["dropout"])
    elif m == "gin":
        model = GIN(f_in, cfg["hidden"], classes, cfg["layers"], cfg["dropout"], cfg["gin_train_eps"])
    else:
        raise ValueError(f"unknown model {m!r}")
    model = model.to(device)
    if cfg.get("compile"):
        # Compilation happens on the first call (counted in one_time_ms.first_forward); a
        # failure surfaces there and is recorded by the caller.
        model = torch.compile(model)
    return model


# --------------------------------------------------------------------------- device data


def _adjacency(g, kind, device):
    n = g["n"]
    rows = torch.from_numpy(g["rows"])
    cols = torch.from_numpy(g["cols"])
    if kind == "edge_index":
        # S[r][c] feeds node r from node c: source c -> target r.
        return torch.stack([cols, rows]).to(device)
    # torch sparse CSR holding S itself, which is PyG's adj_t (row = target).
    order = torch.from_numpy(np.lexsort((g["cols"], g["rows"])))
    crow = torch.zeros(n + 1, dtype=torch.int64)
    crow[1:] = torch.cumsum(torch.bincount(rows, minlength=n), 0)
    adj = torch.sparse_csr_tensor(crow, cols[order], torch.ones(rows.numel()), size=(n, n), check_invariants=True)
    return adj.to(device)


class DeviceData:
    """Everything a step needs, on the device. Index tensors instead of boolean masks, so a
    training step never waits on the host (a boolean gather syncs to learn its length)."""

    def __init__(self, g, device, adj_kind):
        self.g, self.device, self.adj_kind = g, device, adj_kind
        self.adj = _adjacency(g, device=device, kind=adj_kind)
        self.x = torch.from_numpy(g["x"]).to(device)
        self.y = torch.from_numpy(g["y"]).to(device)
        ms = [torch.from_numpy(m) for m in g["masks"]]
        self.masks = torch.stack(ms).to(device)  # [3, n] bool
        self.train_idx = ms[0].nonzero().view(-1).to(device)
        self.counts = [int(m.sum()) for m in ms]
        self.count_t = self.masks.sum(1).clamp(min=1).to(torch.float32)

    def with_adj(self, kind):
        """The same node data with the graph in the other layout (features are not copied)."""
        if kind == self.adj_kind:
            return self
        other = copy.copy(self)
        other.adj_kind, other.adj = kind, _adjacency(self.g, device=self.device, kind=kind)
        return other


def train_step(model, opt, d):
    model.train()
    opt.zero_grad(set_to_none=True)
    out = model(d.x, d.adj)
    loss = F.nll_loss(out.index_select(0, d.train_idx), d.y.index_select(0, d.train_idx))
    loss.backward()
    opt.step()
    return loss


@torch.no_grad()
def eval_accs(model, d):
    """Train/val/test accuracy as a [3] device tensor (no host sync)."""
    model.eval()
    pred = model(d.x, d.adj).argmax(1)
    correct = (pred == d.y).unsqueeze(0) & d.masks
    return correct.sum(1).to(torch.float32) / d.count_t


def make_opt(model, cfg):
    return torch.optim.Adam(model.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"])


# --------------------------------------------------------------------------- timing


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_calls(fn, n, device):
    """Run fn n times, each alone (synchronised before and after). Returns (device ms, wall ms)
    lists; device ms come from CUDA events around the call, on CPU they are the wall times."""
    dev_ms, wall_ms = [], []
    cuda = device.type == "cuda"
    for _ in range(n):
        sync(device)
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        if cuda:
            start.record()
        fn()
        if cuda:
            end.record()
            end.synchronize()
        wall_ms.append((time.perf_counter() - t0) * 1e3)
        if cuda:
            dev_ms.append(start.elapsed_time(end))
    return (dev_ms if cuda else wall_ms), wall_ms


def time_back_to_back(fn, n, device):
    """n calls queued without a synchronisation between them; ms per call (events on CUDA)."""
    sync(device)
    t0 = time.perf_counter()
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
    for _ in range(n):
        fn()
    if device.type == "cuda":
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / n
    return (time.perf_counter() - t0) * 1e3 / n


def summary(ms):
    return {
        "median": statistics.median(ms),
        "min": min(ms),
        "max": max(ms),
        "mean": statistics.fmean(ms),
        "n": len(ms),
    }


def wall(fn, device):
    sync(device)
    t0 = time.perf_counter()
    r = fn()
    sync(device)
    return r, (time.perf_counter() - t0) * 1e3


def timing_run(cfg, g, d, device, args):
    """A fresh model (seeded with the first seed): one-time costs, then warm-up, then the
    timed steps, then the timed epochs (step + eval forward + accuracies)."""
    torch.manual_seed(args.seed_list[0])
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    model, model_ms = wall(lambda: build_model(cfg, g, device), device)
    opt = make_opt(model, cfg)
    # First step split into its forward (builds the GCN cache, first kernels / handles) and the rest.
    model.train()
    opt.zero_grad(set_to_none=True)
    out, first_fwd_ms = wall(lambda: model(d.x, d.adj), device)

    def rest():
        loss = F.nll_loss(out.index_select(0, d.train_idx), d.y.index_select(0, d.train_idx))
        loss.backward()
        opt.step()

    _, first_rest_ms = wall(rest, device)
    del out
    _, first_eval_ms = wall(lambda: eval_accs(model, d), device)
    for _ in range(args.warmup):
        train_step(model, opt, d)
    step_dev, step_wall = time_calls(lambda: train_step(model, opt, d), args.timing_steps, device)
    step_b2b = time_back_to_back(lambda: train_step(model, opt, d), args.timing_steps, device)
    for _ in range(max(1, args.warmup // 2)):
        eval_accs(model, d)
    eval_dev, _ = time_calls(lambda: eval_accs(model, d), args.timing_steps, device)

    def epoch():
        train_step(model, opt, d)
        eval_accs(model, d)

    epoch_dev, epoch_wall = time_calls(epoch, args.timing_steps, device)
    t = {
        "step_ms": summary(step_dev),
        "step_wall_ms": summary(step_wall),
        "step_back_to_back_ms": step_b2b,
        "eval_ms": summary(eval_dev),
        "epoch_ms": summary(epoch_dev),
        "epoch_wall_ms": summary(epoch_wall),
        "warmup_steps": args.warmup,
        "timing_steps": args.timing_steps,
        "timer": "torch.cuda.Event around each call, synchronised before and after"
        if device.type == "cuda"
        else "time.perf_counter around each call",
        "one_time_ms": {
            "model_init": model_ms,
            "first_forward": first_fwd_ms,
            "first_step_rest": first_rest_ms,
            "first_step": first_fwd_ms + first_rest_ms,
            "first_eval": first_eval_ms,
        },
    }
    if device.type == "cuda":
        t["peak_memory_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    return t


# --------------------------------------------------------------------------- fastest configuration

# What a careful PyG user would try for speed, in the order tried: PyG as it ships, TF32 matmuls,
# the graph as a torch sparse CSR adj_t (cuSPARSE SpMM for GCN, SAGE and GIN), then torch.compile
# of the model on the layout that was faster eagerly ("best": one compilation per model and graph,
# as compiling costs tens of seconds each).
FASTEST_VARIANTS = ["edge_index", "edge_index+tf32", "csr+tf32", "compile+best+tf32"]
ADJ_TOKENS = ("edge_index", "csr", "best")


def parse_variant(text):
    parts = [t.strip() for t in text.split("+") if t.strip()]
    adj = [t for t in parts if t in ADJ_TOKENS]
    if not parts or len(adj) > 1 or any(t not in ADJ_TOKENS + ("tf32", "compile") for t in parts):
        raise ValueError(f"--variants: '{text}' is not '+'-joined from edge_index|csr|best, tf32, compile")
    v = {"adj": adj[0] if adj else "edge_index", "tf32": "tf32" in parts, "compile": "compile" in parts}
    v["name"] = ("compile+" if v["compile"] else "") + v["adj"] + ("+tf32" if v["tf32"] else "")
    return v


def dynamo_counts():
    from torch._dynamo.utils import counters

    return {
        "graph_breaks": int(sum(counters["graph_break"].values())),
        "unique_graphs": int(counters["stats"]["unique_graphs"]),
        "break_reasons": sorted({str(r).strip().splitlines()[0][:160] for r in counters["graph_break"]})[:5],
    }


TIMING_KEYS = ("step_ms", "epoch_ms", "eval_ms", "step_back_to_back_ms", "one_time_ms", "peak_memory_mb")


def run_variants(cfg, g, data_for, device, args, base_t=None):
    """Time cfg once per --variants entry (fresh model each; TF32 switched for it and restored).
    A variant equal to the configuration already timed (base_t) reuses that timing. A variant
    that fails (torch.compile without a working backend, an unsupported layout) is recorded
    with its error and skipped; a failing "best" layout is retried on the next-fastest one.
    Returns (per-variant records, the fastest one)."""
    out, seen = [], {}
    saved = torch.backends.cuda.matmul.allow_tf32
    base_key = (cfg["adj"], bool(saved) and device.type == "cuda", bool(cfg.get("compile")))

    def attempt(v, adj, tf32):
        rec = {"name": v["name"], "adj": adj, "tf32": tf32, "compile": v["compile"]}
        key = (adj, tf32, v["compile"])
        if key in seen:  # on the CPU tf32 changes nothing; "best" may name one already timed
            rec["skipped"] = f"same as {seen[key]} here (tf32 affects CUDA matmuls only)"
            print(f"    variant {rec['name']}: skipped, {rec['skipped']}", flush=True)
            return rec
        seen[key] = v["name"]
        if base_t is not None and key == base_key:
            rec.update({k: base_t[k] for k in TIMING_KEYS if k in base_t}, reused="the record's own timing")
            print(f"    variant {rec['name']}: step {rec['step_ms']['median']:.3f} ms (the record's own timing)", flush=True)
            return rec
        try:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            if v["compile"]:
                torch._dynamo.reset()
                from torch._dynamo.utils import counters

                counters.clear()
            t = timing_run(dict(cfg, adj=adj, compile=v["compile"]), g, data_for(adj), device, args)
            rec.update({k: t[k] for k in TIMING_KEYS if k in t})
            if v["compile"]:
                rec["dynamo"] = dynamo_counts()
        except Exception as e:  # recorded, not fatal: the other variants still run
            msg = str(e).strip().splitlines()
            rec["error"] = f"{type(e).__name__}: {msg[0][:300] if msg else ''}"
            if device.type == "cuda":
                torch.cuda.empty_cache()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = saved
            if v["compile"]:
                torch._dynamo.reset()
        shown = f"step {rec['step_ms']['median']:.3f} ms" if "step_ms" in rec else rec["error"]
        print(f"    variant {rec['name']} ({adj}): {shown}", flush=True)
        return rec

    for v in args.variant_list:
        tf32 = v["tf32"] and device.type == "cuda"
        if v["adj"] != "best":
            out.append(attempt(v, v["adj"], tf32))
            continue
        # "best": the layouts timed so far, fastest first; the next one if it fails.
        ranked = sorted((r for r in out if "step_ms" in r), key=lambda r: r["step_ms"]["median"])
        layouts = list(dict.fromkeys(r["adj"] for r in ranked)) or ["edge_index"]
        for adj in layouts:
            rec = attempt(v, adj, tf32)
            out.append(rec)
            if "error" not in rec:
                break
    timed = [r for r in out if "step_ms" in r]
    fastest = min(timed, key=lambda r: r["step_ms"]["median"]) if timed else None
    return out, fastest


# --------------------------------------------------------------------------- accuracy


def accuracy_run(cfg, g, d, device, seed, epochs):
    torch.manual_seed(seed)
    model = build_model(dict(cfg, compile=False), g, device)
    opt = make_opt(model, cfg)
    best = None
    t0 = time.perf_counter()
    for epoch in range(1, epochs + 1):
        loss = train_step(model, opt, d)
        tr, va, te = eval_accs(model, d).tolist()
        if best is None or va > best["val_acc"]:  # first best on ties
            best = {"epoch": epoch, "train_acc": tr, "val_acc": va, "test_acc": te}
    sync(device)
    return {
        "seed": seed,
        "best_epoch": best["epoch"],
        "train_acc": best["train_acc"],
        "val_acc": best["val_acc"],
        "test_acc": best["test_acc"],
        "final_epoch": {"loss": loss.item(), "train_acc": tr, "val_acc": va, "test_acc": te},
        "wall_s": time.perf_counter() - t0,
    }


# --------------------------------------------------------------------------- self-check


def _np(t):
    return t.detach().cpu().double().numpy()


def _check(name, got, want, tol=1e-4):
    err = float(np.abs(got - want).max())
    if not err <= tol:
        raise AssertionError(f"{name} differs from its dense reference by {err}")


def self_check(device):
    """The edge convention and the layer maths against dense references on a small directed
    graph, with the graph as an edge_index and as a sparse CSR adj_t:
    GCN = D^-1/2 (S + I) D^-1/2 (X W^T) with D the row sums of S + I;
    AGNN = row softmax of beta cos(x_r, x_c) over the pattern of S + I, times X;
    GAT = per head, row softmax of LeakyReLU_0.2(a_dst . W x_r + a_src . W x_c) over the pattern
    of S + I, times W X, heads concatenated or averaged, plus bias;
    SAGE = W_l mean_{c: S[r][c] != 0} x_c + b + W_r x_r (rows without entries aggregate 0);
    GIN = MLP((1 + eps) x_r + sum_c S[r][c] x_c). Raises on a mismatch."""
    gen = np.random.default_rng(7)
    n, f = 9, 5
    dense = (gen.random((n, n)) < 0.3) & ~np.eye(n, dtype=bool)
    dense[0, :] = False  # a node without in-edges
    dense[1, 2] = True
    dense[2, 1] = False  # directed: node 1 reads node 2, node 2 does not read node 1
    rows, cols = np.nonzero(dense)
    g = {"n": n, "rows": rows.astype(np.int64), "cols": cols.astype(np.int64)}
    x = torch.from_numpy(gen.standard_normal((n, f)).astype(np.float32))
    xd, xn = x.to(device), x.double().numpy()
    s_mat = dense.astype(np.float64)
    a = s_mat + np.eye(n)
    dinv = 1.0 / np.sqrt(a.sum(1))
    a_hat = dinv[:, None] * a * dinv[None, :]

    def row_softmax(scores):  # [n, n] scores, -inf off the pattern
        e = np.exp(scores - scores.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    torch.manual_seed(0)
    for kind in ("edge_index", "csr"):
        adj = _adjacency(g, kind, device)
        with torch.no_grad():
            conv = GCNConv(f, 3, bias=False).to(device)
            _check(f"GCNConv ({kind})", _np(conv(xd, adj)), a_hat @ (xn @ _np(conv.lin.weight).T))

            conv = AGNNConv(requires_grad=True).to(device)
            conv.beta.fill_(0.7)
            nrm = xn / np.linalg.norm(xn, axis=1, keepdims=True)
            alpha = row_softmax(np.where(a > 0, 0.7 * nrm @ nrm.T, -np.inf))
            _check(f"AGNNConv ({kind})", _np(conv(xd, adj)), alpha @ xn)

            for heads, concat in ((3, True), (2, False)):
                conv = GATConv(f, 4, heads=heads, concat=concat, dropout=0.6).to(device).eval()
                conv.bias.normal_()
                h = (xn @ _np(conv.lin.weight).T).reshape(n, heads, 4)
                s_src = (h * _np(conv.att_src)[0]).sum(-1)  # [n, heads]
                s_dst = (h * _np(conv.att_dst)[0]).sum(-1)
                outs = []
                for k in range(heads):
                    e = s_dst[:, k][:, None] + s_src[:, k][None, :]
                    e = np.where(e > 0, e, 0.2 * e)
                    outs.append(row_softmax(np.where(a > 0, e, -np.inf)) @ h[:, k, :])
                want = np.concatenate(outs, 1) if concat else np.mean(outs, 0)
                _check(f"GATConv heads={heads} concat={concat} ({kind})", _np(conv(xd, adj)), want + _np(conv.bias))

            conv = SAGEConv(f, 3, aggr="mean").to(device)
            deg = s_mat.sum(1, keepdims=True)
            mean = (s_mat @ xn) / np.maximum(deg, 1)
            want = mean @ _np(conv.lin_l.weight).T + _np(conv.lin_l.bias) + xn @ _np(conv.lin_r.weight).T
            _check(f"SAGEConv ({kind})", _np(conv(xd, adj)), want)

            for eps in (0.0, 0.3):
                conv = GINConv(gin_mlp(f, 6, 3), eps=eps, train_eps=True).to(device)
                mlp = conv.nn
                z = (1 + eps) * xn + s_mat @ xn
                z = np.maximum(z @ _np(mlp[0].weight).T + _np(mlp[0].bias), 0)
                want = z @ _np(mlp[2].weight).T + _np(mlp[2].bias)
                _check(f"GINConv eps={eps} ({kind})", _np(conv(xd, adj)), want)
    print(
        f"self-check passed on {device}: GCNConv, AGNNConv, GATConv (concat, mean), SAGEConv and GINConv "
        "match the dense references with the graph as edge_index and as sparse CSR adj_t"
    )


# --------------------------------------------------------------------------- main


def device_name(device):
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip() + f" ({torch.get_num_threads()} torch threads)"
    except OSError:
        pass
    return platform.processor() or "cpu"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("graphs", nargs="*", help="dataset names (in $TCGNN_DATASETS) or .mtx/.mtx.gz paths")
    p.add_argument("--model", nargs="+", choices=list(DEFAULTS), default=["gcn"])
    p.add_argument("--layers", nargs="+", type=int, help="default: the model's (--print-defaults)")
    p.add_argument("--hidden", nargs="+", type=int, help="default: the model's (per head for gat)")
    p.add_argument("--dropout", nargs="+", type=float, help="default: the model's")
    p.add_argument("--heads", type=int, help="gat: heads of the hidden layers (default 8)")
    p.add_argument("--gat-out-heads", type=int, default=1, help="gat: heads of the output layer, averaged (default 1)")
    p.add_argument("--gin-train-eps", action="store_true", help="gin: learn eps (default: fixed at 0)")
    p.add_argument("--lr", type=float, help="default: the model's")
    p.add_argument("--weight-decay", type=float, help="default: the model's")
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--seeds", default="0,1,2,3,4", help="comma separated model seeds")
    p.add_argument("--timing-steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10, help="untimed steps before the timed ones")
    p.add_argument("--timing-only", action="store_true", help="skip the accuracy runs")
    p.add_argument("--no-timing", action="store_true", help="skip the timing runs")
    p.add_argument("--features", type=int, default=96, help="random feature width when there is no npz")
    p.add_argument("--classes", type=int, default=8, help="random label count when there is no npz")
    p.add_argument("--synthetic", action="store_true", help="ignore any npz: random features and labels")
    p.add_argument("--no-feature-norm", action="store_true", help="use npz features as stored (no row normalisation)")
    p.add_argument("--data-seed", type=int, default=0, help="seed of random features / labels")
    p.add_argument("--split-seed", type=int, default=0, help="seed of a random 60/20/20 split")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--no-gcn-cache", action="store_true", help="GCNConv(cached=False): renormalise every forward")
    p.add_argument(
        "--adj",
        choices=["edge_index", "csr"],
        default="edge_index",
        help="graph as an edge_index tensor (PyG's gather/scatter path, default) or as a torch "
        "sparse CSR adj_t (GCN, SAGE, GIN: torch.sparse.mm; GAT, AGNN: PyG turns it back into edges)",
    )
    p.add_argument("--compile", action="store_true", help="time torch.compile(model) (the accuracy runs stay eager)")
    p.add_argument(
        "--fastest",
        action="store_true",
        help="also time PyG's faster configurations (--variants) of every model and name the fastest",
    )
    p.add_argument(
        "--variants",
        default=",".join(FASTEST_VARIANTS),
        help="the configurations --fastest times, comma separated, each '+'-joined from "
        "edge_index|csr, tf32, compile (default: %(default)s)",
    )
    p.add_argument("--print-defaults", action="store_true", help="print the models' defaults (JSON) and exit")
    p.add_argument(
        "--agnn-dropout",
        choices=["once", "each"],
        default="once",
        help="AGNN: one dropout after the last AGNNConv (PyG's example, default) or one after each",
    )
    p.add_argument("--tf32", action="store_true", help="allow TF32 in float32 matmuls (torch default: off)")
    p.add_argument("--self-check", action="store_true", help="check the edge convention and layer maths, then exit")
    p.add_argument("--out", help="write the records here (JSON), rewritten after every record")
    a = p.parse_args(argv)
    if a.print_defaults:
        return a
    if not a.graphs and not a.self_check:
        p.error("no graph given")
    a.seed_list = [int(s) for s in a.seeds.split(",") if s.strip()]
    if not a.seed_list:
        p.error("--seeds is empty")
    if a.timing_steps < 1:
        p.error("--timing-steps must be >= 1")
    try:
        a.variant_list = [parse_variant(v) for v in a.variants.split(",") if v.strip()]
    except ValueError as e:
        p.error(str(e))
    if a.fastest and not a.variant_list:
        p.error("--variants is empty")
    return a


def configs(args):
    for model in args.model:
        d = DEFAULTS[model]
        grid = itertools.product(args.layers or [d["layers"]], args.hidden or [d["hidden"]], args.dropout or [d["dropout"]])
        for layers, hidden, dropout in grid:
            if layers < 1:
                raise SystemExit("--layers must be >= 1")
            yield {
                "model": model,
                "layers": layers,
                "hidden": hidden,
                "dropout": dropout,
                "lr": d["lr"] if args.lr is None else args.lr,
                "weight_decay": d["wd"] if args.weight_decay is None else args.weight_decay,
                "epochs": args.epochs,
                "heads": (args.heads or d["heads"]) if model == "gat" else None,
                "out_heads": args.gat_out_heads if model == "gat" else None,
                "gin_train_eps": args.gin_train_eps if model == "gin" else None,
                "gcn_cached": (not args.no_gcn_cache) if model == "gcn" else None,
                "adj": args.adj,
                "agnn_dropout": args.agnn_dropout if model == "agnn" else None,
                "compile": args.compile,
                # GCNConv, AGNNConv and GATConv add one self-loop per node; SAGEConv and GINConv
                # aggregate the graph's own entries only.
                "self_loops_added": model in ("gcn", "agnn", "gat"),
            }


def describe(cfg):
    m, layers, hidden = cfg["model"], cfg["layers"], cfg["hidden"]
    if m == "gcn":
        return f"x = dropout(x); {layers} x GCNConv(cached={cfg['gcn_cached']}) with relu + dropout between them; log_softmax"
    if m == "agnn":
        props = f"{layers} x AGNNConv(requires_grad=True)"
        props += " each followed by dropout" if cfg["agnn_dropout"] == "each" else "; dropout"
        return f"x = dropout(x); relu(nn.Linear(F, {hidden})); {props}; nn.Linear({hidden}, classes); log_softmax"
    if m == "gat":
        return (
            f"x = dropout(x); {layers - 1} x GATConv(in, {hidden}, heads={cfg['heads']}, concat=True, "
            f"dropout={cfg['dropout']}) each followed by elu + dropout; GATConv(in, classes, "
            f"heads={cfg['out_heads']}, concat=False, dropout={cfg['dropout']}); log_softmax"
        )
    if m == "sage":
        return f"x = dropout(x); {layers} x SAGEConv(aggr='mean', root_weight=True) with relu + dropout between them; log_softmax"
    return (
        f"x = dropout(x); {layers} x GINConv(Linear(in, {hidden}) - ReLU - Linear({hidden}, out), eps=0, "
        f"train_eps={cfg['gin_train_eps']}) with relu + dropout between them; log_softmax"
    )


def mean_std(v):
    if not v:
        return None, None, None
    return statistics.fmean(v), (statistics.stdev(v) if len(v) > 1 else 0.0), statistics.pstdev(v)


def main(argv=None):
    args = parse_args(argv)
    if args.print_defaults:
        print(json.dumps(DEFAULTS, indent=1))
        return DEFAULTS
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.self_check:
        self_check(device)
        return None
    if args.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
    env = {
        "device": device_name(device),
        "device_type": device.type,
        "torch": torch.__version__,
        "torch_geometric": torch_geometric.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
        "torch_threads": torch.get_num_threads(),
        "host": platform.node(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    _, cuda_init_ms = wall(lambda: torch.zeros(1, device=device) + 1, device)
    env["cuda_init_ms" if device.type == "cuda" else "device_init_ms"] = cuda_init_ms
    result = {"tool": "bench/pyg/train.py", "argv": sys.argv[1:] if argv is None else list(argv), "env": env, "records": []}

    def save():
        if args.out:
            tmp = args.out + ".tmp"
            with open(tmp, "w") as f:
                json.dump(result, f, indent=1)
                f.write("\n")
            os.replace(tmp, args.out)

    print(f"# {env['device']} | torch {env['torch']} | torch_geometric {env['torch_geometric']}", flush=True)
    for arg in args.graphs:
        t0 = time.perf_counter()
        g = load_graph(arg, args)
        load_ms = (time.perf_counter() - t0) * 1e3
        d, to_dev_ms = wall(lambda: DeviceData(g, device, args.adj), device)
        print(
            f"# {g['name']}: n={g['n']} nnz={g['nnz']} F={g['x'].shape[1]} classes={g['classes']} "
            f"split={g['split']} (train/val/test {d.counts[0]}/{d.counts[1]}/{d.counts[2]}) "
            f"load {load_ms:.0f} ms, to {device.type} {to_dev_ms:.0f} ms",
            flush=True,
        )
        for cfg in configs(args):
            rec = {
                "graph": g["name"],
                "mtx": g["mtx"],
                "npz": g["npz"],
                "n": g["n"],
                "nnz": g["nnz"],
                "self_loops_in_file": g["self_loops_in_file"],
                "nnz_with_self_loops": g["nnz_with_self_loops"],
                "features": int(g["x"].shape[1]),
                "feature_source": g["feature_source"],
                "feature_norm": g["feature_norm"],
                "classes": g["classes"],
                "split": g["split"],
                "split_sizes": d.counts,
                "synthetic_features": g["synthetic_features"],
                "synthetic_labels": g["synthetic_labels"],
                "edge_convention": "Matrix Market entry (r, c) -> PyG edge c -> r (node r aggregates from c)",
                "notes": g["notes"],
                "config": dict(cfg, architecture=describe(cfg), optimizer="torch.optim.Adam(model.parameters())"),
                **env,
            }
            rec["one_time_ms"] = {"load": load_ms, "to_device": to_dev_ms}
            tag = f"{g['name']} {cfg['model']} {cfg['layers']}x{cfg['hidden']} p={cfg['dropout']}"
            t = None
            if not args.no_timing:
                try:
                    t = timing_run(cfg, g, d, device, args)
                except Exception as e:  # torch.compile may fail to build: record it, go on
                    if not cfg["compile"]:
                        raise
                    rec["timing_error"] = f"{type(e).__name__}: {str(e).strip()[:300]}"
                    print(f"  {tag}: torch.compile failed: {rec['timing_error']}", flush=True)
            if t is not None:
                rec["one_time_ms"].update(t["one_time_ms"])
                rec.update({k: v for k, v in t.items() if k != "one_time_ms"})
                print(
                    f"  {tag}: step {t['step_ms']['median']:.3f} ms (min {t['step_ms']['min']:.3f}, "
                    f"max {t['step_ms']['max']:.3f}), epoch {t['epoch_ms']['median']:.3f} ms",
                    flush=True,
                )
            if args.fastest and not args.no_timing:
                variants, best = run_variants(cfg, g, d.with_adj, device, args, base_t=t)
                rec["variants"] = variants
                rec["fastest"] = (
                    {k: best[k] for k in ("name", "adj", "tf32", "compile", "step_ms", "epoch_ms")} if best else None
                )
                if best:
                    print(f"  {tag}: fastest {best['name']}, step {best['step_ms']['median']:.3f} ms", flush=True)
            if not args.timing_only:
                runs = []
                for seed in args.seed_list:
                    r = accuracy_run(cfg, g, d, device, seed, cfg["epochs"])
                    runs.append(r)
                    print(
                        f"  {tag} seed {seed}: test {100 * r['test_acc']:.1f}% at epoch {r['best_epoch']} "
                        f"(val {100 * r['val_acc']:.1f}%), {r['wall_s']:.1f} s",
                        flush=True,
                    )
                accs = [r["test_acc"] for r in runs]
                m, s, ps = mean_std(accs)
                rec["per_seed"] = runs
                rec["test_acc_mean"], rec["test_acc_std"], rec["test_acc_pstd"] = m, s, ps
                rec["val_acc_mean"] = statistics.fmean(r["val_acc"] for r in runs)
                rec["accuracy_note"] = (
                    "meaningless: random labels (timing run)"
                    if g["synthetic_labels"]
                    else "test accuracy at the epoch of best validation accuracy (first best on ties); "
                    "std = sample std (n-1), pstd = population std"
                )
            result["records"].append(rec)
            save()
    print_table(result["records"])
    return result


def print_table(records):
    print()
    hdr = (
        f"{'graph':<18} {'model':<5} {'LxH':>6} {'n':>8} {'nnz':>10} {'test acc':>14} {'step ms':>9} {'epoch ms':>9}"
        f" {'fastest':>24} {'ms':>9}"
    )
    print(hdr)
    print("-" * len(hdr))
    for r in records:
        c = r["config"]
        if r.get("test_acc_mean") is None:
            acc = "-"
        else:
            acc = f"{100 * r['test_acc_mean']:.1f} ± {100 * r['test_acc_std']:.1f}%"
            if r["synthetic_labels"]:
                acc = "(random y)"
        step = f"{r['step_ms']['median']:.3f}" if "step_ms" in r else "-"
        ep = f"{r['epoch_ms']['median']:.3f}" if "epoch_ms" in r else "-"
        lh = f"{c['layers']}x{c['hidden']}" if not c.get("heads") else f"{c['layers']}x{c['heads']}x{c['hidden']}"
        fast = r.get("fastest") or {}
        fname, fms = fast.get("name", "-"), (f"{fast['step_ms']['median']:.3f}" if fast else "-")
        print(
            f"{r['graph']:<18} {c['model']:<5} {lh:>6} {r['n']:>8} {r['nnz']:>10} {acc:>14} {step:>9} {ep:>9}"
            f" {fname:>24} {fms:>9}"
        )


if __name__ == "__main__":
    main()
