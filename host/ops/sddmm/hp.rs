//! Launcher of `kernels-gpu/src/sddmm/hp.rs`: nnz-balanced warps, lane groups sized to K.

use crate::error::Result;
use crate::gpu::abi::sddmm::{HpSddmmArgs, sddmm_hp_f32};
use crate::gpu::launch::{Ptr, Shape};
use crate::gpu::{DeviceMatrix, DeviceVec};
use crate::ops::GraphHandle;
use crate::ops::sddmm::ValueOrder;
use crate::shared::partition::{dtp_full_wave_size, dtp_nnz_per_warp};

/// Threads per block of the HP SDDMM (8 warps).
const SDDMM_HP_THREADS: u32 = 256;

/// Lanes per edge: float4s of K, rounded up to a power of two, at most 32; as a shift.
pub fn group_shift(ld: usize) -> u32 {
    let lanes = (ld / 4).clamp(1, 32).next_power_of_two();
    lanes.trailing_zeros()
}

pub fn sddmm_hp(g: &GraphHandle, a: &DeviceMatrix<f32>, b: &DeviceMatrix<f32>, out: &mut DeviceVec<f32>, order: ValueOrder) -> Result<()> {
    let gpu = g.gpu()?;
    let csr = g.device_csr()?;
    let nnz = g.csr().nnz() as u32;
    if nnz == 0 {
        return Ok(());
    }
    let row_of = g.device_coo_rows()?;
    let slot_of = match order {
        ValueOrder::Csr => Ptr::null(),
        ValueOrder::MeBcrs => {
            let m = g.device_csr_to_slot()?;
            // Edges fill only their own slots; the zeros inside blocks must read as zero.
            gpu.stream().memset_zeros(out.slice_mut()).map_err(|e| crate::Error::cuda("memset", e))?;
            m.slots().arg(gpu)
        }
    };
    // DTP as for HP SpMM (InEq. 5), with K's term at 1: the SDDMM has no K split (a warp's lane
    // groups cover K), so 128 = WarpSize x VectorWidth columns.
    let active = sddmm_hp_f32.max_active_blocks_per_sm(gpu, SDDMM_HP_THREADS, 0)?;
    let wave = dtp_full_wave_size(gpu.info().sm_count, active);
    let (alpha_num, alpha_den) = crate::ops::spmm::hp::DTP_ALPHA;
    let npw = dtp_nnz_per_warp(nnz, 128, wave, SDDMM_HP_THREADS / 32, 4, alpha_num, alpha_den);
    let warps = nnz.div_ceil(npw);
    let args = HpSddmmArgs {
        nnz,
        ld: a.ld as u32,
        nnz_per_warp: npw,
        group_shift: group_shift(a.ld),
        row_of: row_of.0.arg(gpu),
        col_idx: csr.col_idx.arg(gpu),
        values: csr.values.arg(gpu),
        slot_of,
        a: a.arg(),
        b: b.arg(),
        out: out.arg_mut(gpu),
    };
    // SAFETY: row_of/col_idx/values hold nnz entries, the slot map (or null) maps into an
    // output the caller sized for `order`; A and B share the padded stride.
    unsafe { sddmm_hp_f32.launch(gpu, Shape::linear(warps.div_ceil(SDDMM_HP_THREADS / 32), SDDMM_HP_THREADS, 0), &args) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn lane_groups_cover_k() {
        assert_eq!(super::group_shift(8), 1); // 2 lanes x float4
        assert_eq!(super::group_shift(24), 3); // 6 float4 -> 8 lanes
        assert_eq!(super::group_shift(32), 3);
        assert_eq!(super::group_shift(128), 5);
        assert_eq!(super::group_shift(264), 5); // capped at a warp, lanes loop
    }
}
