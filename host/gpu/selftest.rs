//! Host side of the one-tile MMA self-tests in `kernels-gpu/src/selftest.rs`.

use std::sync::Arc;

use crate::error::Result;
use crate::gpu::abi::selftest::{self as kernels, MmaSelftestArgs};
use crate::gpu::launch::{Kernel, Shape};
use crate::gpu::{DeviceVec, Gpu};

/// The instruction shapes the kernels use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmaShape {
    F16M16N8K8,
    F16M16N8K16,
    Tf32M16N8K4,
    Tf32M16N8K8,
}

impl MmaShape {
    pub const ALL: [MmaShape; 4] = [MmaShape::F16M16N8K8, MmaShape::F16M16N8K16, MmaShape::Tf32M16N8K4, MmaShape::Tf32M16N8K8];
    pub fn k(self) -> usize {
        match self {
            MmaShape::F16M16N8K8 | MmaShape::Tf32M16N8K8 => 8,
            MmaShape::F16M16N8K16 => 16,
            MmaShape::Tf32M16N8K4 => 4,
        }
    }
    fn kernel(self) -> Kernel<MmaSelftestArgs> {
        match self {
            MmaShape::F16M16N8K8 => kernels::mma_selftest_f16_m16n8k8,
            MmaShape::F16M16N8K16 => kernels::mma_selftest_f16_m16n8k16,
            MmaShape::Tf32M16N8K4 => kernels::mma_selftest_tf32_m16n8k4,
            MmaShape::Tf32M16N8K8 => kernels::mma_selftest_tf32_m16n8k8,
        }
    }
}

/// D (16 x 8, row-major) = A (16 x K, row-major) * B (K x 8, row-major) with one instruction.
pub fn mma_tile(gpu: &Arc<Gpu>, shape: MmaShape, a: &[f32], b: &[f32]) -> Result<Vec<f32>> {
    let k = shape.k();
    assert_eq!(a.len(), 16 * k);
    assert_eq!(b.len(), k * 8);
    let da = DeviceVec::upload(gpu, a)?;
    let db = DeviceVec::upload(gpu, b)?;
    let mut dd = DeviceVec::upload(gpu, &[f32::NAN; 128])?;
    let args = MmaSelftestArgs { a: da.arg(gpu), b: db.arg(gpu), d: dd.arg_mut(gpu) };
    // SAFETY: a, b and d hold 16*K, K*8 and 128 floats, as the shape's kernel reads and writes
    // with one warp.
    unsafe { shape.kernel().launch(gpu, Shape::linear(1, 32, 0), &args)? };
    dd.download(gpu)
}
