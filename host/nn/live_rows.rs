//! The rows of a part's matrices that row-wise work must form. On one part of a partitioned
//! graph ([`crate::nn::halo_hook`]) a matrix has a row per owned node and per halo node, but
//! only the owned rows of most of them are ever read: a halo row of a product's input is
//! replaced by its owner's (the fill) before any product reads it, a halo row of a layer's
//! output is never in the loss, and a halo row of a gradient is zero once given back. So the
//! row-wise passes (bias, activation, dropout, the loss, the bias gradients) and the dense
//! products of the layers that exchange run on the owned rows alone, as views of the same
//! memory ([`crate::ops::backend::Backend::on_rows`]); the rows they leave keep what they held
//! and nothing reads them. On one device every row is live.

use std::ops::Range;

use crate::error::Result;
use crate::gpu::memory::padded_ld;
use crate::ops::backend::Backend;
use crate::ops::nn::dropout::DropKey;

/// Which rows of a model's matrices row-wise work forms: all (one device) or a range (a part's
/// owned rows).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveRows(Option<Range<usize>>);

impl LiveRows {
    /// Every row (one device).
    pub fn all() -> Self {
        LiveRows(None)
    }

    /// Rows `rows` only (a part's owned rows).
    pub fn only(rows: Range<usize>) -> Self {
        LiveRows(Some(rows))
    }

    /// `f` on `m`'s live rows.
    pub fn write<B: Backend>(&self, b: &B, m: &mut B::Mat, mut f: impl FnMut(&mut B::Mat) -> Result<()>) -> Result<()> {
        match &self.0 {
            None => f(m),
            Some(r) => b.on_rows(m, r.clone(), &mut f),
        }
    }

    /// `f` on `x`'s live rows, read only.
    pub fn read<B: Backend>(&self, b: &B, x: &B::Mat, mut f: impl FnMut(&B::Mat) -> Result<()>) -> Result<()> {
        match &self.0 {
            None => f(x),
            Some(r) => b.on_rows_ref(x, r.clone(), &mut f),
        }
    }

    /// `f` on the live rows of `x` (read) and `y` (written).
    pub fn read_write<B: Backend>(
        &self,
        b: &B,
        x: &B::Mat,
        y: &mut B::Mat,
        mut f: impl FnMut(&B::Mat, &mut B::Mat) -> Result<()>,
    ) -> Result<()> {
        self.read(b, x, |x| self.write(b, y, |y| f(x, y)))
    }

    /// `f` with `key` as a dropout on the live rows of a matrix of `cols` columns draws it
    /// (row r of the view is row `start + r` of the whole: its id, or its place in the mask).
    pub fn key<'k, B: Backend>(
        &self,
        b: &B,
        key: DropKey<'k, B::Ids>,
        cols: usize,
        mut f: impl FnMut(DropKey<'_, B::Ids>) -> Result<()>,
    ) -> Result<()> {
        match (&self.0, key.ids) {
            (None, _) => f(key),
            (Some(r), Some(ids)) => b.on_ids_ref(ids, r.clone(), &mut |ids| f(key.with_ids(Some(ids)))),
            (Some(r), None) => f(key.at(key.offset + r.start as u64 * padded_ld(cols) as u64)),
        }
    }

    /// `f` on the live rows of `x` and `y`, both read.
    pub fn read_both<B: Backend>(&self, b: &B, x: &B::Mat, y: &B::Mat, mut f: impl FnMut(&B::Mat, &B::Mat) -> Result<()>) -> Result<()> {
        self.read(b, x, |x| self.read(b, y, |y| f(x, y)))
    }
}
