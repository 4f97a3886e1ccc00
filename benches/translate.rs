//! Translation throughput (nonzeros per second) of CSR -> SGT / ME-BCRS / COO on a 2^20-node
//! R-MAT graph with edge factor 16 (16.1 M nonzeros after merging duplicates).
//! `TCGNN_BENCH_SCALE` picks another scale.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tcgnn::format::{Coo, MeBcrs, Sgt};
use tcgnn::graph::rmat::{RmatParams, rmat};

fn bench_translate(c: &mut Criterion) {
    let scale = std::env::var("TCGNN_BENCH_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
    let g = rmat(RmatParams::new(scale, 16, 1));
    let mut group = c.benchmark_group(format!("translate rmat{scale} ({} nnz)", g.nnz()));
    group.sample_size(10);
    group.throughput(Throughput::Elements(g.nnz() as u64));
    group.bench_function("sgt w8", |b| b.iter(|| Sgt::from_csr(&g, 8).unwrap()));
    group.bench_function("sgt w16", |b| b.iter(|| Sgt::from_csr(&g, 16).unwrap()));
    group.bench_function("mebcrs k8", |b| b.iter(|| MeBcrs::from_csr(&g, 8).unwrap()));
    group.bench_function("mebcrs k16", |b| b.iter(|| MeBcrs::from_csr(&g, 16).unwrap()));
    group.bench_function("coo", |b| b.iter(|| Coo::from_csr(&g)));
    group.finish();
}

criterion_group!(benches, bench_translate);
criterion_main!(benches);
