//! Edge values across orders and precisions, for training steps that reuse one pattern with
//! values computed on the device: the values of S in the order of Sᵀ (a gather through a map
//! built once per graph on the host), and f32 -> f16 casts of value vectors and features.
//! Launchers of `kernels-gpu/src/values.rs`; every call only enqueues kernels on the Gpu's stream.

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::format::MeBcrs;
use crate::gpu::abi::values::{
    CastF16Args, GatherValuesArgs, ScatterValuesArgs, ScatterValuesF16Args, cast_f32_f16, gather_values_f32, scatter_values_f16,
    scatter_values_f32,
};
use crate::gpu::launch::{Ptr, PtrMut, Shape};
use crate::gpu::{DeviceMatrix, DeviceVec, Gpu};
use crate::ops::{GraphHandle, ValueOrder};

/// Threads per block of the element-wise kernels.
const BLOCK: u32 = 256;

/// Blocks for `items` grid-stride items: one item per thread up to 16 blocks per SM, at least
/// one block (the cast's last `n % 8` elements go to the first threads).
fn grid(gpu: &Gpu, items: u32) -> u32 {
    items.div_ceil(BLOCK).clamp(1, 16 * gpu.info().sm_count.max(1))
}

/// A buffer holding the `need` values of an order (an allocation holds at least one element, so
/// a graph without edges takes a buffer of one).
pub(crate) fn check_len(what: &str, len: usize, need: usize, order: ValueOrder) -> Result<()> {
    if len != need.max(1) {
        return Err(Error::Shape(format!("{what} holds {len} values, {order:?} order has {need}")));
    }
    Ok(())
}

fn count_u32(n: usize, what: &str) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::Unsupported(format!("{what}: {n} elements exceed the kernels' 32-bit counts")))
}

/// The ME-BCRS (k = 8) transpose map: for every slot of `t` (the translation of Sᵀ), the slot of
/// `s` (the translation of S) holding the same edge, `u32::MAX` where the slot holds no edge.
/// `csr_map[e]` is the CSR nonzero of S for CSR nonzero `e` of Sᵀ. Both translations must come
/// from canonical CSRs (one edge per slot).
pub fn transpose_map_mebcrs(s: &MeBcrs, t: &MeBcrs, csr_map: &[u32]) -> Vec<u32> {
    let mut map = vec![u32::MAX; t.values.len()];
    for (e, &slot) in t.csr_to_slot.iter().enumerate() {
        map[slot as usize] = s.csr_to_slot[csr_map[e] as usize];
    }
    map
}

/// Edge values of S (in `order`, [`GraphHandle::value_len`] of S) into the same `order` of Sᵀ
/// (`dst` sized for `g.transpose()`): `dst[i] = src[map[i]]`, 0 at slots without an edge.
/// Map and Sᵀ are built on first use; later calls only launch the gather.
pub fn transpose_values(g: &GraphHandle, order: ValueOrder, src: &DeviceVec<f32>, dst: &mut DeviceVec<f32>) -> Result<()> {
    let gpu = g.gpu()?;
    check_len("transpose_values: the source", src.len(), g.value_len(order)?, order)?;
    let t = g.transpose()?;
    let n = t.value_len(order)?;
    check_len("transpose_values: the destination (sized for the transpose)", dst.len(), n, order)?;
    let map = g.transpose_map(order)?;
    let n = count_u32(n, "transpose_values")?;
    let args = GatherValuesArgs { n, map: map.arg(gpu), src: src.arg(gpu), dst: dst.arg_mut(gpu) };
    // SAFETY: map and dst hold n entries (Sᵀ's values in `order`),
    // every map entry is u32::MAX or a slot of S in `order`, which is below src.len() (checked
    // above); src and dst are distinct buffers (a shared and a unique borrow).
    unsafe { gather_values_f32.launch(gpu, Shape::linear(grid(gpu, n), BLOCK, 0), &args) }
}

