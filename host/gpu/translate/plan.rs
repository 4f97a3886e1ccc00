//! Host-side planning of a GPU translation from the CSR row pointers: windows, the longest
//! window sorted in shared memory (sizes the launch), and the windows too long for it with their
//! places in the global sort scratch. Plain functions, tested on the CPU.

use crate::shared::translate::{sort_len, window_is_large, window_rows};

#[derive(Clone, Debug, PartialEq)]
pub struct WindowPlan {
    pub n_windows: usize,
    /// Edges of the longest window sorted in shared memory (0 if none).
    pub max_small_len: u32,
    /// Windows sorted in global scratch, ascending.
    pub large: Vec<u32>,
    /// First scratch key of each large window: prefix sums of `sort_len(len)`.
    pub scratch_off: Vec<u32>,
    /// Scratch keys in all.
    pub scratch_len: usize,
}

/// Plan windows of `win` rows over `row_ptr` (n_rows + 1 entries).
pub fn plan_windows(row_ptr: &[u32], win: usize) -> WindowPlan {
    let n_rows = row_ptr.len() - 1;
    let n_windows = n_rows.div_ceil(win);
    let mut plan = WindowPlan { n_windows, max_small_len: 0, large: Vec::new(), scratch_off: Vec::new(), scratch_len: 0 };
    for w in 0..n_windows {
        let (r0, r1) = window_rows(w as u32, win as u32, n_rows as u32);
        let len = row_ptr[r1 as usize] - row_ptr[r0 as usize];
        if window_is_large(len) {
            plan.large.push(w as u32);
            plan.scratch_off.push(plan.scratch_len as u32);
            plan.scratch_len += sort_len(len) as usize;
        } else {
            plan.max_small_len = plan.max_small_len.max(len);
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::translate::*;

    #[test]
    fn small_and_large_windows() {
        // Windows of 8 rows: 3 edges; 5000 (large); 0; 4096 (largest small); 9000 (large, short window).
        let lens = [3u32, 5000, 0, 4096, 9000];
        let mut row_ptr = vec![0u32];
        for (w, &l) in lens.iter().enumerate() {
            let rows = if w == 4 { 3 } else { 8 };
            for r in 0..rows {
                let add = if r == 0 { l } else { 0 };
                row_ptr.push(row_ptr.last().unwrap() + add);
            }
        }
        let p = plan_windows(&row_ptr, 8);
        assert_eq!(p.n_windows, 5);
        assert_eq!(p.max_small_len, 4096);
        assert_eq!(p.large, vec![1, 4]);
        assert_eq!(p.scratch_off, vec![0, 8192]);
        assert_eq!(p.scratch_len, 8192 + 16384);
        assert_eq!(window_rows(4, 8, 35), (32, 35));
    }

    #[test]
    fn index_arithmetic() {
        assert_eq!(sort_len(0), 1);
        assert_eq!(sort_len(1), 1);
        assert_eq!(sort_len(5), 8);
        assert_eq!(sort_len(4096), 4096);
        assert!(!window_is_large(SORT_SMEM_KEYS) && window_is_large(SORT_SMEM_KEYS + 1));
        assert!(sort_key(3, 7) < sort_key(3, 8) && sort_key(3, u32::MAX - 1) < sort_key(4, 0));
        assert_eq!(blocks_of(0, 8), 0);
        assert_eq!(blocks_of(17, 8), 3);
        assert_eq!(blocks_of(16, 16), 1);
        assert_eq!(blocks_of(5, 0), 0);
        assert_eq!(div_or_zero(7, 0), 0);
        assert_eq!(sgt_pos(3, 21, 8), 3 * 8 + 5);
        assert!(window_smem_bytes(u32::MAX) <= 48 * 1024);
        assert!(window_smem_bytes(0) >= 208 + 8);
    }

    /// `mebcrs_slot` against the CPU translation's slots on a window with a residue block.
    #[test]
    fn mebcrs_slots_match_the_cpu_translation() {
        use crate::format::MeBcrs;
        use crate::graph::Csr;
        let mut trip = Vec::new();
        for c in 0..21u32 {
            trip.push((c % 8, c * 3, 1.0 + c as f32));
            trip.push((9 + c % 5, c, 2.0));
        }
        let csr = Csr::from_triplets(14, 64, &trip).unwrap();
        for k in [4u32, 8, 16] {
            let m = MeBcrs::from_csr(&csr, k as usize).unwrap();
            for r in 0..csr.n_rows() {
                let w = r / 8;
                let (base, n_vec) = (m.win_ptr[w], m.win_ptr[w + 1] - m.win_ptr[w]);
                let cols = &m.vec_col[base as usize..(base + n_vec) as usize];
                for e in csr.row_range(r) {
                    let local = cols.binary_search(&csr.col_idx()[e]).unwrap() as u32;
                    assert_eq!(mebcrs_slot(base, n_vec, k, local, (r % 8) as u32), m.csr_to_slot[e], "k {k} edge {e}");
                }
            }
        }
    }
}
