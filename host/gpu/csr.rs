//! A CSR matrix on the device: the input of the GPU translations and of the CUDA-core kernels.

use crate::error::Result;
use crate::gpu::{DeviceVec, Gpu};
use crate::graph::Csr;
use crate::shared::config::CSR_SPMM_HUB_ROW;

/// The CSR arrays on the device.
pub struct DeviceCsr {
    pub row_ptr: DeviceVec<u32>,
    pub col_idx: DeviceVec<u32>,
    pub values: DeviceVec<f32>,
    /// The rows of more than `CSR_SPMM_HUB_ROW` entries, ascending (the CSR SpMM gives each a
    /// block of its own); `n_hubs` of them (the buffer holds at least one element).
    pub hub_rows: DeviceVec<u32>,
    pub n_hubs: usize,
}

impl DeviceCsr {
    pub fn upload(gpu: &Gpu, csr: &Csr) -> Result<Self> {
        let hubs = hub_rows(csr.row_ptr());
        Ok(DeviceCsr {
            row_ptr: DeviceVec::upload(gpu, csr.row_ptr())?,
            col_idx: DeviceVec::upload(gpu, csr.col_idx())?,
            values: DeviceVec::upload(gpu, csr.values())?,
            hub_rows: DeviceVec::upload(gpu, if hubs.is_empty() { &[0] } else { &hubs })?,
            n_hubs: hubs.len(),
        })
    }
}

/// The rows of more than `CSR_SPMM_HUB_ROW` entries of a CSR with these row pointers.
pub fn hub_rows(row_ptr: &[u32]) -> Vec<u32> {
    (0..row_ptr.len().saturating_sub(1) as u32).filter(|&r| row_ptr[r as usize + 1] - row_ptr[r as usize] > CSR_SPMM_HUB_ROW).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hubs_are_the_rows_over_the_threshold() {
        let h = CSR_SPMM_HUB_ROW;
        // Rows of 0, h, h + 1, 3, 5h entries.
        let lens = [0, h, h + 1, 3, 5 * h];
        let mut ptr = vec![0u32];
        for l in lens {
            ptr.push(ptr.last().unwrap() + l);
        }
        assert_eq!(hub_rows(&ptr), vec![2, 4]);
        assert!(hub_rows(&[0]).is_empty());
        assert!(hub_rows(&[]).is_empty());
    }
}
