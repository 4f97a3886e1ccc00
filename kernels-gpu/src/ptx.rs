use core::arch::asm;
#[inline(always)]
pub fn tid_x() -> u32 { let r: u32; unsafe { asm!("mov.u32 {}, %tid.x;", out(reg32) r) }; r }
