//! Each MMA shape against a CPU product: pins the fragment layouts every kernel relies on.

use crate::common;

use tcgnn::gpu::selftest::{MmaShape, mma_tile};
use tcgnn::util::rng::SplitMix64;

#[test]
fn mma_shapes_match_cpu_product() {
    let Some(gpu) = common::gpu_or_skip("mma_shapes_match_cpu_product") else { return };
    let mut rng = SplitMix64::new(42);
    for shape in MmaShape::ALL {
        let k = shape.k();
        let a = rng.vec_f32(16 * k);
        let b = rng.vec_f32(k * 8);
        let d = mma_tile(&gpu, shape, &a, &b).unwrap();
        let round = |v: f32| match shape {
            MmaShape::F16M16N8K8 | MmaShape::F16M16N8K16 => half::f16::from_f32(v).to_f32() as f64,
            _ => v as f64,
        };
        let mut num = 0f64;
        let mut den = 0f64;
        for i in 0..16 {
            for j in 0..8 {
                let r: f64 = (0..k).map(|p| round(a[i * k + p]) * round(b[p * 8 + j])).sum();
                num += (d[i * 8 + j] as f64 - r).powi(2);
                den += r * r;
            }
        }
        let err = (num / den).sqrt();
        let tol = match shape {
            MmaShape::F16M16N8K8 | MmaShape::F16M16N8K16 => 1e-3,
            _ => 5e-3,
        };
        println!("{shape:?}: relative error {err:.2e}");
        assert!(err < tol, "{shape:?}: relative error {err} (fragment layout wrong?)");
    }
}
