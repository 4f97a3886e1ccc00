//! The kernels' typed handles and argument structs: `kernels-gpu/src/abi/*.rs` `include!`d with
//! host macros (the device crate expands the same files into its entry points; see
//! `kernels-gpu/src/abi/mod.rs`). `abi::spmm::spmm_tc8_f16_nt4` is a `Kernel<Tc8SpmmArgs>`.

pub use crate::gpu::launch::{Kernel, Ptr, PtrMut};

macro_rules! kernel_args {
    ($($(#[$meta:meta])* pub struct $name:ident { $($(#[$fmeta:meta])* pub $field:ident : $ty:ty),* $(,)? })*) => {
        $(
            $(#[$meta])*
            #[repr(C)]
            #[derive(Clone, Copy, Debug)]
            pub struct $name { $($(#[$fmeta])* pub $field: $ty),* }
            // SAFETY: repr(C) of u32 / f32 / 64-bit addresses, the layout the device struct has.
            unsafe impl cudarc::driver::DeviceRepr for $name {}
        )*
    };
}

macro_rules! kernels {
    ($($(#[$meta:meta])* $name:ident($args:ty) = $body:expr;)*) => {
        $(
            $(#[$meta])*
            #[allow(non_upper_case_globals)]
            pub const $name: Kernel<$args> = Kernel::new(stringify!($name));
        )*
    };
}

pub mod perm {
    include!("../../kernels-gpu/src/abi/perm.rs");
}

pub mod spmm {
    include!("../../kernels-gpu/src/abi/spmm.rs");
}
