#!/usr/bin/env python3
"""Plain-PyTorch baseline for sampled (mini-batch) training: GraphSAINT node / edge / random-walk
samplers and a neighbour sampler with per-layer fan-outs, on the GPU, feeding PyG's GCNConv and
SAGEConv. The baseline `tcgnn bench sample` (issue 16) is compared against.

    python3 bench/pyg/sample.py cora --model gcn sage --sampler saint-rw neighbor --seeds 0,1,2,3,4 --out s.json

Why the samplers are reimplemented: PyG's own samplers (`GraphSAINT*Sampler`, `NeighborLoader`)
need `torch_sparse` or `pyg-lib`, and the GPU machine's PyG has neither (and no network to install
them), so they cannot run there. These are written with plain tensor ops (`torch.randint`,
`torch.rand`, `torch.unique`, `torch.repeat_interleave`, `torch.searchsorted`-free CSR walks,
`torch.bincount`) on a CSR resident on the device, following PyG's definitions: see
bench/pyg/README.md ("Sampled training") for every definition and where it differs from PyG.

Needs torch, torch_geometric and numpy only; shares loading and timing with train.py.
"""

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train as base  # noqa: E402  (bench/pyg/train.py: loading, timing helpers, warnings filters)

import torch_geometric  # noqa: E402
from torch_geometric.nn import GCNConv, SAGEConv  # noqa: E402

SAMPLERS = ("saint-rw", "saint-node", "saint-edge", "neighbor")
# Per sampler: what --batch-size counts, and its default. Mirrored by the Rust side.
SAMPLER_DEFAULTS = {
    # saint-rw: None = max(1000, N // 20) roots, resolved on the graph (as the Rust side).
    "saint-rw": dict(batch_size=None, unit="walk roots", walk_length=2, coverage=50),
    "saint-node": dict(batch_size=4000, unit="node draws (with replacement, then unique)", coverage=50),
    "saint-edge": dict(batch_size=500, unit="edges (without replacement)", coverage=50),
    "neighbor": dict(batch_size=512, unit="seed (train) nodes", fanout=[15, 10]),
}
MODEL_DEFAULTS = {m: base.DEFAULTS[m] for m in ("gcn", "sage")}


# --------------------------------------------------------------------------- the graph on the device