/// CSR-ordered edge values (`nnz`) into the ME-BCRS (k = 8) slots of `dst`, in f32 or f16
/// (`F16 = true`): what TC8 SpMM reads, for callers that keep their edge values compact in CSR
/// order. Only edge slots are written: `dst` must hold zeros elsewhere (allocate it zeroed and
/// reuse it). Needs a CSR without repeated entries (they would share a slot).
pub fn scatter_to_mebcrs<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits + Clone + Default + Unpin>(
    g: &GraphHandle,
    src: &DeviceVec<f32>,
    dst: &mut DeviceVec<T>,
) -> Result<()> {
    let gpu = g.gpu()?;
    let f16 = match std::mem::size_of::<T>() {
        4 => false,
        2 => true,
        _ => return Err(Error::Unsupported("scatter_to_mebcrs: f32 or f16 slots only".into())),
    };
    let nnz = g.csr().nnz();
    check_len("scatter_to_mebcrs: the source", src.len(), nnz, ValueOrder::Csr)?;
    check_len("scatter_to_mebcrs: the destination", dst.len(), g.value_len(ValueOrder::MeBcrs)?, ValueOrder::MeBcrs)?;
    if nnz == 0 {
        return Ok(());
    }
    let map = g.device_csr_to_slot()?;
    let n = count_u32(nnz, "scatter_to_mebcrs")?;
    let (slot_of, src, dst) = (map.slots().arg(gpu), src.arg(gpu), dst.arg_mut(gpu));
    let shape = Shape::linear(grid(gpu, n), BLOCK, 0);
    // SAFETY: the slot map has nnz entries, each a slot below the ME-BCRS value count that dst
    // holds (checked above); src holds nnz values; dst's elements are f16 or f32 as its size
    // says (checked above).
    unsafe {
        if f16 {
            scatter_values_f16.launch(gpu, shape, &ScatterValuesF16Args { n, slot_of, src, dst: dst.cast() })
        } else {
            scatter_values_f32.launch(gpu, shape, &ScatterValuesArgs { n, slot_of, src, dst: dst.cast() })
        }
    }
}

/// ME-BCRS-ordered edge values (k = 8, f32) back into CSR order: `dst[e] = src[slot of e]`
/// (`nnz` values), the inverse of [`scatter_to_mebcrs`]. For values kept in the tensor-core
/// kernels' order that a CSR kernel is also to read (`SpmmOp::fix`).
pub fn gather_from_mebcrs(g: &GraphHandle, src: &DeviceVec<f32>, dst: &mut DeviceVec<f32>) -> Result<()> {
    let gpu = g.gpu()?;
    let nnz = g.csr().nnz();
    check_len("gather_from_mebcrs: the source", src.len(), g.value_len(ValueOrder::MeBcrs)?, ValueOrder::MeBcrs)?;
    check_len("gather_from_mebcrs: the destination", dst.len(), nnz, ValueOrder::Csr)?;
    if nnz == 0 {
        return Ok(());
    }
    let map = g.device_csr_to_slot()?;
    let n = count_u32(nnz, "gather_from_mebcrs")?;
    let args = GatherValuesArgs { n, map: map.slots().arg(gpu), src: src.arg(gpu), dst: dst.arg_mut(gpu) };
    // SAFETY: the slot map and dst hold nnz entries; every slot is below the ME-BCRS value count
    // src holds (checked above); src and dst are distinct buffers (a shared and a unique borrow).
    unsafe { gather_values_f32.launch(gpu, Shape::linear(grid(gpu, n), BLOCK, 0), &args) }
}

/// Host counterpart of [`transpose_values`] in CSR order: S's values (`nnz`, CSR order) in the
/// CSR order of Sᵀ. Needs a canonical CSR, like the device path.
pub fn transpose_values_cpu<T: Copy + Send + Sync>(g: &GraphHandle, src: &[T]) -> Result<Vec<T>> {
    if src.len() != g.csr().nnz() {
        return Err(Error::Shape(format!("transpose_values_cpu: {} values for {} nonzeros", src.len(), g.csr().nnz())));
    }
    let map = g.transpose_map_host(ValueOrder::Csr)?;
    Ok(map.par_iter().map(|&e| src[e as usize]).collect())
}

