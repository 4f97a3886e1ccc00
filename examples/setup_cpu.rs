//! The CPU side of `tcgnn bench setup` piece by piece, old way against new, on a graph file
//! (`cargo run --release --example setup_cpu -- G.tcg [FEATURES]`): what the model build and the
//! translation spend on the host before any GPU work, and whether the parallel versions give
//! the same arrays. Runs without a GPU.

use std::time::Instant;

use tcgnn::format::MeBcrs;
use tcgnn::graph::{gcn_norm, ops, source, transpose};
use tcgnn::util::rng::SplitMix64;

fn time<R>(what: &str, f: impl FnOnce() -> R) -> R {
    let t = Instant::now();
    let r = f();
    println!("  {what:<44} {:8.3} s", t.elapsed().as_secs_f64());
    r
}

fn main() -> tcgnn::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect("usage: setup_cpu GRAPH [FEATURES]");
    let features: usize = args.get(2).map_or(64, |f| f.parse().expect("FEATURES is a count"));
    println!("{} rayon threads", rayon::current_num_threads());
    let a = time("read graph", || source::load(path))?;
    println!("  {} nodes, {} nonzeros", a.n_rows(), a.nnz());
    let n = a.n_rows();

    let serial = time("features, one draw at a time (old)", || {
        let mut g = SplitMix64::new(7);
        (0..n * features).map(|_| g.uniform(-1.0, 1.0)).collect::<Vec<f32>>()
    });
    let parallel = time("features, chunks on all cores (new)", || SplitMix64::new(7).vec_f32(n * features));
    assert!(serial == parallel, "parallel features differ");
    drop((serial, parallel));

    let old = time("GCN normalisation, merge + serial scale (old)", || ops::gcn_normalize_serial(&a))?;
    let s = time("GCN normalisation, one parallel pass (new)", || gcn_norm::gcn_normalize(&a))?;
    assert!(old == s, "normalisations differ");
    drop(old);

    let old = time("transpose with map, serial (old)", || transpose::transpose_with_map_serial(&s));
    let new = time("transpose with map, buckets (new)", || transpose::transpose_with_map(&s));
    assert!(old == new, "transposes differ");
    drop((old, new));

    // What the GPU path replaces (the CPU translation; the GPU one was downloaded before).
    time("ME-BCRS k = 8 of Â on the CPU (reference)", || MeBcrs::from_csr(&s, 8))?;
    if let Some(kb) = tcgnn::util::memory::peak_rss_bytes() {
        println!("  peak host memory {:.2} GB", kb as f64 / 1e9);
    }
    Ok(())
}
