//! Launcher of `kernels-gpu/src/spmm/hp.rs`: nnz-balanced warps over the row-sorted COO, f32.

use crate::error::Result;
use crate::gpu::abi::spmm::{HpSpmmArgs, spmm_hp_f32};
use crate::gpu::launch::Shape;
use crate::gpu::{DeviceMatrix, DeviceVec};
use crate::ops::values::check_len;
use crate::ops::{GraphHandle, ValueOrder};

use crate::gpu::Gpu;
use crate::shared::config;
pub use crate::shared::partition::hp_nnz_per_warp;
use crate::shared::partition::{dtp_full_wave_size, dtp_nnz_per_warp};

/// α of HP-SpMM's InEq. 5 as (numerator, denominator): at least one full wave of blocks. The
/// paper names α a scale factor without giving its value; `bench dtp` measures the choice.
pub const DTP_ALPHA: (u32, u32) = (1, 1);

/// Float4 columns per lane: the kernel's VectorWidth in InEq. 5 (each lane loads 4 of K).
const HP_SPMM_VECTOR_WIDTH: u32 = 4;

/// Dynamic Task Partition as HP-SpMM states it (Eq. 3-5, §III-C): Eq. 3 from the driver's
/// occupancy calculator for this kernel (warps, registers and shared memory per SM), Eq. 4 the
/// full wave, and the largest NnzPerWarp of the candidate set {8, ..., 512} for which the
/// launch still has α full waves (`ld` columns: the grid's K split counts as more warps).
pub fn dtp_spmm_nnz_per_warp(gpu: &Gpu, nnz: u32, ld: u32) -> Result<u32> {
    let active = spmm_hp_f32.max_active_blocks_per_sm(gpu, 32 * config::HP_SPMM_WARPS, 0)?;
    let wave = dtp_full_wave_size(gpu.info().sm_count, active);
    Ok(dtp_nnz_per_warp(nnz, ld, wave, config::HP_SPMM_WARPS, HP_SPMM_VECTOR_WIDTH, DTP_ALPHA.0, DTP_ALPHA.1))
}

pub fn spmm_hp(g: &GraphHandle, x: &DeviceMatrix<f32>, y: &mut DeviceMatrix<f32>) -> Result<()> {
    spmm_hp_values(g, None, x, y)
}

/// [`spmm_hp`] with per-call values in CSR order (`None`: the handle's).
pub fn spmm_hp_values(g: &GraphHandle, values: Option<&DeviceVec<f32>>, x: &DeviceMatrix<f32>, y: &mut DeviceMatrix<f32>) -> Result<()> {
    spmm_hp_npw(g, values, x, y, None)
}

/// [`spmm_hp_values`] with `nnz_per_warp` fixed (any positive count: a warp reads its nonzeros
/// 32 at a time and takes a shorter last batch) instead of the DTP choice (`None`,
/// [`dtp_spmm_nnz_per_warp`]): what `bench dtp` compares DTP with.
pub fn spmm_hp_npw(
    g: &GraphHandle,
    values: Option<&DeviceVec<f32>>,
    x: &DeviceMatrix<f32>,
    y: &mut DeviceMatrix<f32>,
    nnz_per_warp: Option<u32>,
) -> Result<()> {
    if let Some(npw) = nnz_per_warp
        && npw == 0
    {
        return Err(crate::error::Error::Unsupported("HP SpMM: 0 nonzeros per warp".into()));
    }
    let gpu = g.gpu()?;
    let csr = g.device_csr()?;
    let values = match values {
        Some(v) => {
            check_len("HP SpMM: the edge values", v.len(), g.csr().nnz(), ValueOrder::Csr)?;
            v
        }
        None => &csr.values,
    };
    let nnz = g.csr().nnz() as u32;
    let row_of = g.device_coo_rows()?;
    y.zero()?; // rows shared between warps are accumulated atomically; empty rows stay zero
    if nnz == 0 {
        return Ok(());
    }
    let k_chunks = (x.ld as u32 / 4).div_ceil(32);
    let npw = match nnz_per_warp {
        Some(n) => n,
        None => dtp_spmm_nnz_per_warp(gpu, nnz, x.ld as u32)?,
    };
    let warps = nnz.div_ceil(npw);
    let shape =
        Shape { grid: (warps.div_ceil(config::HP_SPMM_WARPS), k_chunks, 1), block: (32 * config::HP_SPMM_WARPS, 1, 1), smem_bytes: 0 };
    let args = HpSpmmArgs {
        nnz,
        ld: x.ld as u32,
        nnz_per_warp: npw,
        row_ptr: csr.row_ptr.arg(gpu),
        row_of: row_of.0.arg(gpu),
        col_idx: csr.col_idx.arg(gpu),
        values: values.arg(gpu),
        x: x.arg(),
        y: y.arg_mut(),
    };
    // SAFETY: row_of, col_idx and values hold nnz entries, row_ptr n_rows + 1; X and Y share
    // the padded stride ld (multiple of 8) and Y was just zeroed.
    unsafe { spmm_hp_f32.launch(gpu, shape, &args) }
}

#[cfg(test)]
mod tests {
    use super::hp_nnz_per_warp;

    #[test]
    fn dtp_fills_the_device_and_stays_in_bounds() {
        // Small graphs: the floor of one 32-wide batch.
        assert_eq!(hp_nnz_per_warp(100, 132, 64, 2, 1), 32);
        // Large graphs: about two waves of resident warps, multiple of 32.
        let npw = hp_nnz_per_warp(10_000_000, 132, 64, 2, 1);
        assert_eq!(npw % 32, 0);
        let warps = 10_000_000u32.div_ceil(npw);
        assert!((132 * 64..=132 * 64 * 3).contains(&warps), "{warps} warps");
        // Huge graphs are capped so one warp never walks more than 4096 nonzeros.
        assert_eq!(hp_nnz_per_warp(u32::MAX / 2, 1, 1, 1, 1), 4096);
    }
}
