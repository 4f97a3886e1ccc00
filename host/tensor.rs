//! Dense row-major matrices on the host (features, outputs, references).

use crate::error::{Error, Result};
use crate::util::rng::SplitMix64;

#[derive(Clone, Debug, PartialEq)]
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f32>,
}

impl Matrix {
    pub fn zeros(rows: usize, cols: usize) -> Self {
        Matrix { rows, cols, data: vec![0.0; rows * cols] }
    }
    pub fn from_vec(rows: usize, cols: usize, data: Vec<f32>) -> Result<Self> {
        if data.len() != rows * cols {
            return Err(Error::Shape(format!("{} values for a {rows} x {cols} matrix", data.len())));
        }
        Ok(Matrix { rows, cols, data })
    }
    /// Uniform in [-1, 1): never zeros, so wrong indexing cannot hide.
    pub fn random(rows: usize, cols: usize, seed: u64) -> Self {
        Matrix { rows, cols, data: SplitMix64::new(seed).vec_f32(rows * cols) }
    }
    pub fn row(&self, r: usize) -> &[f32] {
        &self.data[r * self.cols..(r + 1) * self.cols]
    }
    pub fn row_mut(&mut self, r: usize) -> &mut [f32] {
        &mut self.data[r * self.cols..(r + 1) * self.cols]
    }
    /// Every element rounded through f16 (what the f16 kernels see).
    pub fn rounded_f16(&self) -> Matrix {
        Matrix { rows: self.rows, cols: self.cols, data: self.data.iter().map(|&v| half::f16::from_f32(v).to_f32()).collect() }
    }
}

/// ||a - b|| / ||b|| in f64; NaN anywhere gives NaN (never passes a `<` check).
pub fn rel_error(a: &[f32], reference: &[f64]) -> f64 {
    assert_eq!(a.len(), reference.len(), "rel_error on different lengths");
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for (&x, &r) in a.iter().zip(reference) {
        if !x.is_finite() {
            return f64::NAN;
        }
        num += (x as f64 - r).powi(2);
        den += r * r;
    }
    if den == 0.0 { num.sqrt() } else { (num / den).sqrt() }
}
