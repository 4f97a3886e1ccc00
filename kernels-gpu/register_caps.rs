// Per-kernel register caps: the crate's `__launch_bounds__`. The build script (`build.rs`)
// writes `.maxnreg N` into these entries' PTX, where a few registers fewer fit one more block
// on an SM with no spill (CI's ptxas step fails on spills, for sm_80 and sm_90 alike). Why
// each one: bench/NOTES.md, 2026-11-27 (last session).

/// (kernel entry, target architecture, registers a thread at most): a cap holds for the one
/// architecture it was checked on (ptxas allocates differently per target).
pub const REGISTER_CAPS: &[(&str, &str, u32)] = &[
    // sm_90: 170 -> 168 registers, three blocks of 4 warps an SM instead of two (AGNN's f16
    // first layer's weight gradient, 500 -> 32). On sm_80 the same cap spills 64 bytes.
    ("dropout_gemm_dw_stream_tf32_h16_nt4", "sm_90", 168),
    // sm_90: GAT's fused attention with 8-column heads (latency-bound: warps active was the
    // limit): forward 67 -> 64 and column pass 80 -> 64 registers, four blocks of 8 warps an
    // SM instead of three and two (the row pass takes 52 uncapped). No spill at these caps.
    // The forward's cap is 72, under which ptxas allocates 64; capped at 64 it spills 16 bytes.
    ("gat_attention_forward_d8", "sm_90", 72),
    ("gat_attention_forward_d8_h16", "sm_90", 72),
    ("gat_attention_col_grad_d8", "sm_90", 64),
    // sm_90: the wide f16 dropout forward (GAT's 500 -> 64 first layer): 136 / 126 -> 128 /
    // 118 registers, two blocks of 8 warps an SM instead of one. No spill at this cap.
    ("dropout_gemm_wide_h16_bits", "sm_90", 128),
    ("dropout_gemm_wide_h16", "sm_90", 128),
];
