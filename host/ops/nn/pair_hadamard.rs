//! A batch of node pairs read by index: for pair p = (u_p, v_p), h[p] = z[u_p] ⊙ z[v_p] (the
//! MLP link decoder's input), or its row sum z[u_p] . z[v_p] (the dot decoder's score) when
//! the output has one column; backward dz[x] = sum over the pairs with x as an end of
//! dh[p] ⊙ z[the other end] (a one-column dh broadcast over z's width). A link training step's
//! pairs change every step: as plain index arrays (u, v, and a by-node index built by a
//! counting sort, O(P + n)) they need no sparse pattern, no sort and no translation, and the
//! backward sums every node's entries in a fixed order without atomics (deterministic).
//!
//! CPU (the reference, generic over f32 / f64) and the launchers of
//! `kernels-gpu/src/nn/pair_hadamard.rs`.

use rayon::prelude::*;

use super::{check_matrix_64, elementwise_shape, row_shape};
use crate::error::{Error, Result};
use crate::gpu::abi::nn::{
    PairHadamardArgs, PairHadamardBackwardArgs, pair_hadamard_backward_f32, pair_hadamard_f32, pair_hadamard_sum_f32,
};
use crate::gpu::{DeviceMatrix, DeviceVec, Gpu};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat};
use crate::ops::backend::cuda::CudaBackend;
use crate::util::Real;

/// At most this many pairs in a batch (entries 2p | end below 2^32, and u32 edge ids below
/// 2^31 for the by-node index).
pub const MAX_PAIRS: usize = (1 << 30) - 1;

/// A batch's pairs as the ops read them: the two ends, and per node its entries (2p | end,
/// end 0 for u_p and 1 for v_p) in pair order. Built only by [`PairIndex::build`], which
/// checks every id: the kernels index z with them unchecked.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PairIndex {
    n: usize,
    u: Vec<u32>,
    v: Vec<u32>,
    row_ptr: Vec<u32>,
    ends: Vec<u32>,
}

impl PairIndex {
    /// The index of the pairs of `lists` in turn (a step's positives, then its negatives) on
    /// `n` nodes. A pair out of range is refused; a pair given twice is two pairs, and a pair
    /// (x, x) two entries of node x.
    pub fn new(n: usize, lists: &[&[[u32; 2]]]) -> Result<Self> {
        let mut ix = PairIndex::default();
        ix.build(n, lists)?;
        Ok(ix)
    }

    /// [`PairIndex::new`] into this index's buffers (a step a batch, no reallocation once the
    /// largest batch has been seen).
    pub fn build(&mut self, n: usize, lists: &[&[[u32; 2]]]) -> Result<()> {
        let pairs: usize = lists.iter().map(|l| l.len()).sum();
        if n >= 1 << 31 {
            return Err(Error::Unsupported(format!("pair batch: {n} nodes (at most 2^31 - 1)")));
        }
        if pairs > MAX_PAIRS {
            return Err(Error::Unsupported(format!("pair batch: {pairs} pairs (at most 2^30 - 1)")));
        }
        if let Some(p) = lists.iter().flat_map(|l| l.iter()).find(|p| p[0] as usize >= n || p[1] as usize >= n) {
            return Err(Error::Unsupported(format!("pair ({}, {}) is out of range for {n} nodes", p[0], p[1])));
        }
        self.n = n;
        self.u.clear();
        self.v.clear();
        for l in lists {
            self.u.extend(l.iter().map(|p| p[0]));
            self.v.extend(l.iter().map(|p| p[1]));
        }
        // Counting sort of the 2P ends by node: counts, prefix sums, then the entries in pair
        // order (so every node's entries are sorted by pair, end 0 before end 1).
        self.row_ptr.clear();
        self.row_ptr.resize(n + 1, 0);
        for (&a, &b) in self.u.iter().zip(&self.v) {
            self.row_ptr[a as usize + 1] += 1;
            self.row_ptr[b as usize + 1] += 1;
        }
        for i in 0..n {
            self.row_ptr[i + 1] += self.row_ptr[i];
        }
        self.ends.clear();
        self.ends.resize(2 * pairs, 0);
        // `row_ptr[x]` is advanced past each entry placed, then shifted back: no second array.
        for (p, (&a, &b)) in self.u.iter().zip(&self.v).enumerate() {
            for (end, x) in [(0, a), (1, b)] {
                let at = &mut self.row_ptr[x as usize];
                self.ends[*at as usize] = (2 * p as u32) | end;
                *at += 1;
            }
        }
        for i in (1..=n).rev() {
            self.row_ptr[i] = self.row_ptr[i - 1];
        }
        self.row_ptr[0] = 0;
        Ok(())
    }

