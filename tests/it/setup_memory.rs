//! Training setup that holds the features once (issue 15, item 2): `Trainer::new_taking_features`
//! moves them out of the dataset into the backend and trains exactly as `Trainer::new` does.

use std::sync::Arc;

use tcgnn::nn::input::HostFeatures;
use tcgnn::nn::models::default_config;
use tcgnn::nn::{CpuBackend, ModelConfig};
use tcgnn::task::node::data::{Dataset, SyntheticNodeData};
use tcgnn::task::node::{TrainConfig, Trainer};
use tcgnn::util::Real;

fn data() -> Dataset {
    Dataset::load("sbm:2000:4:8", None, &SyntheticNodeData { features: 20, classes: 4, seed: 3 }).unwrap()
}

fn curves<T: Real>() {
    let cfg = ModelConfig { seed: 3, ..default_config("gcn").unwrap() };
    let tcfg = TrainConfig { epochs: 5, ..TrainConfig::default() };
    let d = data();
    let mut borrowed = Trainer::new(Arc::new(CpuBackend::<T>::new()), &d, &cfg, &tcfg).unwrap();
    let want = borrowed.fit(5, |_| {}).unwrap();
    let mut d = data();
    let mut taking = Trainer::new_taking_features(Arc::new(CpuBackend::<T>::new()), &mut d, &cfg, &tcfg).unwrap();
    match &d.features {
        HostFeatures::Dense(m) => assert_eq!((m.rows, m.cols, m.data.len()), (0, 20, 0), "features left in the dataset"),
        HostFeatures::Sparse(_) => panic!("sbm features are dense"),
    }
    let got = taking.fit(5, |_| {}).unwrap();
    let losses = |h: &tcgnn::task::node::History| h.epochs.iter().map(|e| e.loss).collect::<Vec<_>>();
    assert_eq!(losses(&got), losses(&want), "loss curves of new_taking_features and new");
}

#[test]
fn taking_the_features_trains_the_same_f32_and_f64() {
    curves::<f32>();
    curves::<f64>();
}
