//! tcgnn device kernels: `#![no_std]` Rust compiled to PTX for `nvptx64-nvidia-cuda` by the
//! host crate's build.rs. Inline PTX lives only in `ptx`; kernels read as algorithms.
#![no_std]
#![feature(abi_ptx, asm_experimental_arch, stdarch_nvptx)]
#![allow(clippy::missing_safety_doc)]

// Dynamic shared memory: one extern array, carved by `smem::SmemCarver`.
core::arch::global_asm!(".extern .shared .align 16 .b8 dyn_smem[];");

pub mod config {
    include!("config.rs");
}
pub mod layout {
    include!("layout.rs");
}
pub mod partition {
    include!("partition.rs");
}
pub mod ptx;
pub mod sddmm;
pub mod selftest;
pub mod smem;
pub mod spmm;

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    unsafe { core::arch::nvptx::trap() }
}