    /// Nodes.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Pairs.
    pub fn len(&self) -> usize {
        self.u.len()
    }

    pub fn is_empty(&self) -> bool {
        self.u.is_empty()
    }

    pub fn u(&self) -> &[u32] {
        &self.u
    }

    pub fn v(&self) -> &[u32] {
        &self.v
    }

    /// n + 1 offsets into [`PairIndex::ends`].
    pub fn row_ptr(&self) -> &[u32] {
        &self.row_ptr
    }

    /// 2p | end per entry, grouped by node.
    pub fn ends(&self) -> &[u32] {
        &self.ends
    }
}

fn check_out(rows: usize, pairs: usize, z_cols: usize, out: (usize, usize), what: &str) -> Result<()> {
    if out.0 != rows || pairs > rows || (out.1 != z_cols && out.1 != 1) {
        return Err(Error::Shape(format!(
            "{what}: {pairs} pairs (capacity {rows}) of width {z_cols} with a {} x {} matrix (want {rows} x {z_cols} or {rows} x 1)",
            out.0, out.1
        )));
    }
    Ok(())
}

fn check_z(n: usize, rows: usize, what: &str) -> Result<()> {
    if rows != n {
        return Err(Error::Shape(format!("{what}: z has {rows} rows for a pair batch on {n} nodes")));
    }
    Ok(())
}

/// out[p] = z[u_p] ⊙ z[v_p] (out of z's width) or z[u_p] . z[v_p] (out of one column, summed
/// over the columns in order), for p below the index's pairs; out's other rows 0.
pub fn pair_hadamard_cpu<T: Real>(ix: &PairIndex, z: &HostMat<T>, out: &mut HostMat<T>) -> Result<()> {
    check_z(ix.n, z.rows, "pair_hadamard")?;
    check_out(out.rows, ix.len(), z.cols, (out.rows, out.cols), "pair_hadamard")?;
    let w = out.cols.max(1);
    let sum = out.cols == 1 && z.cols != 1;
    out.data.par_chunks_mut(w).enumerate().with_min_len(256).for_each(|(p, row)| {
        if p >= ix.len() {
            row.fill(T::zero());
            return;
        }
        let (a, b) = (z.row(ix.u[p] as usize), z.row(ix.v[p] as usize));
        if sum {
            row[0] = a.iter().zip(b).fold(T::zero(), |s, (&x, &y)| s + x * y);
        } else {
            for ((o, &x), &y) in row.iter_mut().zip(a).zip(b) {
                *o = x * y;
            }
        }
    });
    Ok(())
}

