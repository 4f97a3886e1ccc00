// Fragment layouts of `mma.sync.aligned.m16n8kK` (PTX ISA, "Matrix fragments for mma.m16n8k*").
// Plain `const fn`s with no dependencies: the device crate uses them and the host tests
// `include!` this file, so every kernel's index arithmetic is checked without a GPU and the
// GPU self-test pins the layouts to the hardware.
//
// Each thread (lane 0..32) holds elements of A (16 x K, row-major), B (K x 8, column-major)
// and C/D (16 x 8). `g = lane / 4` is the group id, `t = lane % 4` the thread in the group.

/// (row, col) of accumulator element `i` (0..4) held by `lane`.
#[inline(always)]
pub const fn frag_c(lane: u32, i: u32) -> (u32, u32) {
    (lane / 4 + 8 * (i / 2), 2 * (lane % 4) + i % 2)
}

/// (row, k) of f16 A element `i` held by `lane`: i in 0..4 for k8, 0..8 for k16
/// (registers hold pairs: element 2j is the low half of register j).
#[inline(always)]
pub const fn frag_a_f16(lane: u32, i: u32) -> (u32, u32) {
    (lane / 4 + 8 * ((i / 2) % 2), 2 * (lane % 4) + i % 2 + 8 * (i / 4))
}

/// (k, col) of f16 B element `i` held by `lane`: i in 0..2 for k8, 0..4 for k16.
#[inline(always)]
pub const fn frag_b_f16(lane: u32, i: u32) -> (u32, u32) {
    (2 * (lane % 4) + i % 2 + 8 * (i / 2), lane / 4)
}

/// (row, k) of tf32 A element `i` held by `lane`: i in 0..2 for k4, 0..4 for k8.
#[inline(always)]
pub const fn frag_a_tf32(lane: u32, i: u32) -> (u32, u32) {
    (lane / 4 + 8 * (i % 2), lane % 4 + 4 * (i / 2))
}

/// (k, col) of tf32 B element `i` held by `lane`: i in 0..1 for k4, 0..2 for k8.
#[inline(always)]
pub const fn frag_b_tf32(lane: u32, i: u32) -> (u32, u32) {
    (lane % 4 + 4 * i, lane / 4)
}

/// TC16 SpMM feature remap: MMA column `n` of tile `q` (of `nt` tiles) stands for feature dim
/// `n * nt + q` of the warp's slice, so lane (g, t) supplies B elements of every tile from the
/// `nt` consecutive dims `g * nt ..` of an X row (one vector load) and holds outputs for the
/// consecutive dims `2t * nt .. 2t * nt + 2 * nt` of two rows (vector stores).
#[inline(always)]
pub const fn tc16_dim(n: u32, q: u32, nt: u32) -> u32 {
    n * nt + q
}

/// TC8 pipelined SpMM: where chunk `c` (16 bytes, 0..8) of group vector `v` sits in its
/// 128-byte shared-memory row. XOR-swizzled so that both the copies (a quarter-warp writes the
/// 8 chunks of one row) and the fragment reads (a quarter-warp reads chunks 2q, 2q+1 of the 4
/// rows 2t + i (f16) or t + 4i (tf32)) hit 8 different 16-byte bank groups.
#[inline(always)]
pub const fn tc8_smem_chunk(v: u32, c: u32, tf32: bool) -> u32 {
    c ^ if tf32 { 2 * (v % 4) } else { v % 8 }
}
