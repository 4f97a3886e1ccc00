//! The fragment-layout functions the device kernels use, checked on the CPU: every element of
//! each operand tile is owned by exactly one (lane, slot).

mod layout {
    include!("../kernels-gpu/src/layout.rs");
}
use layout::*;

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
