//! Carving typed regions out of the block's dynamic shared memory (`dyn_smem`).

use crate::ptx;

/// Bump allocator over the dynamic shared memory window; addresses are 32-bit shared-window
/// addresses for `ld.shared`/`st.shared`. The host sizes the launch with the same arithmetic.
pub struct SmemCarver {
    next: u32,
}

impl SmemCarver {
    #[inline(always)]
    pub fn new() -> Self {
        SmemCarver { next: ptx::dyn_smem_base() }
    }

    /// `bytes` bytes aligned to 16; returns the region's base address.
    #[inline(always)]
    pub fn take(&mut self, bytes: u32) -> u32 {
        let base = (self.next + 15) & !15;
        self.next = base + bytes;
        base
    }
}

impl Default for SmemCarver {
    fn default() -> Self {
        Self::new()
    }
}