class Graph:
    """The graph S without self-loops and without duplicate entries, as a CSR by target on the
    device: node r aggregates from crow[r]..crow[r+1] sources `src`. GCN's propagation graph is
    this plus one self-loop per node (as GCNConv builds it); SAGE aggregates these edges only."""

    def __init__(self, g, device):
        n = g["n"]
        rows = torch.from_numpy(g["rows"])
        cols = torch.from_numpy(g["cols"])
        keep = rows != cols
        key = torch.unique(rows[keep] * n + cols[keep])  # sorted by (target, source), deduplicated
        self.n, self.device = n, device
        self.dst = (key // n).to(device)
        self.src = (key % n).to(device)
        self.e = int(key.numel())
        self.deg = torch.bincount(self.dst, minlength=n)  # in-degree without the loop
        self.crow = torch.zeros(n + 1, dtype=torch.int64, device=device)
        self.crow[1:] = torch.cumsum(self.deg, 0)
        self.removed = {"self_loops": int((~keep).sum()), "duplicates": int(keep.sum()) - self.e}
        # GCN: D^-1/2 (S + I) D^-1/2 with D the row sums of S + I, on the full graph.
        d = (self.deg + 1).to(torch.float32)
        self.dinv_sqrt = d.rsqrt()
        self.gcn_w = self.dinv_sqrt[self.dst] * self.dinv_sqrt[self.src]
        self.gcn_loop_w = 1.0 / d
        # SAGE's mean: 1/deg of the target.
        self.sage_w = 1.0 / self.deg.clamp(min=1).to(torch.float32)[self.dst]

    def expand(self, nodes):
        """The in-edges of `nodes` (in order): (position of the target in `nodes`, edge id).
        One host sync (repeat_interleave learns the edge count)."""
        counts = self.deg[nodes]
        seg = torch.repeat_interleave(torch.arange(nodes.numel(), device=self.device), counts)
        start = torch.cumsum(counts, 0) - counts
        eid = self.crow[nodes][seg] + torch.arange(seg.numel(), device=self.device) - start[seg]
        return seg, eid

    def full_adj(self, model):
        """The whole graph as the sparse CSR adj_t the layers take (evaluation)."""
        loops = torch.arange(self.n, device=self.device)
        if model == "gcn":
            return csr(
                torch.cat([self.dst, loops]),
                torch.cat([self.src, loops]),
                torch.cat([self.gcn_w, self.gcn_loop_w]),
                self.n,
                self.n,
            )
        return csr(self.dst, self.src, self.sage_w, self.n, self.n)


def csr(rows, cols, vals, n_rows, n_cols):
    """A torch sparse CSR [n_rows, n_cols] from COO entries in any order (sorted here by
    (row, col), which the CSR layout requires)."""
    order = torch.argsort(rows * n_cols + cols)
    rows, cols, vals = rows[order], cols[order], vals[order]
    crow = torch.zeros(n_rows + 1, dtype=torch.int64, device=rows.device)
    crow[1:] = torch.cumsum(torch.bincount(rows, minlength=n_rows), 0)
    return torch.sparse_csr_tensor(crow, cols, vals, size=(n_rows, n_cols))


# --------------------------------------------------------------------------- samplers


class Batch:
    """What one step trains on: the input nodes (global ids), one (adj_t, n_dst) per layer (input
    layer first), the output nodes' positions among the inputs and their loss weights."""

    def __init__(self, nodes, adjs, out_pos, loss_w, edges):
        self.nodes, self.adjs, self.out_pos, self.loss_w, self.edges = nodes, adjs, out_pos, loss_w, edges


class Saint:
    """GraphSAINT (Zeng et al. 2020) as PyG's GraphSAINT*Sampler: sample a node set, train on the
    subgraph it induces. Normalisation (coverage > 0) from pre-sampling as PyG computes it:
    C_v = subgraphs containing node v, C_e = subgraphs containing edge e, M = subgraphs drawn;
    node_norm[v] = M / (C_v n_train) (C_v = 0 -> 0.1), edge_norm[e] = C_target(e) / C_e clamped to
    [0, 1e4] (0/0 -> 0.1). The loss is sum over batch train nodes of node_norm * NLL, an unbiased
    estimate of the mean train NLL (PyG divides by n instead of n_train: its loss is n_train / n
    times smaller, and weight decay then dominates where few nodes are labelled, e.g. cora's 5%);
    layers aggregate with the full graph's coefficients times edge_norm."""

    def __init__(self, graph, kind, model, batch_size, walk_length, gen):
        self.g, self.kind, self.model = graph, kind, model
        self.batch_size, self.walk_length, self.gen = batch_size, walk_length, gen
        self.node_norm = self.edge_norm = self.loop_norm = None
        self.local = torch.full((graph.n,), -1, dtype=torch.int64, device=graph.device)
        if kind == "saint-edge":
            # The GraphSAINT paper's edge probability, p(u, v) proportional to 1/deg u + 1/deg v.
            # (PyG's code inverts its 1/deg once more and so uses deg u + deg v.)
            d = graph.deg.clamp(min=1).to(torch.float32)
            self.edge_p = 1.0 / d[graph.src] + 1.0 / d[graph.dst]

    def sample_nodes(self):
        g, dev, gen, b = self.g, self.g.device, self.gen, self.batch_size
        if self.kind == "saint-node":
            # PyG: one end of b uniformly drawn edges (probability ~ degree), then unique. Here the
            # target (the aggregating end; PyG takes edge_index[0], the same on symmetric graphs).
            if g.e == 0:
                return torch.unique(torch.randint(g.n, (b,), device=dev, generator=gen))
            pick = torch.randint(g.e, (b,), device=dev, generator=gen)
            return torch.unique(g.dst[pick])
        if self.kind == "saint-edge":
            if g.e == 0:
                return torch.unique(torch.randint(g.n, (b,), device=dev, generator=gen))
            # b edges without replacement, probability ~ edge_p: the b largest log(U)/p (PyG's way).
            keys = torch.rand(g.e, device=dev, generator=gen).log() / (self.edge_p + 1e-10)
            pick = keys.topk(min(b, g.e)).indices
            return torch.unique(torch.cat([g.src[pick], g.dst[pick]]))
        # Random walks: b uniform roots, walk_length steps each along in-edges (to a node the
        # current one aggregates from); a node without in-edges stays where it is.
        cur = torch.randint(g.n, (b,), device=dev, generator=gen)
        visited = [cur]
        for _ in range(self.walk_length):
            deg = g.deg[cur]
            off = (torch.rand(b, device=dev, generator=gen) * deg).long().clamp(max=(deg - 1).clamp(min=0))
            nxt = g.src[(g.crow[cur] + off).clamp(max=max(g.e - 1, 0))] if g.e else cur
            cur = torch.where(deg > 0, nxt, cur)
            visited.append(cur)
        return torch.unique(torch.cat(visited))

    def induced(self, nodes):
        """The edges of S with both ends in `nodes` (sorted): (local target, local source, edge id)."""
        self.local[nodes] = torch.arange(nodes.numel(), device=nodes.device)
        seg, eid = self.g.expand(nodes)
        src_local = self.local[self.g.src[eid]]
        keep = src_local >= 0
        self.local[nodes] = -1
        return seg[keep], src_local[keep], eid[keep]

    def presample(self, coverage, steps, n_loss):
        """PyG's __compute_norm__: whole passes of `steps` subgraphs until coverage * n nodes
        have been drawn. n_loss: the nodes the loss averages over (the train nodes)."""
        g = self.g
        node_count = torch.zeros(g.n, device=g.device)
        edge_count = torch.zeros(g.e, device=g.device)
        drawn, m = 0, 0
        while drawn < coverage * g.n:
            for _ in range(steps):
                nodes = self.sample_nodes()
                _, _, eid = self.induced(nodes)
                node_count[nodes] += 1
                edge_count[eid] += 1
                drawn += nodes.numel()
            m += steps
        edge_norm = (node_count[g.dst] / edge_count).clamp_(0, 1e4)
        edge_norm[torch.isnan(edge_norm)] = 0.1
        node_count[node_count == 0] = 0.1
        self.node_norm = m / node_count / max(n_loss, 1)
        self.edge_norm = edge_norm
        # GCN's self-loop (v, v) is in a subgraph exactly when v is: C_loop / C_v = 1.
        return {"subgraphs": m, "nodes_drawn": drawn}

    def sample(self):
        nodes = self.sample_nodes()
        return nodes, self.induced(nodes)

    def assemble(self, nodes, induced, train_mask):
        """Weights and the CSR on the device for one subgraph."""
        g, k = self.g, nodes.numel()
        dst, src, eid = induced
        loops = torch.arange(k, device=nodes.device)
        norm = self.edge_norm is not None
        if self.model == "gcn":
            if norm:
                w = g.gcn_w[eid] * self.edge_norm[eid]
                lw = g.gcn_loop_w[nodes]
            else:  # GCN normalisation of the subgraph itself
                d = (torch.bincount(dst, minlength=k) + 1).to(torch.float32)
                w = (d[dst] * d[src]).rsqrt()
                lw = 1.0 / d
            adj = csr(torch.cat([dst, loops]), torch.cat([src, loops]), torch.cat([w, lw]), k, k)
        else:
            if norm:
                w = g.sage_w[eid] * self.edge_norm[eid]
            else:  # mean over the subgraph's in-neighbours
                w = 1.0 / torch.bincount(dst, minlength=k).clamp(min=1).to(torch.float32)[dst]
            adj = csr(dst, src, w, k, k)
        is_train = train_mask[nodes]
        out_pos = is_train.nonzero().view(-1)
        loss_w = self.node_norm[nodes[out_pos]] if norm else None
        return adj, out_pos, loss_w, int(eid.numel())


class Neighbor:
    """Neighbour sampling as PyG's NeighborLoader (replace=False): seeds in shuffled batches of
    the train nodes; hop i (fanout[i], hop 1 = the seeds' own neighbours) keeps min(fanout, deg)
    distinct in-neighbours of each frontier node, uniformly; one bipartite block per layer whose
    first n_dst sources are its targets (so x[:n_dst] is the root input). Weights: SAGE the mean
    over the sampled neighbours; GCN the full graph's coefficient times deg/sampled (an unbiased
    estimate of the full product) plus the self-loop's coefficient."""

    def __init__(self, graph, model, fanout, gen):
        self.g, self.model, self.fanout, self.gen = graph, model, fanout, gen

    def hop(self, dst, k):
        g = self.g
        seg, eid = g.expand(dst)
        if seg.numel():
            # Uniform choice without replacement per segment: order each segment by a random key
            # and keep the first k (segments stay in order: seg + U with U in [0, 1)).
            key = seg.to(torch.float64) + torch.rand(seg.numel(), device=seg.device, generator=self.gen, dtype=torch.float64)
            order = torch.argsort(key)
            seg, eid = seg[order], eid[order]
            counts = g.deg[dst]
            start = torch.cumsum(counts, 0) - counts
            rank = torch.arange(seg.numel(), device=seg.device) - start[seg]
            keep = rank < k
            seg, eid = seg[keep], eid[keep]
        # New node list: the targets first, in order, then new sources in order of appearance.
        allv = torch.cat([dst, g.src[eid]])
        uniq, inv = torch.unique(allv, return_inverse=True)
        first = torch.full((uniq.numel(),), allv.numel(), dtype=torch.int64, device=allv.device)
        first.scatter_reduce_(0, inv, torch.arange(allv.numel(), device=allv.device), reduce="amin")
        order = torch.argsort(first)
        rank = torch.empty_like(order)
        rank[order] = torch.arange(order.numel(), device=order.device)
        local = rank[inv]
        return uniq[order], seg, local[dst.numel():], eid

    def sample(self, seeds):
        blocks, frontier = [], seeds
        for k in self.fanout:
            nodes, dst_l, src_l, eid = self.hop(frontier, k)
            blocks.append((frontier.numel(), nodes.numel(), dst_l, src_l, eid, frontier))
            frontier = nodes
        return frontier, blocks[::-1]  # input layer first

    def assemble(self, seeds, blocks):
        g = self.g
        adjs, edges = [], 0
        for n_dst, n_src, dst_l, src_l, eid, dst_global in blocks:
            sampled = torch.bincount(dst_l, minlength=n_dst).to(torch.float32)
            if self.model == "gcn":
                scale = g.deg[dst_global].to(torch.float32) / sampled.clamp(min=1)
                w = g.gcn_w[eid] * scale[dst_l]
                loops = torch.arange(n_dst, device=seeds.device)
                adj = csr(
                    torch.cat([dst_l, loops]),
                    torch.cat([src_l, loops]),
                    torch.cat([w, g.gcn_loop_w[dst_global]]),
                    n_dst,
                    n_src,
                )
            else:
                adj = csr(dst_l, src_l, 1.0 / sampled.clamp(min=1)[dst_l], n_dst, n_src)
            adjs.append((adj, n_dst))
            edges += int(eid.numel())
        return adjs, edges


# --------------------------------------------------------------------------- models


class Net(nn.Module):
    """dropout(x); L layers with relu + dropout between them; log_softmax (train.py's GCN and
    SAGE). The layers aggregate with the weights of a sparse CSR adj_t: GCNConv(normalize=False)
    and SAGEConv(aggr='sum') (the mean is in the weights), so one model runs on subgraphs,
    bipartite blocks and the full graph alike."""

    def __init__(self, model, f_in, hidden, classes, layers, dropout):
        super().__init__()
        dims = [f_in] + [hidden] * (layers - 1) + [classes]
        if model == "gcn":
            convs = (GCNConv(a, b, normalize=False) for a, b in zip(dims[:-1], dims[1:]))
        else:
            convs = (SAGEConv(a, b, aggr="sum") for a, b in zip(dims[:-1], dims[1:]))
        self.convs = nn.ModuleList(convs)
        self.model, self.dropout = model, dropout

    def forward(self, x, adjs):
        x = F.dropout(x, self.dropout, self.training)
        for i, (conv, (adj, n_dst)) in enumerate(zip(self.convs, adjs)):
            if self.model == "gcn":
                x = conv(x, adj)
            else:
                x = conv((x, x[:n_dst]), adj)
            if i + 1 < len(self.convs):
                x = F.relu(x)
                x = F.dropout(x, self.dropout, self.training)
        return F.log_softmax(x, dim=1)


# --------------------------------------------------------------------------- training


class Run:
    """One (graph, model, sampler) setting: device data, the sampler and the per-step phases."""

    def __init__(self, g, graph, cfg, device, seed):
        self.g, self.graph, self.cfg, self.device = g, graph, cfg, device
        self.gen = torch.Generator(device=device).manual_seed(seed)
        on_host = cfg["features_on"] == "host"
        x = torch.from_numpy(g["x"])
        self.x = x.pin_memory() if on_host and device.type == "cuda" else (x if on_host else x.to(device))
        self.y = torch.from_numpy(g["y"]).to(device)
        masks = [torch.from_numpy(m).to(device) for m in g["masks"]]
        self.train_mask, self.masks = masks[0], torch.stack(masks)
        self.train_idx = masks[0].nonzero().view(-1)
        self.count_t = self.masks.sum(1).clamp(min=1).to(torch.float32)
        self.full_adj = graph.full_adj(cfg["model"])
        self.x_full = x.to(device)
        s = cfg["sampler"]
        self.presample = None
        if s == "neighbor":
            self.sampler = Neighbor(graph, cfg["model"], cfg["fanout"], self.gen)
            self.steps = cfg["steps_per_epoch"] or max(1, math.ceil(self.train_idx.numel() / cfg["batch_size"]))
        else:
            self.sampler = Saint(graph, s, cfg["model"], cfg["batch_size"], cfg["walk_length"], self.gen)
            if cfg["steps_per_epoch"]:
                self.steps = cfg["steps_per_epoch"]
            else:  # an epoch draws about n nodes: n / mean nodes per subgraph (5 probe draws)
                probe = statistics.fmean(self.sampler.sample_nodes().numel() for _ in range(5))
                self.steps = max(1, math.ceil(graph.n / max(probe, 1.0)))
            if cfg["coverage"] > 0:
                self.presample, ms = base.wall(lambda: self.sampler.presample(cfg["coverage"], self.steps, self.train_idx.numel()), device)
                self.presample["ms"] = ms
        self.perm, self.pos = None, 0

    def draw(self):
        """Sampling phase: node set and edges (or blocks) on the device."""
        if self.cfg["sampler"] == "neighbor":
            if self.perm is None or self.pos >= self.perm.numel():
                self.perm = self.train_idx[torch.randperm(self.train_idx.numel(), device=self.device, generator=self.gen)]
                self.pos = 0
            seeds = self.perm[self.pos : self.pos + self.cfg["batch_size"]]
            self.pos += self.cfg["batch_size"]
            return ("neighbor", seeds) + self.sampler.sample(seeds)
        return ("saint",) + self.sampler.sample()

    def assemble(self, drawn):
        """Transfer phase: the batch's features (gathered on the device, or on the host and
        copied), labels and the CSR adjacencies with their weights."""
        if drawn[0] == "neighbor":
            _, seeds, nodes, blocks = drawn
            adjs, edges = self.sampler.assemble(seeds, blocks)
            out_pos = torch.arange(seeds.numel(), device=self.device)
            loss_w, out_nodes = None, seeds
        else:
            _, nodes, induced = drawn
            adj, out_pos, loss_w, edges = self.sampler.assemble(nodes, induced, self.train_mask)
            adjs = [(adj, nodes.numel())] * self.cfg["layers"]
            out_nodes = nodes[out_pos]
        if self.x.device.type == self.device.type:  # cuda:0 vs cuda compare unequal
            xb = self.x.index_select(0, nodes)
        else:
            xb = self.x.index_select(0, nodes.cpu()).pin_memory().to(self.device, non_blocking=True)
        return Batch(xb, adjs, out_pos, loss_w, edges), self.y[out_nodes]

    def step(self, model, opt, batch, yb):
        model.train()
        opt.zero_grad(set_to_none=True)
        out = model(batch.nodes, batch.adjs).index_select(0, batch.out_pos)
        if batch.loss_w is not None:  # GraphSAINT normalisation (PyG's example: a weighted sum)
            loss = (F.nll_loss(out, yb, reduction="none") * batch.loss_w).sum()
        else:
            loss = F.nll_loss(out, yb)
        loss.backward()
        opt.step()
        return loss

    @torch.no_grad()
    def evaluate(self, model):
        model.eval()
        adjs = [(self.full_adj, self.graph.n)] * self.cfg["layers"]
        pred = model(self.x_full, adjs).argmax(1)
        correct = (pred == self.y).unsqueeze(0) & self.masks
        return correct.sum(1).to(torch.float32) / self.count_t


def make_model(cfg, g, device):
    model = Net(cfg["model"], g["x"].shape[1], cfg["hidden"], g["classes"], cfg["layers"], cfg["dropout"]).to(device)
    return model, torch.optim.Adam(model.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"])


def accuracy_run(g, graph, cfg, device, seed):
    torch.manual_seed(seed)
    run = Run(g, graph, cfg, device, seed)
    model, opt = make_model(cfg, g, device)
    best, loss, t0 = None, None, time.perf_counter()
    for epoch in range(1, cfg["epochs"] + 1):
        for _ in range(run.steps):
            batch, yb = run.assemble(run.draw())
            if batch.out_pos.numel():
                loss = run.step(model, opt, batch, yb)
        tr, va, te = run.evaluate(model).tolist()
        if best is None or va > best["val_acc"]:
            best = {"epoch": epoch, "train_acc": tr, "val_acc": va, "test_acc": te}
    return {
        "seed": seed,
        "best_epoch": best["epoch"],
        "train_acc": best["train_acc"],
        "val_acc": best["val_acc"],
        "test_acc": best["test_acc"],
        "final_epoch": {"loss": None if loss is None else loss.item(), "train_acc": tr, "val_acc": va, "test_acc": te},
        "steps_per_epoch": run.steps,
        "wall_s": time.perf_counter() - t0,
    }


def timed(fn, device):
    """fn() alone, synchronised before and after: (result, ms) from CUDA events or perf_counter."""
    base.sync(device)
    if device.type == "cuda":
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        r = fn()
        b.record()
        b.synchronize()
        return r, a.elapsed_time(b)
    t0 = time.perf_counter()
    r = fn()
    return r, (time.perf_counter() - t0) * 1e3


def timing_run(g, graph, cfg, device, seed, warmup, epochs):
    """Per epoch: each step's sampling, transfer and training step timed alone (synchronised
    between phases, so the split adds up); then the same epochs run with no synchronisation of
    ours (epoch_ms: what a training loop sees; unique / repeat_interleave still sync)."""
    torch.manual_seed(seed)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    run, setup_ms = base.wall(lambda: Run(g, graph, cfg, device, seed), device)
    model, opt = make_model(cfg, g, device)

    def one_epoch():
        edges = 0
        for _ in range(run.steps):
            batch, yb = run.assemble(run.draw())
            edges += batch.edges
            if batch.out_pos.numel():
                run.step(model, opt, batch, yb)
        return edges

    for _ in range(warmup):
        one_epoch()
    phases = {"sample": [], "transfer": [], "step": []}
    split_epochs, edges_total, sample_total = [], 0, 0.0
    for _ in range(epochs):
        acc = {"sample": 0.0, "transfer": 0.0, "step": 0.0}
        for _ in range(run.steps):
            drawn, ms_s = timed(run.draw, device)
            (batch, yb), ms_t = timed(lambda: run.assemble(drawn), device)
            ms_p = timed(lambda: run.step(model, opt, batch, yb), device)[1] if batch.out_pos.numel() else 0.0
            acc["sample"] += ms_s
            acc["transfer"] += ms_t
            acc["step"] += ms_p
            edges_total += batch.edges
        for k in phases:
            phases[k].append(acc[k])
        split_epochs.append(sum(acc.values()))
        sample_total += acc["sample"]
    epoch_ms, edges_unsync = [], 0
    for _ in range(epochs):
        e, ms = timed(one_epoch, device)
        epoch_ms.append(ms)
        edges_unsync += e
    _, eval_ms = timed(lambda: run.evaluate(model), device)
    t = {
        "epoch_ms": base.summary(epoch_ms),
        "epoch_split_ms": {k: base.summary(v) for k, v in phases.items()},
        "epoch_split_total_ms": base.summary(split_epochs),
        "steps_per_epoch": run.steps,
        "sampled_edges_per_epoch": edges_total / epochs,
        "sampled_edges_per_s_sampling": edges_total / (sample_total / 1e3) if sample_total else None,
        "sampled_edges_per_s_epoch": edges_unsync / (sum(epoch_ms) / 1e3) if sum(epoch_ms) else None,
        "eval_full_graph_ms": eval_ms,
        "warmup_epochs": warmup,
        "timing_epochs": epochs,
        "one_time_ms": {"setup": setup_ms},
        "presample": run.presample,
        "timer": "torch.cuda.Event around each phase, synchronised between phases"
        if device.type == "cuda"
        else "time.perf_counter around each phase",
    }
    if device.type == "cuda":
        t["peak_memory_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    return t


# --------------------------------------------------------------------------- self-check


def self_check(device):
    """Checks on a small directed graph: the induced subgraph is the dense one; the neighbour
    sampler keeps min(fanout, deg) distinct true in-neighbours; a block of a fanout >= max degree
    reproduces the full layer exactly (GCN and SAGE); GraphSAINT's normalisation equals the
    definition computed by hand from the same pre-sampling counts. Raises on a mismatch."""
    rng = np.random.default_rng(3)
    n = 12
    dense = (rng.random((n, n)) < 0.3) & ~np.eye(n, dtype=bool)
    dense[0, :] = False
    rows, cols = np.nonzero(dense)
    g = {"n": n, "rows": rows.astype(np.int64), "cols": cols.astype(np.int64)}
    graph = Graph(g, device)
    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(n, 4, device=device)
    # Full-graph weights and the layers' use of them.
    a = dense.astype(np.float64) + np.eye(n)
    dinv = 1.0 / np.sqrt(a.sum(1))
    want = {"gcn": dinv[:, None] * a * dinv[None, :], "sage": dense / np.maximum(dense.sum(1, keepdims=True), 1)}
    for model in ("gcn", "sage"):
        adj = graph.full_adj(model)
        if not np.allclose(adj.to_dense().cpu().double().numpy(), want[model], atol=1e-6):
            raise AssertionError(f"full-graph {model} weights differ from their definition")
        net = Net(model, 4, 3, 3, 1, 0.0).to(device).eval()
        conv = net.convs[0]
        with torch.no_grad():
            got = net.convs[0](x, adj) if model == "gcn" else conv((x, x), adj)
            xn = x.cpu().double().numpy()
            if model == "gcn":
                ref = want[model] @ (xn @ conv.lin.weight.cpu().double().numpy().T) + conv.bias.cpu().double().numpy()
            else:
                wl, bl = conv.lin_l.weight.cpu().double().numpy(), conv.lin_l.bias.cpu().double().numpy()
                ref = (want[model] @ xn) @ wl.T + bl + xn @ conv.lin_r.weight.cpu().double().numpy().T
        if not np.allclose(got.cpu().double().numpy(), ref, atol=1e-5):
            raise AssertionError(f"{model} layer on the weighted adj_t differs from the dense reference")
    # Induced subgraph.
    for kind in ("saint-rw", "saint-node", "saint-edge"):
        s = Saint(graph, kind, "gcn", 6, 2, gen)
        nodes = s.sample_nodes()
        dst, src, eid = s.induced(nodes)
        got = set(zip(nodes[dst].tolist(), nodes[src].tolist()))
        ns = nodes.tolist()
        want = {(r, c) for r in ns for c in ns if dense[r, c]}
        if got != want:
            raise AssertionError(f"{kind}: induced subgraph {sorted(got)} != {sorted(want)}")
        if not torch.equal(graph.dst[eid], nodes[dst]) or not torch.equal(graph.src[eid], nodes[src]):
            raise AssertionError(f"{kind}: edge ids do not match the induced edges")
    # Neighbour sampling: distinct true neighbours, min(k, deg) of them.
    nb = Neighbor(graph, "sage", [2], gen)
    seeds = torch.arange(n, device=device)
    _, dst_l, src_l, eid = nb.hop(seeds, 2)
    for v in range(n):
        picked = graph.src[eid[dst_l == v]].tolist()
        if len(set(picked)) != len(picked) or len(picked) != min(2, int(dense[v].sum())):
            raise AssertionError(f"neighbor: node {v} got {picked} (degree {int(dense[v].sum())})")
        if any(not dense[v, u] for u in picked):
            raise AssertionError(f"neighbor: node {v} got a non-neighbour in {picked}")
    # A block with fanout >= max degree is the full layer.
    for model in ("gcn", "sage"):
        torch.manual_seed(0)
        net = Net(model, 4, 5, 3, 2, 0.0).to(device).eval()
        nb = Neighbor(graph, model, [n, n], gen)
        inputs, blocks = nb.sample(seeds[3:7])
        adjs, _ = nb.assemble(seeds[3:7], blocks)
        with torch.no_grad():
            got = net(x[inputs], adjs)
            want = net(x, [(graph.full_adj(model), n)] * 2)[3:7]
        err = float((got - want).abs().max())
        if err > 1e-5:
            raise AssertionError(f"neighbor ({model}): a full-fanout block differs from the full graph by {err}")
    # GraphSAINT normalisation against the definition.
    s = Saint(graph, "saint-node", "gcn", 5, 0, torch.Generator(device=device).manual_seed(1))
    info = s.presample(2, 3, n)
    s2 = Saint(graph, "saint-node", "gcn", 5, 0, torch.Generator(device=device).manual_seed(1))
    cv, ce, m, drawn = np.zeros(n), np.zeros(graph.e), 0, 0
    while drawn < 2 * n:
        for _ in range(3):
            nodes = s2.sample_nodes()
            _, _, eid = s2.induced(nodes)
            cv[nodes.cpu().numpy()] += 1
            ce[eid.cpu().numpy()] += 1
            drawn += nodes.numel()
        m += 3
    with np.errstate(divide="ignore", invalid="ignore"):
        en = np.clip(cv[graph.dst.cpu().numpy()] / ce, 0, 1e4)
    en[np.isnan(en)] = 0.1
    cv[cv == 0] = 0.1
    if info["subgraphs"] != m or not np.allclose(s.edge_norm.cpu().numpy(), en) or not np.allclose(
        s.node_norm.cpu().numpy(), m / cv / n
    ):
        raise AssertionError("GraphSAINT normalisation differs from its definition")
    print(f"self-check passed on {device}: induced subgraphs, neighbour sampling, full-fanout blocks, SAINT norms")


# --------------------------------------------------------------------------- main


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("graphs", nargs="*", help="dataset names (in $TCGNN_DATASETS) or .mtx/.mtx.gz paths")
    p.add_argument("--model", nargs="+", choices=list(MODEL_DEFAULTS), default=["gcn"])
    p.add_argument("--sampler", nargs="+", choices=SAMPLERS, default=["saint-rw"])
    p.add_argument("--batch-size", type=int, help="default: the sampler's (--print-defaults)")
    p.add_argument("--walk-length", type=int, default=SAMPLER_DEFAULTS["saint-rw"]["walk_length"])
    p.add_argument("--fanout", default="15,10", help="neighbor: per hop from the seeds, one per layer")
    p.add_argument("--steps-per-epoch", type=int, help="default: neighbor one pass over the train nodes; saint ~n nodes drawn")
    p.add_argument("--coverage", "--saint-coverage", type=float, default=50, help="GraphSAINT pre-sampling (0: no normalisation)")
    p.add_argument("--features-on", choices=["gpu", "host"], default="gpu", help="features resident on the device, or gathered on the host and copied per batch")
    p.add_argument("--layers", type=int)
    p.add_argument("--hidden", type=int)
    p.add_argument("--dropout", type=float)
    p.add_argument("--lr", type=float)
    p.add_argument("--weight-decay", type=float)
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--seeds", default="0,1,2,3,4")
    p.add_argument("--timing-epochs", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1, help="untimed epochs before the timed ones")
    p.add_argument("--timing-only", action="store_true")
    p.add_argument("--no-timing", action="store_true")
    p.add_argument("--features", type=int, default=96, help="random feature width when there is no npz")
    p.add_argument("--classes", type=int, default=8)
    p.add_argument("--synthetic", action="store_true")
    p.add_argument("--no-feature-norm", action="store_true")
    p.add_argument("--data-seed", type=int, default=0)
    p.add_argument("--split-seed", type=int, default=0)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int)
    p.add_argument("--tf32", action="store_true")
    p.add_argument("--self-check", action="store_true")
    p.add_argument("--print-defaults", action="store_true")
    p.add_argument("--out")
    a = p.parse_args(argv)
    if a.print_defaults or a.self_check:
        return a
    if not a.graphs:
        p.error("no graph given")
    a.seed_list = [int(s) for s in a.seeds.split(",") if s.strip()]
    try:
        a.fanout_list = [int(f) for f in a.fanout.split(",")]
    except ValueError:
        p.error(f"--fanout '{a.fanout}' is not comma separated integers")
    if not a.seed_list:
        p.error("--seeds is empty")
    if any(f < 1 for f in a.fanout_list):
        p.error("--fanout entries must be >= 1")
    for name in ("batch_size", "walk_length", "steps_per_epoch", "layers", "hidden", "epochs"):
        v = getattr(a, name)
        if v is not None and v < (0 if name == "walk_length" else 1):
            p.error(f"--{name.replace('_', '-')} must be positive")
    return a


def configs(args):
    for model in args.model:
        d = MODEL_DEFAULTS[model]
        layers = args.layers or d["layers"]
        for sampler in args.sampler:
            sd = SAMPLER_DEFAULTS[sampler]
            if sampler == "neighbor" and len(args.fanout_list) != layers:
                raise SystemExit(f"--fanout has {len(args.fanout_list)} entries, the model has {layers} layers")
            yield {
                "model": model,
                "layers": layers,
                "hidden": args.hidden or d["hidden"],
                "dropout": d["dropout"] if args.dropout is None else args.dropout,
                "lr": d["lr"] if args.lr is None else args.lr,
                "weight_decay": d["wd"] if args.weight_decay is None else args.weight_decay,
                "epochs": args.epochs,
                "sampler": sampler,
                "batch_size": args.batch_size or sd["batch_size"],
                "batch_size_counts": sd["unit"],
                "walk_length": args.walk_length if sampler == "saint-rw" else None,
                "fanout": args.fanout_list if sampler == "neighbor" else None,
                "coverage": args.coverage if sampler != "neighbor" else None,
                "normalisation": (args.coverage > 0) if sampler != "neighbor" else None,
                "steps_per_epoch": args.steps_per_epoch,
                "features_on": args.features_on,
                "evaluation": "full graph, one forward (exact)",
            }


def main(argv=None):
    args = parse_args(argv)
    if args.print_defaults:
        print(json.dumps({"models": MODEL_DEFAULTS, "samplers": SAMPLER_DEFAULTS}, indent=1))
        return None
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.self_check:
        self_check(device)
        return None
    if args.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
    env = {
        "device": base.device_name(device),
        "device_type": device.type,
        "torch": torch.__version__,
        "torch_geometric": torch_geometric.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
        "host": platform.node(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    result = {"tool": "bench/pyg/sample.py", "argv": sys.argv[1:] if argv is None else list(argv), "env": env, "records": []}

    def save():
        if args.out:
            tmp = args.out + ".tmp"
            with open(tmp, "w") as f:
                json.dump(result, f, indent=1)
                f.write("\n")
            os.replace(tmp, args.out)

    print(f"# {env['device']} | torch {env['torch']} | torch_geometric {env['torch_geometric']}", flush=True)
    for arg in args.graphs:
        g = base.load_graph(arg, args)
        graph = Graph(g, device)
        print(f"# {g['name']}: n={g['n']} edges={graph.e} (removed {graph.removed}) F={g['x'].shape[1]}", flush=True)
        for cfg in configs(args):
            if cfg["batch_size"] is None:  # saint-rw's default roots, resolved on the graph as the Rust side
                cfg["batch_size"] = max(1000, g["n"] // 20)
            rec = {
                "graph": g["name"],
                "n": g["n"],
                "nnz": g["nnz"],
                "edges_used": graph.e,
                "edges_removed": graph.removed,
                "features": int(g["x"].shape[1]),
                "classes": g["classes"],
                "split": g["split"],
                "synthetic_labels": g["synthetic_labels"],
                "config": cfg,
                **env,
            }
            tag = f"{g['name']} {cfg['model']} {cfg['sampler']} b={cfg['batch_size']}"
            if not args.no_timing:
                t = timing_run(g, graph, cfg, device, args.seed_list[0], args.warmup, args.timing_epochs)
                rec.update(t)
                sp = t["epoch_split_ms"]
                print(
                    f"  {tag}: epoch {t['epoch_ms']['median']:.2f} ms ({t['steps_per_epoch']} steps; split "
                    f"sample {sp['sample']['median']:.2f} / transfer {sp['transfer']['median']:.2f} / "
                    f"step {sp['step']['median']:.2f} ms), {t['sampled_edges_per_epoch']:.0f} edges/epoch",
                    flush=True,
                )
            if not args.timing_only:
                runs = []
                for seed in args.seed_list:
                    r = accuracy_run(g, graph, cfg, device, seed)
                    runs.append(r)
                    print(
                        f"  {tag} seed {seed}: test {100 * r['test_acc']:.1f}% at epoch {r['best_epoch']} "
                        f"(val {100 * r['val_acc']:.1f}%), {r['wall_s']:.1f} s",
                        flush=True,
                    )
                m, s, ps = base.mean_std([r["test_acc"] for r in runs])
                rec["per_seed"] = runs
                rec["test_acc_mean"], rec["test_acc_std"], rec["test_acc_pstd"] = m, s, ps
                rec["accuracy_note"] = (
                    "meaningless: random labels"
                    if g["synthetic_labels"]
                    else "test accuracy (full-graph evaluation) at the epoch of best validation accuracy; std = sample std"
                )
            result["records"].append(rec)
            save()
    return result


if __name__ == "__main__":
    main()
