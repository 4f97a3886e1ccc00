// Bandwidth probes (`probe.rs`): argument struct and instances. Shared with the host
// (`include!`).
use super::*;

kernel_args! {
    /// Read `passes` times over `n4` float4s of `x`; one f32 per thread of the grid to `out`.
    pub struct L2ReadArgs {
        pub n4: u32,
        pub passes: u32,
        pub x: Ptr<f32>,
        pub out: PtrMut<f32>,
    }
}

kernels! {
    probe_l2_read(L2ReadArgs) = crate::probe::l2_read;
}
