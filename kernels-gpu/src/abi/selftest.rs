// One-tile MMA self-tests (`selftest.rs`): argument struct and instances. Shared with the host
// (`include!`).
use super::*;

kernel_args! {
    /// D (16 x 8) = A (16 x K) * B (K x 8), all row-major f32, by one warp.
    pub struct MmaSelftestArgs {
        pub a: Ptr<f32>,
        pub b: Ptr<f32>,
        pub d: PtrMut<f32>,
    }
}

kernels! {
    mma_selftest_f16_m16n8k8(MmaSelftestArgs) = crate::selftest::f16_m16n8k8;
    mma_selftest_f16_m16n8k16(MmaSelftestArgs) = crate::selftest::f16_m16n8k16;
    mma_selftest_tf32_m16n8k4(MmaSelftestArgs) = crate::selftest::tf32_m16n8k4;
    mma_selftest_tf32_m16n8k8(MmaSelftestArgs) = crate::selftest::tf32_m16n8k8;
}
