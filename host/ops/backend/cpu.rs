//! The CPU backend (rayon): host matrices and graphs, in f32 for training without a GPU or f64
//! for gradient checks. Each op's CPU implementation is in its own file in `ops/nn/`. It is also
//! the reference the GPU backend is tested against: dropout masks come from the same
//! counter-based hash, so both draw the same ones.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use crate::error::{Error, Result};
use crate::gpu::timing::Timing;
use crate::graph::Csr;
use crate::ops::backend::{Backend, Side, Stats};
use crate::tensor::Matrix;
use crate::util::Real;

/// A row-major host matrix without padding.
#[derive(Clone, Debug, PartialEq)]
pub struct HostMat<T> {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<T>,
}

impl<T: Real> HostMat<T> {
    pub fn zeros(rows: usize, cols: usize) -> Self {
        HostMat { rows, cols, data: vec![T::zero(); rows * cols] }
    }
    pub fn row(&self, r: usize) -> &[T] {
        &self.data[r * self.cols..(r + 1) * self.cols]
    }
}

/// A pattern and its transpose in CSR form, with the edge of S behind every edge of Sᵀ.
pub struct HostGraph<T> {
    pub s: Csr,
    pub t: Csr,
    /// For every edge of Sᵀ (CSR order), the index of the same edge in S.
    pub t_of: Vec<u32>,
    /// S's values in T (the CSR stores f32; gradient checks want the values exact).
    pub values: Vec<T>,
}

pub struct CpuBackend<T> {
    step: AtomicU32,
    _t: std::marker::PhantomData<T>,
}

impl<T: Real> Default for CpuBackend<T> {
    fn default() -> Self {
        CpuBackend { step: AtomicU32::new(0), _t: std::marker::PhantomData }
    }
}

impl<T: Real> CpuBackend<T> {
    pub fn new() -> Self {
        Self::default()
    }
    /// The training steps begun so far (seeds dropout, drives Adam's bias correction).
    pub fn step(&self) -> u32 {
        self.step.load(Ordering::Relaxed)
    }
    pub fn side<'a>(&self, g: &'a HostGraph<T>, side: Side) -> &'a Csr {
        match side {
            Side::Forward => &g.s,
            Side::Transposed => &g.t,
        }
    }
}

pub(crate) fn same_shape<T>(what: &str, a: &HostMat<T>, b: &HostMat<T>) -> Result<()> {
    if (a.rows, a.cols) != (b.rows, b.cols) {
        return Err(Error::Shape(format!("{what}: {}x{} against {}x{}", a.rows, a.cols, b.rows, b.cols)));
    }
    Ok(())
}

impl<T: Real> Backend for CpuBackend<T> {
    type Mat = HostMat<T>;
    type Edges = Vec<T>;
    type Graph = HostGraph<T>;
    type Ids = Vec<u32>;
    type Mask = Vec<u8>;
    type Labels = (Vec<i32>, Vec<u8>);
    type Stats = [T; 4];
    type Recording = ();

    fn describe(&self) -> String {
        format!("cpu {} ({} threads)", std::any::type_name::<T>(), rayon::current_num_threads())
    }

