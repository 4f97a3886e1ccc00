//! What a command will allocate, checked before it allocates anything: a feature width of 0 and
//! problems larger than the host's available or the GPU's free memory are errors that say what
//! to change, instead of a 0 ms result or an abort halfway through.

use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::graph::Csr;

/// Bytes a command needs at its peak, on the host and on the GPU (estimates: the dense operands
/// exactly, the sparse formats by a per-nonzero bound).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footprint {
    pub host: u64,
    pub device: u64,
}

/// Format bytes per nonzero on the device: CSR (8), COO rows (4), cuSPARSE's own CSR and COO in
/// f32 and f16 (up to 40), ME-BCRS values in f32 and f16 with their columns (up to 8 slots of 6
/// bytes per nonzero when every vector holds one edge, usually far fewer).
const DEVICE_FORMAT_BYTES_PER_NNZ: u64 = 100;
/// Host bytes per nonzero for the translations a command makes (SGT, ME-BCRS, COO, copies).
const HOST_FORMAT_BYTES_PER_NNZ: u64 = 64;
/// `bench::copy_bandwidth_gbs` holds two 1 GiB buffers before any operand exists.
const COPY_PROBE_BYTES: u64 = 2 << 30;

/// a * b * c, saturating.
fn mul(a: usize, b: usize, c: u64) -> u128 {
    (a as u128).saturating_mul(b as u128).saturating_mul(c as u128)
}

/// A sum of byte counts, saturating.
fn sum(parts: &[u128]) -> u128 {
    parts.iter().fold(0u128, |acc, &p| acc.saturating_add(p))
}

/// `gpu::memory::padded_ld` for any K (a K near usize::MAX must still be refused, not overflow).
fn padded_ld_saturating(k: usize) -> usize {
    k.div_ceil(8).saturating_mul(8)
}

fn clamp(bytes: u128) -> u64 {
    bytes.min(u64::MAX as u128) as u64
}

/// K = 0 computes nothing; every command refuses it up front.
pub fn check_feature_width(k: usize) -> Result<()> {
    if k == 0 {
        return Err(Error::Unsupported("feature width K = 0: nothing to compute; use --k 1 or more".into()));
    }
    Ok(())
}

/// SpMM as `tcgnn spmm` / `tcgnn bench spmm` / the demo run it on an `n_rows x n_cols` graph with
/// `nnz` nonzeros at width `k`. CPU (`gpu = false`): X, Y and the f64 reference on the host.
/// GPU: X in f32 and f16 (plus one more f32 copy for cuSPARSE), Y, the formats, and on the host
/// X, the f32 and f16-rounded f64 references and a padded staging copy.
pub fn spmm_footprint(n_rows: usize, n_cols: usize, nnz: usize, k: usize, gpu: bool) -> Footprint {
    let ld = padded_ld_saturating(k);
    if !gpu {
        let host = sum(&[mul(n_cols, k, 4), mul(n_rows, k, 4 + 8), mul(nnz, 1, HOST_FORMAT_BYTES_PER_NNZ)]);
        return Footprint { host: clamp(host), device: 0 };
    }
    let host = sum(&[mul(n_cols, k, 4), mul(n_rows, k, 2 * 8), mul(n_rows.max(n_cols), ld, 4 + 4), mul(nnz, 1, HOST_FORMAT_BYTES_PER_NNZ)]);
    let device = sum(&[
        mul(n_cols, ld, 4 + 2 + 4),
        mul(n_rows, ld, 4),
        mul(nnz, 1, DEVICE_FORMAT_BYTES_PER_NNZ),
        mul(n_rows, 1, 16),
        mul(n_cols, 1, 16),
    ]);
    Footprint { host: clamp(host), device: clamp(device).max(COPY_PROBE_BYTES) }
}