/// dz[x] (= or +=) sum over x's entries in order of dout[p] ⊙ z[other end] (dout of one
/// column: its value times the row).
pub fn pair_hadamard_backward_cpu<T: Real>(
    ix: &PairIndex,
    z: &HostMat<T>,
    dout: &HostMat<T>,
    accumulate: bool,
    dz: &mut HostMat<T>,
) -> Result<()> {
    check_z(ix.n, z.rows, "pair_hadamard_backward")?;
    check_out(dout.rows, ix.len(), z.cols, (dout.rows, dout.cols), "pair_hadamard_backward")?;
    if (dz.rows, dz.cols) != (z.rows, z.cols) {
        return Err(Error::Shape(format!("pair_hadamard_backward: dz is {} x {}, z {} x {}", dz.rows, dz.cols, z.rows, z.cols)));
    }
    let broadcast = dout.cols == 1 && z.cols != 1;
    let d = z.cols.max(1);
    dz.data.par_chunks_mut(d).enumerate().with_min_len(64).for_each(|(x, out)| {
        let mut acc = vec![T::zero(); out.len()];
        for &ent in &ix.ends[ix.row_ptr[x] as usize..ix.row_ptr[x + 1] as usize] {
            let p = (ent >> 1) as usize;
            let other = if ent & 1 == 0 { ix.v[p] } else { ix.u[p] };
            let zo = z.row(other as usize);
            if broadcast {
                let g = dout.data[p];
                for (a, &y) in acc.iter_mut().zip(zo) {
                    *a += g * y;
                }
            } else {
                for ((a, &g), &y) in acc.iter_mut().zip(dout.row(p)).zip(zo) {
                    *a += g * y;
                }
            }
        }
        for (o, a) in out.iter_mut().zip(acc) {
            *o = if accumulate { *o + a } else { a };
        }
    });
    Ok(())
}

/// A pair batch on the device at a capacity of `cap` pairs: the arrays of the last
/// [`PairIndex`] bound (`len` pairs).
pub struct DevicePairBatch {
    pub n: usize,
    pub cap: usize,
    pub len: usize,
    pub u: DeviceVec<u32>,
    pub v: DeviceVec<u32>,
    pub row_ptr: DeviceVec<u32>,
    pub ends: DeviceVec<u32>,
}

impl DevicePairBatch {
    /// Room for `cap` pairs on `n` nodes, holding none.
    pub fn with_capacity(gpu: &Gpu, n: usize, cap: usize) -> Result<Self> {
        if n >= 1 << 31 || cap > MAX_PAIRS {
            return Err(Error::Unsupported(format!("pair batch: {n} nodes, {cap} pairs (at most 2^31 - 1 and 2^30 - 1)")));
        }
        Ok(DevicePairBatch {
            n,
            cap,
            len: 0,
            u: DeviceVec::zeros(gpu, cap.max(1))?,
            v: DeviceVec::zeros(gpu, cap.max(1))?,
            row_ptr: DeviceVec::zeros(gpu, n + 1)?,
            ends: DeviceVec::zeros(gpu, 2 * cap.max(1))?,
        })
    }

    /// Queues the copies of `ix` into the batch (through pinned memory: returns without waiting).
    pub fn bind(&mut self, gpu: &Gpu, ix: &PairIndex) -> Result<()> {
        if ix.n != self.n || ix.len() > self.cap {
            return Err(Error::Shape(format!(
                "pair batch of {} pairs on {} nodes: {} pairs on {} nodes bound",
                self.cap,
                self.n,
                ix.len(),
                ix.n
            )));
        }
        gpu.copy_htod_pinned(self.u.ptr(gpu), ix.len(), |h: &mut [u32]| h.copy_from_slice(&ix.u))?;
        gpu.copy_htod_pinned(self.v.ptr(gpu), ix.len(), |h: &mut [u32]| h.copy_from_slice(&ix.v))?;
        gpu.copy_htod_pinned(self.row_ptr.ptr(gpu), ix.n + 1, |h: &mut [u32]| h.copy_from_slice(&ix.row_ptr))?;
        gpu.copy_htod_pinned(self.ends.ptr(gpu), ix.ends.len(), |h: &mut [u32]| h.copy_from_slice(&ix.ends))?;
        self.len = ix.len();
        Ok(())
    }
}

