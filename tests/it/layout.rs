//! The fragment-layout functions the device kernels use, checked on the CPU: every element of
//! each operand tile is owned by exactly one (lane, slot).

mod fragment {
    include!("../../kernels-gpu/src/layout.rs");
}
use fragment::*;

fn covers(rows: u32, cols: u32, slots: u32, f: impl Fn(u32, u32) -> (u32, u32)) {
    let mut seen = vec![0u32; (rows * cols) as usize];
    for lane in 0..32 {
        for i in 0..slots {
            let (r, c) = f(lane, i);
            assert!(r < rows && c < cols, "({r},{c}) outside {rows}x{cols}");
            seen[(r * cols + c) as usize] += 1;
        }
    }
    assert!(seen.iter().all(|&n| n == 1), "each element held once");
}

#[test]
fn fragments_partition_their_tiles() {
    covers(16, 8, 4, frag_c);
    covers(16, 8, 4, frag_a_f16); // m16n8k8
    covers(16, 16, 8, frag_a_f16); // m16n8k16
    covers(8, 8, 2, frag_b_f16);
    covers(16, 8, 4, frag_b_f16);
    covers(16, 4, 2, frag_a_tf32); // m16n8k4
    covers(16, 8, 4, frag_a_tf32);
    covers(4, 8, 1, frag_b_tf32);
    covers(8, 8, 2, frag_b_tf32);
}

/// CPU emulation of one TC16 SpMM tile step: the lanes' B gathers (block columns `slots`, dims
/// `tc16_dim(g, q, nt)` of the slice), the MMA on the fragments as laid out by `frag_b_*`, and
/// the kernel's output runs (rows g and g + 8, columns 2t and 2t+1 of each tile) reproduce
/// A X for every (row, dim) of the slice, each written once.
fn tc16_tile_step(nt: u32, slots: impl Fn(u32) -> [u32; 2], frag_b: impl Fn(u32, u32) -> (u32, u32)) {
    let dims = 8 * nt;
    let a: Vec<f64> = (0..16 * 8).map(|i| ((i * 37) % 11) as f64 - 5.0).collect();
    let x: Vec<f64> = (0..8 * dims).map(|i| ((i * 13) % 7) as f64 + 0.5).collect();
    let mut y = vec![f64::NAN; (16 * dims) as usize];
    let mut writes = vec![0u32; (16 * dims) as usize];
    for q in 0..nt {
        // B of tile q as the lanes supply it.
        let mut b = vec![f64::NAN; 64];
        for lane in 0..32 {
            let g = lane / 4;
            for (i, slot) in slots(lane).into_iter().enumerate() {
                let (k, n) = frag_b(lane, i as u32);
                assert_eq!(k, slot, "lane {lane} element {i}: the kernel supplies column {slot}, the MMA reads k = {k}");
                b[(k * 8 + n) as usize] = x[(slot * dims + g * nt + q) as usize];
            }
        }
        // D = A B; lane (g, t) writes element i = 2*half + j at row g + 8*half, dim of column 2t + j.
        for lane in 0..32 {
            let (g, t) = (lane / 4, lane % 4);
            for i in 0..4 {
                let (r, n) = frag_c(lane, i);
                let (half, j) = (i / 2, i % 2);
                assert_eq!((r, n), (g + 8 * half, 2 * t + j));
                let d: f64 = (0..8).map(|k| a[(r * 8 + k) as usize] * b[(k * 8 + n) as usize]).sum();
                let dim = tc16_dim(2 * t + j, 0, nt) + q;
                y[(r * dims + dim) as usize] = d;
                writes[(r * dims + dim) as usize] += 1;
            }
        }
    }
    assert!(writes.iter().all(|&w| w == 1), "every output written once (nt {nt})");
    for r in 0..16 {
        for d in 0..dims {
            let want: f64 = (0..8).map(|k| a[(r * 8 + k) as usize] * x[(k * dims + d) as usize]).sum();
            assert_eq!(y[(r * dims + d) as usize], want, "row {r} dim {d} (nt {nt})");
        }
    }
}

#[test]
fn tc16_tile_step_matches_dense_product() {
    for nt in [2, 4] {
        tc16_tile_step(nt, |lane| [lane % 4, lane % 4 + 4], frag_b_tf32);
    }
    for nt in [4, 8] {
        tc16_tile_step(nt, |lane| [2 * (lane % 4), 2 * (lane % 4) + 1], frag_b_f16);
    }
}

/// The swizzle of the pipelined TC8 kernel is a permutation of each row's chunks, and every
/// quarter-warp's fragment read touches 8 distinct 16-byte bank groups.
#[test]
fn tc8_smem_swizzle_is_conflict_free() {
    for tf32 in [false, true] {
        for v in 0..32 {
            let mut seen = [false; 8];
            for c in 0..8 {
                seen[tc8_smem_chunk(v, c, tf32) as usize] = true;
            }
            assert!(seen.iter().all(|&s| s), "row {v} is a permutation");
        }
        for block in 0..4 {
            for i in 0..2 {
                for q in 0..4 {
                    let mut groups = std::collections::HashSet::new();
                    for lane in 8 * q..8 * q + 8 {
                        let (g, t) = (lane / 4, lane % 4);
                        let v = 8 * block + if tf32 { t + 4 * i } else { 2 * t + i };
                        groups.insert(tc8_smem_chunk(v, g, tf32));
                    }
                    assert_eq!(groups.len(), 8, "tf32 {tf32} block {block} load {i} quarter {q}");
                }
            }
        }
    }
}
