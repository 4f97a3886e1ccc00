//! A CSR matrix on the device: the input of the GPU translations and of the CUDA-core kernels.

use crate::error::Result;
use crate::gpu::{DeviceVec, Gpu};
use crate::graph::Csr;

/// The CSR arrays on the device.
pub struct DeviceCsr {
    pub row_ptr: DeviceVec<u32>,
    pub col_idx: DeviceVec<u32>,
    pub values: DeviceVec<f32>,
}

impl DeviceCsr {
    pub fn upload(gpu: &Gpu, csr: &Csr) -> Result<Self> {
        Ok(DeviceCsr {
            row_ptr: DeviceVec::upload(gpu, csr.row_ptr())?,
            col_idx: DeviceVec::upload(gpu, csr.col_idx())?,
            values: DeviceVec::upload(gpu, csr.values())?,
        })
    }
}
