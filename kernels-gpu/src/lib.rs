//! tcgnn device kernels: `#![no_std]` Rust compiled to PTX for `nvptx64-nvidia-cuda` by the
//! host crate's build.rs. Inline PTX lives only in `ptx`; kernels read as algorithms.
#![no_std]
#![feature(abi_ptx, asm_experimental_arch, stdarch_nvptx)]
#![allow(clippy::missing_safety_doc)]

// Dynamic shared memory: one extern array, carved by `smem::SmemCarver`.
core::arch::global_asm!(".extern .shared .align 16 .b8 dyn_smem[];");

/// Repeat a block for `$i` = 0, 1, 2, 3 as literal constants: loops over register arrays must be
/// unrolled, or the arrays move to local memory.
#[macro_export]
macro_rules! unroll4 {
    ($i:ident => $body:block) => {{
        {
            let $i: usize = 0;
            $body
        }
        {
            let $i: usize = 1;
            $body
        }
        {
            let $i: usize = 2;
            $body
        }
        {
            let $i: usize = 3;
            $body
        }
    }};
}

/// The body twice, `$i` = 0 and 1 (see `unroll4!`).
#[macro_export]
macro_rules! unroll2 {
    ($i:ident => $body:block) => {{
        {
            let $i: usize = 0;
            $body
        }
        {
            let $i: usize = 1;
            $body
        }
    }};
}

pub mod abi;
pub mod config {
    include!("config.rs");
}
pub mod layout {
    include!("layout.rs");
}
pub mod partition {
    include!("partition.rs");
}
pub mod format;
pub mod index {
    include!("index.rs");
}
pub mod mma;
pub mod nn;
pub mod perm;
pub mod probe;
pub mod ptx;
pub mod rng {
    include!("rng.rs");
}
pub mod sample;
pub mod sddmm;
pub mod selftest;
pub mod smem;
pub mod spmm;
pub mod translate {
    include!("translate.rs");
}
pub mod values;
pub mod warp_sort;

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    unsafe { core::arch::nvptx::trap() }
}
