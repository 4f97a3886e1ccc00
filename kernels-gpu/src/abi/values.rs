// Edge-value and feature plumbing (`values.rs`): argument structs and instances. Shared with the
// host (`include!`). Grid-stride kernels: any grid covers any `n`.
use super::*;

kernel_args! {
    /// dst[i] = map[i] == u32::MAX ? 0 : src[map[i]] for i < n.
    pub struct GatherValuesArgs {
        pub n: u32,
        pub map: Ptr<u32>,
        pub src: Ptr<f32>,
        pub dst: PtrMut<f32>,
    }

    /// dst[i] = f16(src[i]) for i < n (both buffers 16-byte aligned).
    pub struct CastF16Args {
        pub n: u32,
        pub src: Ptr<f32>,
        /// f16 bits.
        pub dst: PtrMut<u16>,
    }

    /// dst[slot_of[i]] = src[i] for i < n, f32 slots.
    pub struct ScatterValuesArgs {
        pub n: u32,
        pub slot_of: Ptr<u32>,
        pub src: Ptr<f32>,
        pub dst: PtrMut<f32>,
    }

    /// dst[slot_of[i]] = f16(src[i]) for i < n, f16 slots.
    pub struct ScatterValuesF16Args {
        pub n: u32,
        pub slot_of: Ptr<u32>,
        pub src: Ptr<f32>,
        /// f16 bits.
        pub dst: PtrMut<u16>,
    }
}

kernels! {
    gather_values_f32(GatherValuesArgs) = crate::values::gather;
    cast_f32_f16(CastF16Args) = crate::values::cast_f16;
    scatter_values_f32(ScatterValuesArgs) = crate::values::scatter_f32;
    scatter_values_f16(ScatterValuesF16Args) = crate::values::scatter_f16;
}
