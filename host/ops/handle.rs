//! A graph handle: the CSR on the host plus every translation and upload made from it, built on
//! first use and kept, so repeated calls (training epochs, benchmark repetitions) pay once.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::format::{MeBcrs, Sgt};
use crate::gpu::csr::DeviceCsr;
use crate::gpu::translate::{DeviceMeBcrsParts, mebcrs_on_device, sgt_on_gpu};
use crate::gpu::{DeviceVec, Gpu};
use crate::graph::reorder::{Reorder, reorder};
use crate::graph::{Csr, Permutation};
use crate::ops::ValueOrder;
use crate::ops::permute::Reordering;

type Cache = Mutex<HashMap<(TypeId, u64), Arc<dyn Any + Send + Sync>>>;

pub struct GraphHandle {
    csr: Arc<Csr>,
    gpu: Option<Arc<Gpu>>,
    translate: Translate,
    cache: Cache,
    /// Set for a reordered handle: `csr` is P S Pᵀ of the graph S it was made from.
    reordering: Option<Arc<Reordering>>,
}

/// [`GraphHandle::reordered`] of one method.
struct ReorderedHandle(Arc<GraphHandle>);

/// The row of every nonzero (row-sorted COO) on the device: what the nnz-balanced HP kernels
/// read to know which row a nonzero belongs to without searching `row_ptr`.
pub struct DeviceCooRows(pub DeviceVec<u32>);

/// ME-BCRS (k = 8) on the device, shared by TC8 SpMM and TC8 SDDMM: window pointers, vector
/// columns, f32 values and the slot of every CSR edge (f16 values are made on first f16 use,
/// see `device_mebcrs_f16`).
pub type DeviceMeBcrs = DeviceMeBcrsParts;

/// Where a handle with a GPU translates its formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Translate {
    /// On the GPU (the product path: ME-BCRS in milliseconds where the CPU takes seconds on
    /// large graphs); the host copy, where one is needed, is downloaded from it.
    Gpu,
    /// On the CPU with rayon (no GPU, and the reference the GPU translation is tested against).
    Cpu,
}

/// ME-BCRS (k = 8) values in f16, for the f16 tensor-core kernels.
pub struct DeviceMeBcrsF16(pub DeviceVec<half::f16>);

/// The ME-BCRS (k = 8) slot of every CSR nonzero, for outputs written in ME-BCRS order: the
/// translation's own array (shared, not copied: 4 bytes an entry).
pub struct DeviceCsrToSlot(Arc<DeviceMeBcrs>);

impl DeviceCsrToSlot {
    pub fn slots(&self) -> &DeviceVec<u32> {
        &self.0.csr_to_slot
    }
}

/// Sᵀ's handle and, for every CSR nonzero of Sᵀ, the CSR nonzero of S holding the same edge.
struct Transposed {
    handle: Arc<GraphHandle>,
    csr_map: Arc<Vec<u32>>,
}

/// [`GraphHandle::mebcrs_win_ptr`].
struct MeBcrsWinPtr(Arc<Vec<u32>>);

/// [`GraphHandle::transpose_map_host`] of one order.
struct HostTransposeMap(Arc<Vec<u32>>);

/// [`GraphHandle::transpose_map`] of one order.
struct DeviceTransposeMap(Arc<DeviceVec<u32>>);

fn order_key(order: ValueOrder) -> u64 {
    match order {
        ValueOrder::Csr => 0,
        ValueOrder::MeBcrs => 1,
    }
}

impl GraphHandle {
    /// A handle for `csr`; `gpu = None` restricts it to CPU implementations.
    pub fn new(csr: Csr, gpu: Option<Arc<Gpu>>) -> Self {
        GraphHandle { csr: Arc::new(csr), gpu, translate: Translate::Gpu, cache: Mutex::new(HashMap::new()), reordering: None }
    }

    /// Translate formats on the CPU even when the handle has a GPU (tests, comparisons).
    pub fn with_translation(mut self, how: Translate) -> Self {
        self.translate = how;
        self
    }