/// [`pair_hadamard_cpu`] on the device.
pub fn pair_hadamard(gpu: &Gpu, b: &DevicePairBatch, z: &DeviceMatrix<f32>, out: &mut DeviceMatrix<f32>) -> Result<()> {
    check_matrix_64(z, "pair_hadamard z")?;
    check_matrix_64(out, "pair_hadamard out")?;
    check_z(b.n, z.rows, "pair_hadamard")?;
    check_out(out.rows, b.len, z.cols, (out.rows, out.cols), "pair_hadamard")?;
    let sum = out.cols == 1 && z.cols != 1;
    let args = PairHadamardArgs {
        rows: out.rows as u32,
        pairs: b.len as u32,
        ld: z.ld as u32,
        out_ld: out.ld as u32,
        u: b.u.arg(gpu),
        v: b.v.arg(gpu),
        z: z.arg(),
        out: out.arg_mut(),
    };
    if out.rows == 0 {
        return Ok(());
    }
    // SAFETY: the first `len` ids of u and v were checked below n = z's rows when their index
    // was built; out holds `rows` padded rows of stride ld (the product: z's stride) or 8.
    unsafe {
        if sum {
            pair_hadamard_sum_f32.launch(gpu, row_shape(gpu, out.rows as u64, 1, 0), &args)
        } else {
            pair_hadamard_f32.launch(gpu, elementwise_shape(gpu, (out.rows * z.ld / 4) as u64), &args)
        }
    }
}

/// [`pair_hadamard_backward_cpu`] on the device.
pub fn pair_hadamard_backward(
    gpu: &Gpu,
    b: &DevicePairBatch,
    z: &DeviceMatrix<f32>,
    dout: &DeviceMatrix<f32>,
    accumulate: bool,
    dz: &mut DeviceMatrix<f32>,
) -> Result<()> {
    check_matrix_64(z, "pair_hadamard_backward z")?;
    check_matrix_64(dout, "pair_hadamard_backward dout")?;
    check_matrix_64(dz, "pair_hadamard_backward dz")?;
    check_z(b.n, z.rows, "pair_hadamard_backward")?;
    check_out(dout.rows, b.len, z.cols, (dout.rows, dout.cols), "pair_hadamard_backward")?;
    if (dz.rows, dz.cols) != (z.rows, z.cols) {
        return Err(Error::Shape(format!("pair_hadamard_backward: dz is {} x {}, z {} x {}", dz.rows, dz.cols, z.rows, z.cols)));
    }
    if b.n == 0 || z.ld == 0 {
        return Ok(());
    }
    let args = PairHadamardBackwardArgs {
        n: b.n as u32,
        ld: z.ld as u32,
        dout_ld: dout.ld as u32,
        broadcast: (dout.cols == 1 && z.cols != 1) as u32,
        u: b.u.arg(gpu),
        v: b.v.arg(gpu),
        row_ptr: b.row_ptr.arg(gpu),
        ends: b.ends.arg(gpu),
        z: z.arg(),
        dout: dout.arg(),
        accumulate: accumulate as u32,
        dz: dz.arg_mut(),
    };
    // A warp per (node, 32 float4 columns).
    let warps = b.n as u64 * (z.ld as u64 / 4).div_ceil(32);
    // SAFETY: row_ptr holds n + 1 offsets into ends (2 len entries, each 2p | end with p < len),
    // u and v ids below n = z's rows (checked when the index was built); dout holds `len` rows
    // or more; dz has z's shape and stride.
    unsafe { pair_hadamard_backward_f32.launch(gpu, row_shape(gpu, warps, 1, 0), &args) }
}

// -- the op on each backend --

pub trait PairHadamardOp: Backend {
    /// A batch of pairs where the ops read them.
    type PairBatch;
    /// Room for `cap` pairs on `n` nodes.
    fn pair_batch(&self, n: usize, cap: usize) -> Result<Self::PairBatch>;
    /// Rewrites `batch` with `ix` (at most its capacity; queued, no wait).
    fn bind_pair_batch(&self, batch: &mut Self::PairBatch, ix: &PairIndex) -> Result<()>;
    /// out (cap x d or cap x 1) = each pair's Hadamard product (or its row sum), rows past the
    /// batch's pairs 0.
    fn pair_hadamard(&self, batch: &Self::PairBatch, z: &Self::Mat, out: &mut Self::Mat) -> Result<()>;
    /// dz (= or +=) the gradient of z through [`PairHadamardOp::pair_hadamard`] from its
    /// output's gradient `dout`.
    fn pair_hadamard_backward(
        &self,
        batch: &Self::PairBatch,
        z: &Self::Mat,
        dout: &Self::Mat,
        accumulate: bool,
        dz: &mut Self::Mat,
    ) -> Result<()>;
}