/// SDDMM as `tcgnn bench sddmm` runs it: A (n_rows x k) and B (n_cols x k) in f32 and f16, one
/// output value per nonzero, the formats; on the host A, B, two f64 references and staging.
pub fn sddmm_footprint(n_rows: usize, n_cols: usize, nnz: usize, k: usize) -> Footprint {
    let ld = padded_ld_saturating(k);
    let host = sum(&[mul(n_rows, k, 4), mul(n_cols, k, 4), mul(n_rows.max(n_cols), ld, 4), mul(nnz, 1, 2 * 8 + HOST_FORMAT_BYTES_PER_NNZ)]);
    let device = sum(&[
        mul(n_rows, ld, 4 + 2),
        mul(n_cols, ld, 4 + 2),
        mul(nnz, 1, 4 + DEVICE_FORMAT_BYTES_PER_NNZ),
        mul(n_rows, 1, 16),
        mul(n_cols, 1, 16),
    ]);
    Footprint { host: clamp(host), device: clamp(device).max(COPY_PROBE_BYTES) }
}

/// Memory the host can give without swapping: `MemAvailable` of `/proc/meminfo`, or `None`
/// where that file does not exist.
pub fn host_available_bytes() -> Option<u64> {
    crate::util::memory::available_host_bytes().map(|(bytes, _)| bytes)
}

/// Free memory on the GPU right now.
pub fn gpu_free_bytes(gpu: &Gpu) -> Result<u64> {
    let (free, _total) = gpu.ctx.mem_get_info().map_err(|e| Error::cuda("cuMemGetInfo", e))?;
    Ok(free as u64)
}

fn gb(bytes: u64) -> String {
    format!("{:.1} GB", bytes as f64 / 1e9)
}

/// Compare `need` with what is there (`None`: unknown, not checked). `what` names the command.
pub fn check_footprint(what: &str, need: Footprint, host_available: Option<u64>, gpu_free: Option<u64>) -> Result<()> {
    if let Some(free) = gpu_free
        && need.device > free
    {
        return Err(Error::Unsupported(format!(
            "{what} needs about {}, the GPU has {} free; use a smaller --k",
            gb(need.device),
            gb(free)
        )));
    }
    if let Some(avail) = host_available
        && need.host > avail
    {
        return Err(Error::Unsupported(format!(
            "{what} needs about {} of host memory, {} is available; use a smaller --k",
            gb(need.host),
            gb(avail)
        )));
    }
    Ok(())
}

/// The check `tcgnn spmm`, `tcgnn bench spmm` and the demo make before allocating: K > 0, and the
/// footprint within the host's available memory and (with a GPU) the GPU's free memory.
pub fn check_spmm_command(csr: &Csr, k: usize, gpu: Option<&Gpu>) -> Result<()> {
    check_feature_width(k)?;
    let need = spmm_footprint(csr.n_rows(), csr.n_cols(), csr.nnz(), k, gpu.is_some());
    let free = gpu.map(gpu_free_bytes).transpose()?;
    check_footprint(&format!("SpMM at K = {k} on {} nodes ({} nnz)", csr.n_rows(), csr.nnz()), need, host_available_bytes(), free)
}

/// [`check_spmm_command`] for `tcgnn bench sddmm`.
pub fn check_sddmm_command(csr: &Csr, k: usize, gpu: &Gpu) -> Result<()> {
    check_feature_width(k)?;
    let need = sddmm_footprint(csr.n_rows(), csr.n_cols(), csr.nnz(), k);
    let what = format!("SDDMM at K = {k} on {} nodes ({} nnz)", csr.n_rows(), csr.nnz());
    check_footprint(&what, need, host_available_bytes(), Some(gpu_free_bytes(gpu)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footprints_grow_with_k_and_saturate() {
        let small = spmm_footprint(2708, 2708, 10_556, 16, true);
        let big = spmm_footprint(2708, 2708, 10_556, 1_000_000, true);
        assert!(big.device > 2708 * 1_000_000 * 14 && big.host > small.host);
        assert_eq!(spmm_footprint(usize::MAX, usize::MAX, 1, usize::MAX, false).host, u64::MAX);
        assert!(sddmm_footprint(100, 100, 1000, 32).device >= COPY_PROBE_BYTES);
    }
}
