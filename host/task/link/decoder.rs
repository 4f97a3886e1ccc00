//! The decoder: a pair's score (a logit) from its two node representations z (n x d).
//!
//! Dot product: score(u, v) = z_u · z_v, computed for every pair at once as an SDDMM over the
//! pair pattern ([`super::pairs::PairSet`]): out_e = z_row(e) · z_col(e). Its backward, given
//! g = dL/dscore per pair: dz_u += g z_v and dz_v += g z_u, i.e. dz = S_g z + S_gᵀ z, two SpMMs
//! with per-call values (g, and g laid out for the transpose).

use crate::error::Result;
use crate::ops::backend::{Ops, Side};
use crate::task::link::pairs::PairSet;

/// Which decoder scores the pairs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
pub enum DecoderKind {
    /// z_u · z_v (an SDDMM over the pairs).
    #[default]
    Dot,
}

/// The dot-product decoder's scratch for one width: the transposed gradient and one n x d
/// product.
pub struct DotDecoder<B: Ops> {
    tmp: B::Mat,
}

impl<B: Ops> DotDecoder<B> {
    pub fn new(b: &B, n: usize, d: usize) -> Result<Self> {
        Ok(DotDecoder { tmp: b.matrix(n, d)? })
    }

    /// `set.scores` = z_u · z_v for every pair.
    pub fn score(&self, b: &B, set: &mut PairSet<B>, z: &B::Mat) -> Result<()> {
        b.sddmm(&set.graph, z, z, &mut set.scores)
    }

    /// dz = dL/dz from `grad` = dL/dscore (per pair, in `set`'s edge order); `grad_t` is
    /// scratch of `set`'s transposed side.
    pub fn backward(&mut self, b: &B, set: &PairSet<B>, z: &B::Mat, grad: &B::Edges, grad_t: &mut B::Edges, dz: &mut B::Mat) -> Result<()> {
        b.spmm(&set.graph, Side::Forward, grad, z, dz)?;
        b.transpose_edges(&set.graph, grad, grad_t)?;
        b.spmm(&set.graph, Side::Transposed, grad_t, z, &mut self.tmp)?;
        b.add_assign(dz, &self.tmp)
    }
}
