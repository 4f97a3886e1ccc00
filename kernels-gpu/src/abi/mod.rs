//! The kernel ABI, declared once for both crates. Every kernel takes one `#[repr(C)]` argument
//! struct passed by value (PTX `.param .align 8 .b8 name[size]`), declared with `kernel_args!`,
//! and is listed with `kernels!` next to the generic function it instantiates. Here (device) a
//! listing becomes the `extern "ptx-kernel"` entry point; the host crate (`src/gpu/abi.rs`)
//! `include!`s the same declaration files with its own macros and gets a typed `Kernel<Args>`
//! handle of the same name, so a launch can neither name a missing symbol nor pass arguments
//! that disagree with the kernel.
//!
//! One declaration file per kernel family, each with one `kernels!` (the host also gathers a
//! file's listings for its test against the PTX); a new file is declared here and in
//! `src/gpu/abi.rs`.

/// A device address the kernel reads (host side: a 64-bit address of the same layout).
pub type Ptr<T> = *const T;
/// A device address the kernel writes.
pub type PtrMut<T> = *mut T;

macro_rules! kernel_args {
    ($($(#[$meta:meta])* pub struct $name:ident { $($(#[$fmeta:meta])* pub $field:ident : $ty:ty),* $(,)? })*) => {
        $(
            $(#[$meta])*
            #[repr(C)]
            #[derive(Clone, Copy)]
            pub struct $name { $($(#[$fmeta])* pub $field: $ty),* }
        )*
    };
}

macro_rules! kernels {
    ($($(#[$meta:meta])* $name:ident($args:ty) = $body:expr;)*) => {
        $(
            $(#[$meta])*
            #[unsafe(no_mangle)]
            pub unsafe extern "ptx-kernel" fn $name(args: $args) {
                unsafe { ($body)(args) }
            }
        )*
    };
}

// Declaration files are `include!`d (as the host does), with the device-only names their
// instance listings use imported here.
pub mod spmm {
    #[allow(unused_imports)]
    use crate::spmm::tc8::{Bulk, CpAsync, E4m3, F16, F16Out, F32Out, Registers, Tf32};
    include!("spmm.rs");
}
pub mod attention {
    #[allow(unused_imports)]
    use crate::nn::fused_attention::{G16, G32};
    include!("attention.rs");
}
pub mod dropout_gemm;
pub mod format;
pub mod gat_attention;
pub mod hybrid;
pub mod nn;
pub mod perm;
pub mod probe;
pub mod row_split;
pub mod sample;
pub mod sddmm;
pub mod selftest;
pub mod values;
