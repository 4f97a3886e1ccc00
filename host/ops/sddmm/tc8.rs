//! Launcher of `kernels-gpu/src/sddmm/tc8.rs`: ME-BCRS (k = 8) in 16-vector output blocks.

use crate::error::Result;
use crate::gpu::DeviceVec;
use crate::gpu::abi::sddmm::{Tc8SddmmArgs, sddmm_tc8_f16, sddmm_tc8_tf32};
use crate::gpu::launch::{Ptr, Shape};
use crate::ops::sddmm::ValueOrder;
use crate::ops::{FeaturesRef, GraphHandle};

/// Vectors per output block (two ME-BCRS blocks of 8).
const VECTORS_PER_ITEM: u32 = 16;
const WARPS: u32 = 4;

/// What SDDMM adds to the shared ME-BCRS upload: the inverse slot map and the work items.
struct DeviceTc8Sddmm {
    slot_to_csr: DeviceVec<u32>,
    item_win: DeviceVec<u32>,
    item_v0: DeviceVec<u32>,
    n_items: u32,
    n_slots: usize,
    /// Some slot holds two CSR nonzeros (a CSR with repeated entries): CSR order would write
    /// one of them only, so that order is refused.
    repeated_entries: bool,
}

/// One item per 16 vectors of every window.
pub fn items(win_ptr: &[u32]) -> (Vec<u32>, Vec<u32>) {
    let (mut win, mut v0) = (Vec::new(), Vec::new());
    for w in 0..win_ptr.len() - 1 {
        let mut v = win_ptr[w];
        while v < win_ptr[w + 1] {
            win.push(w as u32);
            v0.push(v);
            v += VECTORS_PER_ITEM;
        }
    }
    (win, v0)
}

/// Number of values the ME-BCRS order holds for this graph (`8 * n_vectors`; the same as
/// `g.value_len(ValueOrder::MeBcrs)`).
pub fn mebcrs_len(g: &GraphHandle) -> Result<usize> {
    g.value_len(ValueOrder::MeBcrs)
}

fn format(g: &GraphHandle) -> Result<std::sync::Arc<DeviceTc8Sddmm>> {
    let gpu = g.gpu()?;
    g.cached(8, || {
        let m = g.mebcrs(8)?;
        let mut slot_to_csr = vec![u32::MAX; m.values.len()];
        let mut repeated_entries = false;
        for (e, &s) in m.csr_to_slot.iter().enumerate() {
            repeated_entries |= slot_to_csr[s as usize] != u32::MAX;
            slot_to_csr[s as usize] = e as u32;
        }
        let (win, v0) = items(&m.win_ptr);
        Ok(DeviceTc8Sddmm {
            slot_to_csr: DeviceVec::upload(gpu, &slot_to_csr)?,
            item_win: DeviceVec::upload(gpu, &win)?,
            item_v0: DeviceVec::upload(gpu, &v0)?,
            n_items: win.len() as u32,
            n_slots: m.values.len(),
            repeated_entries,
        })
    })
}

pub fn sddmm_tc8(g: &GraphHandle, a: FeaturesRef<'_>, b: FeaturesRef<'_>, out: &mut DeviceVec<f32>, order: ValueOrder) -> Result<()> {
    let gpu = g.gpu()?;
    let f = format(g)?;
    let m = g.device_mebcrs()?;
    // A and B in the kernel's precision, read as 32-bit words.
    let (kernel, a_words, b_words, ld): (_, Ptr<u32>, Ptr<u32>, _) = match (a, b) {
        (FeaturesRef::F16(a), FeaturesRef::F16(b)) => (sddmm_tc8_f16, a.arg().cast(), b.arg().cast(), a.ld),
        (FeaturesRef::F32(a), FeaturesRef::F32(b)) => (sddmm_tc8_tf32, a.arg().cast(), b.arg().cast(), a.ld),
        _ => return Err(crate::Error::Unsupported("SDDMM: A and B must have the same storage type".into())),
    };
    let need = match order {
        ValueOrder::Csr => g.csr().nnz(),
        ValueOrder::MeBcrs => f.n_slots,
    };
    if out.len() < need {
        return Err(crate::Error::Shape(format!("SDDMM output holds {} values, {order:?} order needs {need}", out.len())));
    }
    if order == ValueOrder::Csr && f.repeated_entries {
        return Err(crate::Error::Unsupported(
            "TC8 SDDMM into CSR order needs a CSR without repeated entries (canonicalise it, or use Tc16 / Hp)".into(),
        ));
    }
    let slot_to_csr = match order {
        ValueOrder::Csr => f.slot_to_csr.arg(gpu),
        ValueOrder::MeBcrs => Ptr::null(),
    };
    let args = Tc8SddmmArgs {
        n_items: f.n_items,
        n_rows: g.csr().n_rows() as u32,
        ld: ld as u32,
        win_ptr: m.win_ptr.arg(gpu),
        vec_col: m.vec_col.arg(gpu),
        // Released only by whoever runs every product on this graph with values of its own.
        values: m.with_values(|v| Ok(v.arg(gpu)))?,
        slot_to_csr,
        item_win: f.item_win.arg(gpu),
        item_v0: f.item_v0.arg(gpu),
        a: a_words,
        b: b_words,
        out: out.arg_mut(gpu),
    };
    // SAFETY: the ME-BCRS arrays and items come from this graph, A and B share the padded
    // stride ld (multiple of 8: the 16-byte runs stay aligned and in bounds),
    // and `out` was checked to hold what `order` writes.
    unsafe { kernel.launch(gpu, Shape::linear(f.n_items.div_ceil(WARPS), 32 * WARPS, 0), &args) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn items_cover_every_vector_once() {
        let (w, v0) = super::items(&[0, 0, 20, 36, 37]);
        assert_eq!(w, vec![1, 1, 2, 3]);
        assert_eq!(v0, vec![0, 16, 20, 36]);
    }
}