    /// Run a translation, timed on the handle's GPU's setup clock (nothing to time without one:
    /// CPU training reads the CSR as it is).
    fn timed<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.gpu {
            Some(gpu) => gpu.clock().translating(f),
            None => f(),
        }
    }

    /// The GPU formats are translated on, if any.
    fn translating_gpu(&self) -> Option<&Arc<Gpu>> {
        self.gpu.as_ref().filter(|_| self.translate == Translate::Gpu)
    }

    /// A handle for `csr` whose kernels run on it reordered by `how` (RCM, community, degree;
    /// see `graph::reorder`): P is computed once here, the handle keeps S' = P S Pᵀ (every
    /// format is translated from it) and P. `ops::spmm` / `spmm_device` take X and return Y in
    /// `csr`'s own node order: they permute X's rows in (X' = P X) and Y's rows back
    /// (Y = Pᵀ Y'); the device scratch for that is allocated once per feature width.
    /// `Reorder::Identity` gives a plain handle. [`GraphHandle::csr`] is S'; the permutation
    /// and its one-time cost are in [`GraphHandle::reordering`]. Other ops (SDDMM, per-call
    /// edge values) refuse reordered handles.
    pub fn with_reorder(csr: Csr, gpu: Option<Arc<Gpu>>, how: Reorder) -> Result<Self> {
        if how == Reorder::Identity {
            return Ok(GraphHandle::new(csr, gpu));
        }
        let t = std::time::Instant::now();
        let perm = reorder(&csr, how)?;
        let order_ms = t.elapsed().as_secs_f64() * 1e3;
        Self::permuted(csr, gpu, perm, Some(how), order_ms)
    }

    /// [`GraphHandle::with_reorder`] with a given permutation (`perm.new_to_old()[i]` is the
    /// node of `csr` placed at i).
    pub fn with_permutation(csr: Csr, gpu: Option<Arc<Gpu>>, perm: Permutation) -> Result<Self> {
        Self::permuted(csr, gpu, perm, None, 0.0)
    }

    fn permuted(csr: Csr, gpu: Option<Arc<Gpu>>, perm: Permutation, method: Option<Reorder>, order_ms: f64) -> Result<Self> {
        let t = std::time::Instant::now();
        let reordered = perm.apply_to_csr(&csr)?;
        let apply_ms = t.elapsed().as_secs_f64() * 1e3;
        let mut h = GraphHandle::new(reordered, gpu);
        h.reordering = Some(Arc::new(Reordering { method, perm, order_ms, apply_ms }));
        Ok(h)
    }

    /// This (plain) handle's graph reordered by `how`, as a handle built once and kept here
    /// ([`GraphHandle::with_reorder`] on a copy of the CSR, same GPU).
    pub fn reordered(&self, how: Reorder) -> Result<Arc<GraphHandle>> {
        if self.reordering.is_some() {
            return Err(Error::Unsupported("reordering a handle that is already reordered".into()));
        }
        let key = match how {
            Reorder::Identity => 0,
            Reorder::Rcm => 1,
            Reorder::Community => 2,
            Reorder::Degree => 3,
        };
        Ok(self
            .cached(key, || Ok(ReorderedHandle(Arc::new(GraphHandle::with_reorder((*self.csr).clone(), self.gpu.clone(), how)?))))?
            .0
            .clone())
    }

    /// The permutation of a reordered handle (`None` for a plain one).
    pub fn reordering(&self) -> Option<&Reordering> {
        self.reordering.as_deref()
    }

    /// `Error::Unsupported` for a reordered handle: for ops that would see the reordered
    /// graph's node and edge order instead of the caller's.
    pub fn require_original_order(&self, op: &str) -> Result<()> {
        match self.reordering {
            Some(_) => Err(Error::Unsupported(format!("{op} on a reordered graph handle (only SpMM permutes its inputs and outputs)"))),
            None => Ok(()),
        }
    }

    /// The matrix the kernels run on: the graph given to [`GraphHandle::new`], or P S Pᵀ for a
    /// reordered handle.
    pub fn csr(&self) -> &Csr {
        &self.csr
    }

    pub fn gpu(&self) -> Result<&Arc<Gpu>> {
        self.gpu.as_ref().ok_or_else(|| Error::NoGpu("this graph handle was created without a GPU".into()))
    }

    pub fn has_gpu(&self) -> bool {
        self.gpu.is_some()
    }

    /// The value of type `T` stored under `key`, built by `build` on first use.
    /// Each format picks its own `T` (and `key` for variants such as block width), so adding a
    /// format never touches this struct.
    pub fn cached<T: Any + Send + Sync>(&self, key: u64, build: impl FnOnce() -> Result<T>) -> Result<Arc<T>> {
        let id = (TypeId::of::<T>(), key);
        if let Some(v) = self.cache.lock().expect("graph cache poisoned").get(&id) {
            return Ok(v.clone().downcast::<T>().expect("cache entry type matches its key"));
        }
        // Build outside the lock: translations can take a while and may use rayon.
        let value = Arc::new(build()?);
        self.cache.lock().expect("graph cache poisoned").insert(id, value.clone());
        Ok(value)
    }

    /// The value of type `T` under `key` where it was built already (nothing is built).
    fn peek<T: Any + Send + Sync>(&self, key: u64) -> Option<Arc<T>> {
        let v = self.cache.lock().expect("graph cache poisoned").get(&(TypeId::of::<T>(), key)).cloned()?;
        Some(v.downcast::<T>().expect("cache entry type matches its key"))
    }

    /// Frees the device copy of the graph's own ME-BCRS values where one was made (4 bytes a
    /// slot, 8 slots a vector: on a scattered graph 8x the entries), for a handle whose every
    /// product passes its values per call: a model's fixed adjacency once it holds its own
    /// copies ([`SpmmOp::fix`](crate::ops::nn::spmm::SpmmOp::fix)). Its own TC8 products and
    /// TC8 SDDMM, and downloads of its ME-BCRS, refuse afterwards.
    pub fn release_own_values(&self) {
        if let Some(m) = self.peek::<DeviceMeBcrs>(8) {
            m.release_values();
        }
    }

    /// ME-BCRS with `k` vectors per block, translated once per graph: on the GPU when the
    /// handle has one (downloaded from [`GraphHandle::device_mebcrs`]'s arrays for k = 8), else
    /// on the CPU.
    pub fn mebcrs(&self, k: usize) -> Result<Arc<MeBcrs>> {
        self.cached(k as u64, || {
            self.timed(|| match self.translating_gpu() {
                Some(gpu) if k == 8 => self.device_mebcrs()?.download(gpu, &self.csr),
                Some(gpu) => mebcrs_on_device(gpu, &self.csr, &*self.device_csr()?, k)?.download(gpu, &self.csr),
                None => MeBcrs::from_csr(&self.csr, k),
            })
        })
    }

    /// SGT with block width `block_w` (8 SpMM, 16 SDDMM), translated once per graph (on the
    /// GPU when the handle has one).
    pub fn sgt(&self, block_w: usize) -> Result<Arc<Sgt>> {
        self.cached(block_w as u64, || {
            self.timed(|| match self.translating_gpu() {
                Some(gpu) => sgt_on_gpu(gpu, &self.csr, block_w),
                None => Sgt::from_csr(&self.csr, block_w),
            })
        })
    }

    /// ME-BCRS (k = 8) on the device for every TC8 kernel: translated there from the uploaded
    /// CSR (or uploaded from the CPU translation), once.
    pub fn device_mebcrs(&self) -> Result<Arc<DeviceMeBcrs>> {
        let gpu = self.gpu()?.clone();
        self.cached(8, || {
            self.timed(|| match self.translate {
                Translate::Gpu => mebcrs_on_device(&gpu, &self.csr, &*self.device_csr()?, 8),
                Translate::Cpu => DeviceMeBcrsParts::upload(&gpu, &*self.mebcrs(8)?),
            })
        })
    }

    /// ME-BCRS (k = 8) values as f16.
    pub fn device_mebcrs_f16(&self) -> Result<Arc<DeviceMeBcrsF16>> {
        let gpu = self.gpu()?.clone();
        self.cached(8, || {
            self.timed(|| {
                let h: Vec<half::f16> = self.mebcrs(8)?.values.iter().map(|&v| half::f16::from_f32(v)).collect();
                Ok(DeviceMeBcrsF16(DeviceVec::upload(&gpu, &h)?))
            })
        })
    }

    /// CSR nonzero -> ME-BCRS (k = 8) slot, on the device.
    pub fn device_csr_to_slot(&self) -> Result<Arc<DeviceCsrToSlot>> {
        self.cached(8, || Ok(DeviceCsrToSlot(self.device_mebcrs()?)))
    }

    /// The COO row array uploaded to the device (shared by HP-SpMM and HP-SDDMM).
    pub fn device_coo_rows(&self) -> Result<Arc<DeviceCooRows>> {
        let gpu = self.gpu()?.clone();
        self.cached(0, || self.timed(|| Ok(DeviceCooRows(DeviceVec::upload(&gpu, &crate::format::coo::Coo::from_csr(&self.csr).row)?))))
    }

    /// The CSR uploaded to the device.
    pub fn device_csr(&self) -> Result<Arc<DeviceCsr>> {
        let gpu = self.gpu()?.clone();
        self.cached(0, || DeviceCsr::upload(&gpu, &self.csr))
    }

    /// Number of edge values the graph has in `order`: nnz (CSR), or `8 * n_vectors` of the
    /// ME-BCRS (k = 8) translation (made on first use: on the device when the handle translates
    /// there, never downloaded for this).
    pub fn value_len(&self, order: ValueOrder) -> Result<usize> {
        Ok(match order {
            ValueOrder::Csr => self.csr.nnz(),
            ValueOrder::MeBcrs if self.translating_gpu().is_some() => 8 * self.device_mebcrs()?.n_vectors,
            ValueOrder::MeBcrs => self.mebcrs(8)?.values.len(),
        })
    }

    /// A device copy of the ME-BCRS (k = 8) values, for a caller that owns and may change its
    /// edge values (a model's Â): copied on the device, not downloaded and uploaded again.
    pub fn device_mebcrs_values(&self) -> Result<DeviceVec<f32>> {
        let gpu = self.gpu()?.clone();
        let m = self.device_mebcrs()?;
        m.with_values(|v| {
            let mut copy = DeviceVec::zeros(&gpu, v.len())?;
            gpu.stream().memcpy_dtod(v.slice(), copy.slice_mut()).map_err(|e| Error::cuda("ME-BCRS values copy", e))?;
            Ok(copy)
        })
    }

    /// ME-BCRS (k = 8) window pointers on the host (what TC8 work lists are planned from):
    /// on the GPU path only this array is downloaded, not the whole translation.
    pub fn mebcrs_win_ptr(&self) -> Result<Arc<Vec<u32>>> {
        let p = self.cached(8, || {
            Ok(MeBcrsWinPtr(Arc::new(match self.translating_gpu() {
                Some(gpu) => crate::gpu::translate::download_n(
                    gpu,
                    &self.device_mebcrs()?.win_ptr,
                    self.csr.n_rows().div_ceil(crate::format::MEBCRS_WINDOW) + 1,
                )?,
                None => self.mebcrs(8)?.win_ptr.clone(),
            })))
        })?;
        Ok(p.0.clone())
    }

    fn transposed(&self) -> Result<Arc<Transposed>> {
        self.cached(0, || {
            let (t, map) = self.timed(|| crate::graph::ops::transpose_with_map(&self.csr));
            // Sᵀ of a reordered handle is P Sᵀ Pᵀ: the same permutation applies.
            let mut handle = GraphHandle::new(t, self.gpu.clone()).with_translation(self.translate);
            handle.reordering = self.reordering.clone();
            Ok(Transposed { handle: Arc::new(handle), csr_map: Arc::new(map) })
        })
    }

    /// The handle of Sᵀ on the same GPU (its values are S's, transposed), built once and kept:
    /// its own translations and uploads are cached in it like in any handle.
    pub fn transpose(&self) -> Result<Arc<GraphHandle>> {
        Ok(self.transposed()?.handle.clone())
    }

    /// For every value slot of Sᵀ in `order`, the slot of S in the same `order` that holds the
    /// same edge; `u32::MAX` for slots that hold no edge (ME-BCRS padding). Built on the host
    /// once. Needs a canonical CSR (no repeated entries, which would share ME-BCRS slots).
    pub fn transpose_map_host(&self, order: ValueOrder) -> Result<Arc<Vec<u32>>> {
        let map = self.cached(order_key(order), || {
            if !self.csr.is_canonical() {
                return Err(Error::Unsupported(
                    "transposing edge values needs a canonical CSR (sorted, no repeated entries): canonicalise the graph first".into(),
                ));
            }
            let t = self.transposed()?;
            self.timed(|| {
                Ok(HostTransposeMap(match order {
                    ValueOrder::Csr => t.csr_map.clone(),
                    ValueOrder::MeBcrs => {
                        Arc::new(crate::ops::values::transpose_map_mebcrs(&*self.mebcrs(8)?, &*t.handle.mebcrs(8)?, &t.csr_map))
                    }
                }))
            })
        })?;
        Ok(map.0.clone())
    }

    /// [`GraphHandle::transpose_map_host`] uploaded once (what `ops::values::transpose_values`
    /// gathers with).
    pub fn transpose_map(&self, order: ValueOrder) -> Result<Arc<DeviceVec<u32>>> {
        let gpu = self.gpu()?.clone();
        let map =
            self.cached(order_key(order), || Ok(DeviceTransposeMap(Arc::new(DeviceVec::upload(&gpu, &self.transpose_map_host(order)?)?))))?;
        Ok(map.0.clone())
    }
}
