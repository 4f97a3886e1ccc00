//! Graphs and node data for the sampler tests (`sample_device`, `sample_device_neighbor`).

use tcgnn::graph::Csr;
use tcgnn::nn::data::{Dataset, SyntheticNodeData};
use tcgnn::nn::input::HostFeatures;
use tcgnn::ops::backend::TRAIN_BIT;
use tcgnn::sample::batch::NodeData;
use tcgnn::util::rng::SplitMix64;

/// `pairs` random edges among the first nine tenths of `n` nodes (both ways when `symmetric`),
/// every `loops_every`-th node with a self-loop, node 1 joined to every `hub_every`-th node
/// (only outwards when directed: one huge row).
pub fn graph(n: usize, pairs: usize, loops_every: usize, hub_every: usize, symmetric: bool, seed: u64) -> Csr {
    let mut rng = SplitMix64::new(seed);
    let linked = (n - n / 10).max(1) as u64;
    let mut t = Vec::new();
    for _ in 0..pairs {
        let (a, b) = (rng.below(linked) as u32, rng.below(linked) as u32);
        t.push((a, b, 1.0));
        if symmetric {
            t.push((b, a, 1.0));
        }
    }
    for v in (0..linked as u32).step_by(loops_every) {
        t.push((v, v, 1.0));
    }
    if n > 1 {
        for v in (0..linked as u32).step_by(hub_every) {
            t.push((1, v, 1.0));
            if symmetric {
                t.push((v, 1, 1.0));
            }
        }
    }
    tcgnn::graph::ops::pattern(&Csr::from_triplets(n, n, &t).unwrap())
}

pub fn dataset(name: &str, g: Csr) -> Dataset {
    Dataset::synthetic(name.into(), g, &SyntheticNodeData { features: 12, classes: 3, seed: 5 }).unwrap()
}

pub fn node_data(d: &Dataset) -> NodeData {
    let n_train = d.mask_bits.iter().filter(|&&m| m & TRAIN_BIT != 0).count();
    NodeData { features: d.features.clone(), labels: d.labels.clone(), mask_bits: d.mask_bits.clone(), n_train }
}

/// `d` with its features stored sparse: a random third of the entries kept, some rows empty.
pub fn sparse_features(mut d: Dataset) -> Dataset {
    let HostFeatures::Dense(m) = &d.features else { panic!("dense synthetic features") };
    let mut rng = SplitMix64::new(17);
    let mut t = Vec::new();
    for r in 0..m.rows {
        for c in 0..m.cols {
            if r % 5 != 3 && rng.below(3) == 0 {
                t.push((r as u32, c as u32, m.data[r * m.cols + c]));
            }
        }
    }
    d.features = HostFeatures::Sparse(Csr::from_triplets(m.rows, m.cols, &t).unwrap());
    d
}
