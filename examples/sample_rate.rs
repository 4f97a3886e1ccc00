//! Sampling rates of the CPU samplers (`tcgnn::sample`): batches and sampled edges per second
//! on one thread and through `Prefetch` workers, GraphSAINT pre-sampling time, and how long a
//! consumer with a simulated step waits on the prefetching workers.
//!
//! `cargo run --release --example sample_rate -- [--batches 40] [--workers 2] GRAPH...`
//! GRAPH: a dataset name / `.mtx` path / `rmat:` spec, or `sbm:N` (generated, 10 per row).
//! Batch sizes scale with the graph: GraphSAINT node draws N/10, edge draws N/20, random walks
//! N/30 roots x 2 steps; neighbour sampling fan-outs [15, 10] around 1024 targets.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tcgnn::error::{Error, Result};
use tcgnn::graph::generate::{SbmParams, sbm};
use tcgnn::graph::{Csr, source};
use tcgnn::sample::{NeighborConfig, NeighborSampler, Prefetch, PrefetchConfig, SaintConfig, SaintKind, SaintSampler};

fn load(spec: &str) -> Result<Csr> {
    match spec.strip_prefix("sbm:") {
        Some(n) => {
            let n = n.parse().map_err(|_| Error::Unsupported(format!("'{spec}': use sbm:N")))?;
            Ok(sbm(SbmParams::new(n, 10, 1))?.0)
        }
        None => source::load(spec),
    }
}

/// (batches per second, sampled edges per second, mean nodes, mean edges) of `n` batches.
fn rate(n: usize, make: impl Fn(usize) -> (usize, usize)) -> (f64, f64, f64, f64) {
    let t0 = Instant::now();
    let (mut nodes, mut edges) = (0usize, 0usize);
    for i in 0..n {
        let (v, e) = make(i);
        nodes += v;
        edges += e;
    }
    let s = t0.elapsed().as_secs_f64();
    (n as f64 / s, edges as f64 / s, nodes as f64 / n as f64, edges as f64 / n as f64)
}

/// Prefetch throughput with `workers`, and the consumer's wait with a step of `step` per batch.
fn prefetched<F>(n: usize, workers: usize, step: Duration, make: F) -> Result<(f64, f64)>
where
    F: Fn(usize) -> usize + Send + Sync + Clone + 'static,
{
    let t0 = Instant::now();
    let edges: usize = Prefetch::new(n, PrefetchConfig { workers, ahead: 2 }, make.clone())?.sum();
    let throughput = edges as f64 / t0.elapsed().as_secs_f64();
    let mut p = Prefetch::new(n, PrefetchConfig { workers, ahead: 2 }, make)?;
    // The first batch is always waited for (nothing was made before the epoch started); what
    // matters is the wait after it, in steady state.
    p.next();
    let (first, t1) = (p.waited(), Instant::now());
    std::thread::sleep(step);
    for _ in p.by_ref() {
        std::thread::sleep(step);
    }
    let waited = (p.waited() - first).as_secs_f64() / t1.elapsed().as_secs_f64();
    Ok((throughput, waited))
}

fn main() -> Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let (mut batches, mut workers) = (40usize, 2usize);
    while let Some(i) = args.iter().position(|a| a.starts_with("--")) {
        let flag = args.remove(i);
        let v: usize = args.get(i).and_then(|v| v.parse().ok()).ok_or_else(|| Error::Unsupported(format!("{flag} needs a number")))?;
        args.remove(i);
        match flag.as_str() {
            "--batches" => batches = v,
            "--workers" => workers = v,
            _ => return Err(Error::Unsupported(format!("unknown option {flag}"))),
        }
    }
    if args.is_empty() {
        args = vec!["tolokers".into(), "sbm:1000000".into()];
    }
    println!(
        "| graph | sampler | nodes / batch | edges / batch | batches/s (1 thread) | M edges/s (1 thread) | M edges/s ({workers} workers) | consumer waiting after the first batch (step = 1.5x batch time) |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for spec in &args {
        let g = Arc::new(load(spec)?);
        let n = g.n_rows();
        let kinds = [
            ("saint-node", SaintKind::Node { budget: n / 10 }),
            ("saint-edge", SaintKind::Edge { budget: n / 20 }),
            ("saint-rw", SaintKind::RandomWalk { roots: n / 30, walk_length: 2 }),
        ];
        for (name, kind) in kinds {
            let t0 = Instant::now();
            let s = Arc::new(SaintSampler::new(Arc::clone(&g), SaintConfig { kind, steps_per_epoch: 20, coverage: 0, seed: 1 })?);
            let setup = t0.elapsed();
            let (bps, eps, nodes, edges) = rate(batches, |i| {
                let b = s.batch(0, i as u32);
                (b.nodes.len(), b.n_edges())
            });
            let step = Duration::from_secs_f64(1.5 / bps);
            let s2 = Arc::clone(&s);
            let (par, waited) = prefetched(batches, workers, step, move |i| s2.batch(0, i as u32).n_edges())?;
            println!(
                "| {spec} | {name} | {nodes:.0} | {edges:.0} | {bps:.1} | {:.1} | {:.1} | {:.1}% |",
                eps / 1e6,
                par / 1e6,
                100.0 * waited
            );
            if setup.as_secs_f64() > 0.01 {
                println!("|  | (setup: alias table {:.2} s) | | | | | | |", setup.as_secs_f64());
            }
        }
        // Pre-sampling for the normalisation (PyG's sample_coverage), random walks, coverage 50.
        let t0 = Instant::now();
        let kind = SaintKind::RandomWalk { roots: n / 30, walk_length: 2 };
        let s = SaintSampler::new(Arc::clone(&g), SaintConfig { kind, steps_per_epoch: 20, coverage: 50, seed: 1 })?;
        println!(
            "|  | saint-rw pre-sampling, coverage 50: {} subgraphs in {:.2} s | | | | | | |",
            s.norm().map_or(0, |m| m.num_samples),
            t0.elapsed().as_secs_f64()
        );
        let targets: Vec<u32> = (0..n as u32).collect();
        let cfg = NeighborConfig { fanouts: vec![15, 10], batch_size: 1024, shuffle: true, seed: 1 };
        let s = Arc::new(NeighborSampler::new(Arc::clone(&g), targets, cfg)?);
        let nb = batches.min(s.batches_per_epoch());
        let (bps, eps, nodes, edges) = rate(nb, |i| {
            let b = s.batch(0, i as u32);
            (b.input_nodes.len(), b.n_edges())
        });
        let step = Duration::from_secs_f64(1.5 / bps);
        let s2 = Arc::clone(&s);
        let (par, waited) = prefetched(nb, workers, step, move |i| s2.batch(0, i as u32).n_edges())?;
        println!(
            "| {spec} | neighbor [15, 10] x 1024 | {nodes:.0} | {edges:.0} | {bps:.1} | {:.1} | {:.1} | {:.1}% |",
            eps / 1e6,
            par / 1e6,
            100.0 * waited
        );
    }
    Ok(())
}
