//! The CPU backend (rayon): every op of [`Backend`] on the host, in f32 for training without a
//! GPU or f64 for gradient checks. It is also the reference the GPU backend is tested against:
//! dropout masks come from the same counter-based hash, so both draw the same ones.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::gpu::timing::Timing;
use crate::graph::Csr;
use crate::nn::backend::{AdamHyper, Backend, Side, Stats};
use crate::ops::nn as k;
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
    fn row(&self, r: usize) -> &[T] {
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
    fn side<'a>(&self, g: &'a HostGraph<T>, side: Side) -> &'a Csr {
        match side {
            Side::Forward => &g.s,
            Side::Transposed => &g.t,
        }
    }
}

fn same_shape<T>(what: &str, a: &HostMat<T>, b: &HostMat<T>) -> Result<()> {
    if (a.rows, a.cols) != (b.rows, b.cols) {
        return Err(Error::Shape(format!("{what}: {}x{} against {}x{}", a.rows, a.cols, b.rows, b.cols)));
    }
    Ok(())
}

impl<T: Real> Backend for CpuBackend<T> {
    type Mat = HostMat<T>;
    type Edges = Vec<T>;
    type Graph = HostGraph<T>;
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
    fn download(&self, m: &HostMat<T>) -> Result<Matrix> {
        Matrix::from_vec(m.rows, m.cols, m.data.iter().map(|v| v.to_f64() as f32).collect())
    }
    fn shape(m: &HostMat<T>) -> (usize, usize) {
        (m.rows, m.cols)
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

    fn gemm(&self, a: &HostMat<T>, ta: bool, b: &HostMat<T>, tb: bool, beta: f32, c: &mut HostMat<T>) -> Result<()> {
        let (m, ka) = if ta { (a.cols, a.rows) } else { (a.rows, a.cols) };
        let (kb, n) = if tb { (b.cols, b.rows) } else { (b.rows, b.cols) };
        if ka != kb || c.rows != m || c.cols != n {
            return Err(Error::Shape(format!(
                "gemm: op(A) {m}x{ka}, op(B) {kb}x{n}, C {}x{}",
                c.rows, c.cols
            )));
        }
        gemm_host(a, ta, b, tb, T::from_f64(beta as f64), c);
        Ok(())
    }
    fn bias_add(&self, y: &mut HostMat<T>, b: &HostMat<T>) -> Result<()> {
        k::bias_add_cpu(&mut y.data, y.rows, y.cols, &b.data);
        Ok(())
    }
    fn col_sums(&self, x: &HostMat<T>, out: &mut HostMat<T>) -> Result<()> {
        k::col_sums_cpu(&x.data, x.rows, x.cols, &mut out.data);
        Ok(())
    }
    fn add_assign(&self, y: &mut HostMat<T>, x: &HostMat<T>) -> Result<()> {
        same_shape("add_assign", y, x)?;
        k::add_assign_cpu(&mut y.data, &x.data);
        Ok(())
    }
    fn copy(&self, src: &HostMat<T>, dst: &mut HostMat<T>) -> Result<()> {
        same_shape("copy", dst, src)?;
        dst.data.copy_from_slice(&src.data);
        Ok(())
    }
    fn relu(&self, x: &mut HostMat<T>) -> Result<()> {
        k::relu_cpu(&mut x.data);
        Ok(())
    }
    fn relu_backward(&self, y: &HostMat<T>, dy: &mut HostMat<T>) -> Result<()> {
        same_shape("relu_backward", dy, y)?;
        k::relu_backward_cpu(&y.data, &mut dy.data);
        Ok(())
    }
    fn dropout(&self, x: &HostMat<T>, y: &mut HostMat<T>, mask: &mut Vec<u8>, p: f32, seed: u64) -> Result<()> {
        same_shape("dropout", y, x)?;
        k::dropout_matrix_cpu(&x.data, x.rows, x.cols, &mut y.data, mask, p, seed, self.step.load(Ordering::Relaxed))
    }
    fn dropout_backward(&self, dy: &HostMat<T>, mask: &Vec<u8>, p: f32, dx: &mut HostMat<T>) -> Result<()> {
        same_shape("dropout_backward", dx, dy)?;
        k::dropout_backward_matrix_cpu(&dy.data, mask, dy.rows, dy.cols, p, &mut dx.data)
    }
    fn dropout_edges(&self, x: &Vec<T>, y: &mut Vec<T>, mask: &mut Vec<u8>, p: f32, seed: u64) -> Result<()> {
        k::dropout_cpu(x, y, mask, p, seed, self.step.load(Ordering::Relaxed))
    }
    fn row_normalize(&self, h: &HostMat<T>, n: &mut HostMat<T>, inv_norm: &mut HostMat<T>) -> Result<()> {
        same_shape("row_normalize", n, h)?;
        k::row_normalize_cpu(&h.data, h.rows, h.cols, &mut n.data, &mut inv_norm.data);
        Ok(())
    }
    fn row_normalize_backward(&self, n: &HostMat<T>, inv_norm: &HostMat<T>, dn: &HostMat<T>, dh: &mut HostMat<T>) -> Result<()> {
        same_shape("row_normalize_backward", dh, dn)?;
        k::row_normalize_backward_cpu(&n.data, &inv_norm.data, &dn.data, n.rows, n.cols, &mut dh.data);
        Ok(())
    }

    fn spmm(&self, g: &HostGraph<T>, side: Side, values: &Vec<T>, x: &HostMat<T>, y: &mut HostMat<T>) -> Result<()> {
        let s = self.side(g, side);
        if values.len() != s.nnz() || x.rows != s.n_cols() || y.rows != s.n_rows() || y.cols != x.cols {
            return Err(Error::Shape(format!(
                "spmm: S {}x{} with {} values for {} nonzeros, X {}x{}, Y {}x{}",
                s.n_rows(), s.n_cols(), values.len(), s.nnz(), x.rows, x.cols, y.rows, y.cols
            )));
        }
        let k = x.cols;
        if k == 0 {
            return Ok(());
        }
        let (rp, ci) = (s.row_ptr(), s.col_idx());
        y.data.par_chunks_mut(k).enumerate().for_each(|(r, out)| {
            out.iter_mut().for_each(|o| *o = T::zero());
            for e in rp[r] as usize..rp[r + 1] as usize {
                let v = values[e];
                for (o, &xv) in out.iter_mut().zip(x.row(ci[e] as usize)) {
                    *o += v * xv;
                }
            }
        });
        Ok(())
    }
    fn sddmm(&self, g: &HostGraph<T>, a: &HostMat<T>, b: &HostMat<T>, out: &mut Vec<T>) -> Result<()> {
        let s = &g.s;
        if a.rows != s.n_rows() || b.rows != s.n_cols() || a.cols != b.cols || out.len() != s.nnz() {
            return Err(Error::Shape(format!("sddmm: S {}x{}, A {}x{}, B {}x{}, out {}", s.n_rows(), s.n_cols(), a.rows, a.cols, b.rows, b.cols, out.len())));
        }
        let rp = s.row_ptr();
        let parts = crate::util::split::split_lengths(out.as_mut_slice(), (0..s.n_rows()).map(|r| (rp[r + 1] - rp[r]) as usize));
        parts.into_par_iter().enumerate().for_each(|(r, o)| {
            let ar = a.row(r);
            for (slot, e) in o.iter_mut().zip(s.row_range(r)) {
                let br = b.row(s.col_idx()[e] as usize);
                *slot = ar.iter().zip(br).fold(T::zero(), |acc, (&x, &y)| acc + x * y);
            }
        });
        Ok(())
    }
    fn transpose_edges(&self, g: &HostGraph<T>, src: &Vec<T>, dst: &mut Vec<T>) -> Result<()> {
        if src.len() != g.s.nnz() || dst.len() != g.t.nnz() {
            return Err(Error::Shape(format!("transpose_edges: {} -> {} values for {} edges", src.len(), dst.len(), g.s.nnz())));
        }
        dst.par_iter_mut().zip(&g.t_of).for_each(|(d, &e)| *d = src[e as usize]);
        Ok(())
    }
    fn edge_softmax(&self, g: &HostGraph<T>, beta: &HostMat<T>, cos: &Vec<T>, alpha: &mut Vec<T>) -> Result<()> {
        k::edge_softmax_scaled_cpu(g.s.row_ptr(), beta.data[0], cos, alpha);
        Ok(())
    }
    fn edge_softmax_backward(
        &self,
        g: &HostGraph<T>,
        beta: &HostMat<T>,
        alpha: &Vec<T>,
        dalpha: &Vec<T>,
        cos: &Vec<T>,
        dcos: &mut Vec<T>,
        dbeta: &mut HostMat<T>,
    ) -> Result<()> {
        dbeta.data[0] = k::edge_softmax_backward_cpu(g.s.row_ptr(), beta.data[0], alpha, dalpha, cos, dcos);
        Ok(())
    }

    fn cross_entropy(&self, logits: &HostMat<T>, labels: &(Vec<i32>, Vec<u8>), inv_n_train: f32, dlogits: &mut HostMat<T>, stats: &mut [T; 4]) -> Result<()> {
        same_shape("cross_entropy", dlogits, logits)?;
        *stats = k::cross_entropy_cpu(
            &logits.data,
            logits.rows,
            logits.cols,
            &labels.0,
            &labels.1,
            T::from_f64(inv_n_train as f64),
            &mut dlogits.data,
        );
        Ok(())
    }
    fn adam(&self, param: &mut HostMat<T>, grad: &HostMat<T>, m: &mut HostMat<T>, v: &mut HostMat<T>, hyper: &AdamHyper) -> Result<()> {
        same_shape("adam", param, grad)?;
        k::adam_cpu(&mut param.data, &grad.data, &mut m.data, &mut v.data, hyper, self.step.load(Ordering::Relaxed).max(1));
        Ok(())
    }
}

/// `c = op(a) op(b) + beta c` with rayon, each shape in the loop order that streams rows.
fn gemm_host<T: Real>(a: &HostMat<T>, ta: bool, b: &HostMat<T>, tb: bool, beta: T, c: &mut HostMat<T>) {
    let n = c.cols;
    if n == 0 {
        return;
    }
    let kk = if ta { a.rows } else { a.cols };
    let scale = |row: &mut [T]| row.iter_mut().for_each(|v| *v = if beta == T::zero() { T::zero() } else { *v * beta });
    match (ta, tb) {
        (false, false) => c.data.par_chunks_mut(n).enumerate().for_each(|(r, out)| {
            scale(out);
            for (kx, &av) in a.row(r).iter().enumerate() {
                if av != T::zero() {
                    for (o, &bv) in out.iter_mut().zip(b.row(kx)) {
                        *o += av * bv;
                    }
                }
            }
        }),
        (false, true) => c.data.par_chunks_mut(n).enumerate().for_each(|(r, out)| {
            scale(out);
            let ar = a.row(r);
            for (j, o) in out.iter_mut().enumerate() {
                *o += ar.iter().zip(b.row(j)).fold(T::zero(), |acc, (&x, &y)| acc + x * y);
            }
        }),
        (true, false) => {
            // C = Aᵀ B: rows of A and B stream together; partial products per chunk of k.
            let chunk = kk.div_ceil(rayon::current_num_threads().max(1) * 4).max(64);
            let partial = (0..kk.div_ceil(chunk))
                .into_par_iter()
                .map(|ci| {
                    let mut acc = vec![T::zero(); c.rows * n];
                    for kx in ci * chunk..((ci + 1) * chunk).min(kk) {
                        let br = b.row(kx);
                        for (r, &av) in a.row(kx).iter().enumerate() {
                            if av != T::zero() {
                                for (o, &bv) in acc[r * n..(r + 1) * n].iter_mut().zip(br) {
                                    *o += av * bv;
                                }
                            }
                        }
                    }
                    acc
                })
                .reduce(|| vec![T::zero(); c.rows * n], |mut x, y| {
                    x.iter_mut().zip(&y).for_each(|(p, &q)| *p += q);
                    x
                });
            c.data.iter_mut().zip(partial).for_each(|(o, p)| *o = if beta == T::zero() { p } else { *o * beta + p });
        }
        (true, true) => c.data.par_chunks_mut(n).enumerate().for_each(|(r, out)| {
            scale(out);
            for (j, o) in out.iter_mut().enumerate() {
                let mut acc = T::zero();
                for kx in 0..kk {
                    acc += a.data[kx * a.cols + r] * b.data[j * b.cols + kx];
                }
                *o += acc;
            }
        }),
    }
}