/// The CPU's batch: the index itself, and its capacity.
pub struct HostPairBatch {
    pub cap: usize,
    pub ix: PairIndex,
}

impl<T: Real> PairHadamardOp for CpuBackend<T> {
    type PairBatch = HostPairBatch;
    fn pair_batch(&self, n: usize, cap: usize) -> Result<HostPairBatch> {
        if cap > MAX_PAIRS {
            return Err(Error::Unsupported(format!("pair batch: {cap} pairs (at most 2^30 - 1)")));
        }
        Ok(HostPairBatch { cap, ix: PairIndex { n, row_ptr: vec![0; n + 1], ..PairIndex::default() } })
    }
    fn bind_pair_batch(&self, batch: &mut HostPairBatch, ix: &PairIndex) -> Result<()> {
        if ix.n != batch.ix.n || ix.len() > batch.cap {
            return Err(Error::Shape(format!(
                "pair batch of {} pairs on {} nodes: {} pairs on {} nodes bound",
                batch.cap,
                batch.ix.n,
                ix.len(),
                ix.n
            )));
        }
        batch.ix.clone_from(ix);
        Ok(())
    }
    fn pair_hadamard(&self, batch: &HostPairBatch, z: &HostMat<T>, out: &mut HostMat<T>) -> Result<()> {
        pair_hadamard_cpu(&batch.ix, z, out)
    }
    fn pair_hadamard_backward(
        &self,
        batch: &HostPairBatch,
        z: &HostMat<T>,
        dout: &HostMat<T>,
        accumulate: bool,
        dz: &mut HostMat<T>,
    ) -> Result<()> {
        pair_hadamard_backward_cpu(&batch.ix, z, dout, accumulate, dz)
    }
}

impl PairHadamardOp for CudaBackend {
    type PairBatch = DevicePairBatch;
    fn pair_batch(&self, n: usize, cap: usize) -> Result<DevicePairBatch> {
        DevicePairBatch::with_capacity(&self.gpu, n, cap)
    }
    fn bind_pair_batch(&self, batch: &mut DevicePairBatch, ix: &PairIndex) -> Result<()> {
        batch.bind(&self.gpu, ix)
    }
    fn pair_hadamard(&self, batch: &DevicePairBatch, z: &DeviceMatrix<f32>, out: &mut DeviceMatrix<f32>) -> Result<()> {
        self.timed("pair hadamard", || pair_hadamard(&self.gpu, batch, z, out))
    }
    fn pair_hadamard_backward(
        &self,
        batch: &DevicePairBatch,
        z: &DeviceMatrix<f32>,
        dout: &DeviceMatrix<f32>,
        accumulate: bool,
        dz: &mut DeviceMatrix<f32>,
    ) -> Result<()> {
        self.timed("pair hadamard backward", || pair_hadamard_backward(&self.gpu, batch, z, dout, accumulate, dz))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_groups_both_ends_by_node_in_pair_order() {
        // (1, 2), (0, 1), (2, 2), (1, 2) again: node 1 in three pairs, node 2 twice in one.
        let ix = PairIndex::new(4, &[&[[1, 2], [0, 1]], &[[2, 2], [1, 2]]]).unwrap();
        assert_eq!(ix.u(), [1, 0, 2, 1]);
        assert_eq!(ix.v(), [2, 1, 2, 2]);
        assert_eq!(ix.row_ptr(), [0, 1, 4, 8, 8]);
        assert_eq!(ix.ends(), [2, 0, 3, 6, 1, 4, 5, 7]);
        assert!(PairIndex::new(4, &[&[[0, 4]]]).unwrap_err().to_string().contains("out of range"));
        // Rebuilt smaller in place: nothing of the larger batch left.
        let mut again = ix.clone();
        again.build(3, &[&[[2, 0]]]).unwrap();
        assert_eq!(again, PairIndex::new(3, &[&[[2, 0]]]).unwrap());
        assert_eq!(again.ends(), [1, 0]);
    }
}