    fn matrix(&self, rows: usize, cols: usize) -> Result<HostMat<T>> {
        Ok(HostMat::zeros(rows, cols))
    }
    fn upload(&self, m: &Matrix) -> Result<HostMat<T>> {
        Ok(HostMat { rows: m.rows, cols: m.cols, data: m.data.iter().map(|&v| T::from_f64(v as f64)).collect() })
    }
    fn upload_owned(&self, m: Matrix) -> Result<HostMat<T>> {
        // In f32 the matrix's own vector becomes the backend's (no copy); f64 converts.
        let (rows, cols) = (m.rows, m.cols);
        match (Box::new(m.data) as Box<dyn std::any::Any>).downcast::<Vec<T>>() {
            Ok(data) => Ok(HostMat { rows, cols, data: *data }),
            Err(data) => {
                let data = data.downcast::<Vec<f32>>().expect("Matrix holds f32");
                Ok(HostMat { rows, cols, data: data.iter().map(|&v| T::from_f64(v as f64)).collect() })
            }
        }
    }
    fn download(&self, m: &HostMat<T>) -> Result<Matrix> {
        Matrix::from_vec(m.rows, m.cols, m.data.iter().map(|v| v.to_f64() as f32).collect())
    }
    fn download_edges(&self, e: &Vec<T>, len: usize) -> Result<Vec<f32>> {
        let v = e.get(..len).ok_or_else(|| Error::Shape(format!("download_edges: {len} of {} values", e.len())))?;
        Ok(v.iter().map(|x| x.to_f64() as f32).collect())
    }
    fn shape(m: &HostMat<T>) -> (usize, usize) {
        (m.rows, m.cols)
    }
    fn on_rows(&self, m: &mut HostMat<T>, rows: std::ops::Range<usize>, f: &mut dyn FnMut(&mut HostMat<T>) -> Result<()>) -> Result<()> {
        if rows.start > rows.end || rows.end > m.rows {
            return Err(Error::Shape(format!("on_rows: rows {rows:?} of a matrix of {} rows", m.rows)));
        }
        let at = rows.start * m.cols..rows.end * m.cols;
        let mut part = HostMat { rows: rows.len(), cols: m.cols, data: m.data[at.clone()].to_vec() };
        f(&mut part)?;
        m.data[at].copy_from_slice(&part.data);
        Ok(())
    }
    fn on_rows_ref(&self, m: &HostMat<T>, rows: std::ops::Range<usize>, f: &mut dyn FnMut(&HostMat<T>) -> Result<()>) -> Result<()> {
        if rows.start > rows.end || rows.end > m.rows {
            return Err(Error::Shape(format!("on_rows_ref: rows {rows:?} of a matrix of {} rows", m.rows)));
        }
        f(&HostMat { rows: rows.len(), cols: m.cols, data: m.data[rows.start * m.cols..rows.end * m.cols].to_vec() })
    }
    fn on_ids_ref(&self, ids: &Vec<u32>, range: std::ops::Range<usize>, f: &mut dyn FnMut(&Vec<u32>) -> Result<()>) -> Result<()> {
        let part = ids.get(range.clone()).ok_or_else(|| Error::Shape(format!("on_ids_ref: ids {range:?} of {}", ids.len())))?;
        f(&part.to_vec())
    }
    fn graph(&self, csr: Csr) -> Result<HostGraph<T>> {
        let (t, t_of) = crate::graph::ops::transpose_with_map(&csr);
        let values = csr.values().iter().map(|&v| T::from_f64(v as f64)).collect();
        Ok(HostGraph { s: csr, t, t_of, values })
    }
    fn graph_shape(g: &HostGraph<T>) -> (usize, usize) {
        (g.s.n_rows(), g.s.n_cols())
    }
    fn edges(&self, g: &HostGraph<T>, side: Side) -> Result<Vec<T>> {
        Ok(vec![T::zero(); self.side(g, side).nnz()])
    }
    fn graph_values(&self, g: &HostGraph<T>, side: Side) -> Result<Vec<T>> {
        Ok(match side {
            Side::Forward => g.values.clone(),
            Side::Transposed => g.t_of.iter().map(|&e| g.values[e as usize]).collect(),
        })
    }
    fn mask(&self, rows: usize, cols: usize) -> Result<Vec<u8>> {
        Ok(vec![0; rows * crate::gpu::memory::padded_ld(cols)])
    }
    fn edge_mask(&self, edges: &Vec<T>) -> Result<Vec<u8>> {
        Ok(vec![0; edges.len()])
    }
    fn ids(&self, ids: &[u32]) -> Result<Vec<u32>> {
        Ok(ids.to_vec())
    }
    fn labels(&self, labels: &[i32], mask_bits: &[u8]) -> Result<(Vec<i32>, Vec<u8>)> {
        Ok((labels.to_vec(), mask_bits.to_vec()))
    }
    fn stats(&self) -> Result<[T; 4]> {
        Ok([T::zero(); 4])
    }
    fn read_stats(&self, s: &[T; 4]) -> Result<Stats> {
        Ok(Stats { loss: s[0].to_f64(), correct: [s[1].to_f64(), s[2].to_f64(), s[3].to_f64()] })
    }
    fn record(&self, _f: &mut dyn FnMut() -> Result<()>) -> Result<Option<()>> {
        Ok(None)
    }
    fn replay(&self, _r: &()) -> Result<()> {
        Ok(())
    }
    fn time(&self, warmup: usize, reps: usize, f: &mut dyn FnMut() -> Result<()>) -> Result<Timing> {
        for _ in 0..warmup {
            f()?;
        }
        let mut ms = Vec::with_capacity(reps.max(1));
        for _ in 0..reps.max(1) {
            let t = Instant::now();
            f()?;
            ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        ms.sort_by(f64::total_cmp);
        Ok(Timing { median_ms: ms[ms.len() / 2], min_ms: ms[0], max_ms: ms[ms.len() - 1], reps: ms.len() })
    }
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
    fn begin_step(&self) -> Result<()> {
        self.step.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn steps(&self) -> Result<u32> {
        Ok(self.step())
    }
    fn set_steps(&self, steps: u32) -> Result<()> {
        self.step.store(steps, Ordering::Relaxed);
        Ok(())
    }
}