/// `dst = f16(src)` element-wise (round to nearest even), same length; on the device the
/// buffers live on (`gpu`). E.g. edge values computed in f32 (SDDMM, softmax) for f16 SpMM.
pub fn cast_to_f16(gpu: &Gpu, src: &DeviceVec<f32>, dst: &mut DeviceVec<half::f16>) -> Result<()> {
    if src.len() != dst.len() {
        return Err(Error::Shape(format!("cast_to_f16: {} values into a buffer of {}", src.len(), dst.len())));
    }
    let (s, d) = (src.arg(gpu), dst.arg_mut(gpu));
    cast_raw(gpu, src.len(), s, d.cast())
}

/// `dst = f16(src)` for matrices of the same shape, padding included (so zero padding stays zero).
pub fn cast_matrix_to_f16(src: &DeviceMatrix<f32>, dst: &mut DeviceMatrix<half::f16>) -> Result<()> {
    if (src.rows, src.cols) != (dst.rows, dst.cols) {
        return Err(Error::Shape(format!("cast_matrix_to_f16: {}x{} into {}x{}", src.rows, src.cols, dst.rows, dst.cols)));
    }
    if !std::sync::Arc::ptr_eq(src.gpu(), dst.gpu()) {
        return Err(Error::Unsupported("cast_matrix_to_f16: the matrices live on different GPUs".into()));
    }
    let gpu = src.gpu().clone();
    debug_assert_eq!(src.slice().len(), dst.slice().len());
    cast_raw(&gpu, src.slice().len(), src.arg(), dst.arg_mut().cast())
}

/// Cast `n` f32 at `src` to f16 (bits) at `dst`.
fn cast_raw(gpu: &Gpu, n: usize, src: Ptr<f32>, dst: PtrMut<u16>) -> Result<()> {
    let n = count_u32(n, "cast_to_f16")?;
    let args = CastF16Args { n, src, dst };
    // SAFETY: both addresses are whole allocations (16-byte aligned, as
    // the kernel's vector accesses need) of n f32 and n f16, and distinct buffers.
    unsafe { cast_f32_f16.launch(gpu, Shape::linear(grid(gpu, n / 8), BLOCK, 0), &args) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Csr;

    #[test]
    fn mebcrs_map_points_at_the_same_edge() {
        let s = Csr::from_triplets(10, 10, &[(0, 3, 1.0), (0, 9, 2.0), (4, 3, 3.0), (9, 0, 4.0), (7, 7, 5.0)]).unwrap();
        let (t, csr_map) = crate::graph::ops::transpose_with_map(&s);
        let (ms, mt) = (MeBcrs::from_csr(&s, 8).unwrap(), MeBcrs::from_csr(&t, 8).unwrap());
        let map = transpose_map_mebcrs(&ms, &mt, &csr_map);
        assert_eq!(map.len(), mt.values.len());
        for (slot, &m) in map.iter().enumerate() {
            if m == u32::MAX {
                assert_eq!(mt.values[slot], 0.0, "slot {slot} holds an edge but maps nowhere");
                continue;
            }
            let (r, c) = mt.slot_position(slot).expect("an edge slot is inside the matrix");
            assert_eq!(ms.slot_position(m as usize), Some((c as usize, r as u32)));
            assert_eq!(mt.values[slot], ms.values[m as usize]);
        }
        assert_eq!(map.iter().filter(|&&m| m != u32::MAX).count(), 5);
    }

    #[test]
    fn length_check_allows_the_one_element_buffer_of_an_empty_graph() {
        assert!(check_len("x", 1, 0, ValueOrder::Csr).is_ok());
        assert!(check_len("x", 3, 3, ValueOrder::Csr).is_ok());
        assert!(matches!(check_len("x", 4, 3, ValueOrder::MeBcrs), Err(Error::Shape(_))));
    }
}
