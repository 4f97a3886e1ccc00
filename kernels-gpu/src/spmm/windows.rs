//! Clearing the output rows of windows whose work items add into Y atomically (TC8: 8-row
//! windows, TC16: 16-row ones). One block per listed window, threads over the rows' 32-bit words
//! (f32, or pairs of f16).

use crate::abi::spmm::ZeroWindowsArgs;
use crate::ptx;

#[inline(always)]
pub unsafe fn zero_windows<const ROWS: u32>(args: ZeroWindowsArgs) {
    let ZeroWindowsArgs { windows, n_rows, row_words, y } = args;
    let w = unsafe { ptx::ld_nc_u32(windows.add(ptx::ctaid_x() as usize)) };
    let row0 = ROWS * w;
    let rows = if n_rows - row0 < ROWS { n_rows - row0 } else { ROWS };
    let mut i = ptx::tid_x();
    while i < rows * row_words {
        unsafe { ptx::st_u32(y.add(row0 as usize * row_words as usize + i as usize), 0) };
        i += ptx::ntid_x();
    }
}
