//! Edge softmax over each row's values (max-subtracted, f32), CPU and GPU.

use crate::error::{Error, Result};
use crate::gpu::DeviceVec;
use crate::gpu::abi::sddmm::{EdgeSoftmaxArgs, edge_softmax_f32};
use crate::gpu::launch::{Ptr, Shape};
use crate::ops::GraphHandle;
use crate::ops::sddmm::ValueOrder;

/// CPU softmax of CSR-ordered values.
pub fn edge_softmax(g: &GraphHandle, values: &[f32]) -> Result<Vec<f32>> {
    if values.len() != g.csr().nnz() {
        return Err(Error::Shape(format!("{} values for {} nonzeros", values.len(), g.csr().nnz())));
    }
    Ok(super::cpu::edge_softmax_cpu(g.csr(), values))
}

/// In-place softmax of device values in `order` (a warp per row).
pub fn edge_softmax_device(g: &GraphHandle, values: &mut DeviceVec<f32>, order: ValueOrder) -> Result<()> {
    let gpu = g.gpu()?;
    let csr = g.device_csr()?;
    let slot_of = match order {
        ValueOrder::Csr => Ptr::null(),
        ValueOrder::MeBcrs => {
            let m = g.device_csr_to_slot()?;
            m.slots().arg(gpu)
        }
    };
    let n = g.csr().n_rows() as u32;
    let args = EdgeSoftmaxArgs { n_rows: n, row_ptr: csr.row_ptr.arg(gpu), slot_of, vals: values.arg_mut(gpu) };
    // SAFETY: row_ptr has n + 1 entries and every (mapped) index is inside `values`, which
    // holds the graph's values in `order`.
    unsafe { edge_softmax_f32.launch(gpu, Shape::linear(n.div_ceil(8), 256, 0), &args) }
}
