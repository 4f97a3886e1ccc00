//! The halo exchange of one part: its owned rows of a row-major matrix out to the parts whose
//! halo names them (forward), and the gradient rows of its halo back to their owners, summed
//! there (backward).
//!
//! A layer of the distributed step calls it between its two products:
//! ```text
//! Y_p  = A_local X_p            (starts at once)
//! halo.gather(comm, X_p, k, X_halo)
//! Y_p += A_remote X_halo
//! --- backward ---
//! dX_p    = A_localᵀ dY_p        (PartBlocks::local_t)
//! dX_halo = A_remoteᵀ dY_p       (PartBlocks::remote_t: rows other parts own)
//! halo.scatter_add(comm, dX_halo, k, dX_p)
//! ```
//! Two ways to move the rows, chosen once per graph (every rank must choose the same):
//! grouped point-to-point sends of exactly the halo rows, or an all-gather of every part's rows
//! (padded to the largest part) followed by a local pick, whose reverse is a reduce-scatter.
//! The all-gather moves more bytes but is one collective on NCCL's tuned rings; it wins when the
//! halo is most of the graph anyway: measured halo / all-gather ratios run from 0.05 (pubmed) to
//! 0.8 (ogbl-ddi) with METIS on 8 parts, hence a threshold near one half.

use crate::dist::comm::Communicator;
use crate::dist::partition::{PartBlocks, Partition};
use crate::error::{Error, Result};
use crate::util::Real;
use crate::util::split::split_lengths;

/// How halo rows travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum ExchangeMethod {
    /// Grouped send/recv of exactly the rows each part needs.
    PointToPoint,
    /// All-gather of every part's rows (reduce-scatter backward).
    AllGather,
}

/// The halo / all-gather ratio above which [`ExchangeMethod::AllGather`] is chosen by default.
pub const ALL_GATHER_THRESHOLD: f64 = 0.5;

/// Point-to-point below `threshold` (halo / all-gather volume, [`Partition::halo_ratio`]), else
/// all-gather.
pub fn choose_exchange(halo_ratio: f64, threshold: f64) -> ExchangeMethod {
    if halo_ratio > threshold { ExchangeMethod::AllGather } else { ExchangeMethod::PointToPoint }
}

/// What one part needs to exchange its halo: the lists of its [`PartBlocks`] plus every part's
/// row count (for the all-gather's padding). Independent of the element type and the width k.
#[derive(Clone, Debug)]
pub struct Halo {
    part: usize,
    rows: usize,
    part_rows: Vec<usize>,
    halo: Vec<(u32, u32)>,
    recv_ptr: Vec<usize>,
    send: Vec<Vec<u32>>,
    method: ExchangeMethod,
}

impl Halo {
    /// For part `blocks.part`, with `part_rows[q]` = rows of part q.
    pub fn new(blocks: &PartBlocks, part_rows: &[usize], method: ExchangeMethod) -> Result<Halo> {
        let parts = part_rows.len();
        if blocks.part >= parts || part_rows[blocks.part] != blocks.rows || blocks.recv_ptr.len() != parts + 1 || blocks.send.len() != parts
        {
            return Err(Error::Shape(format!(
                "part {} ({} rows) does not belong to a partition of {parts} parts with rows {part_rows:?}",
                blocks.part, blocks.rows
            )));
        }
        if let Some(&(q, r)) = blocks.halo.iter().find(|&&(q, r)| q as usize >= parts || r as usize >= part_rows[q as usize]) {
            return Err(Error::Shape(format!("part {}: halo row ({q}, {r}) is outside its owner", blocks.part)));
        }
        Ok(Halo {
            part: blocks.part,
            rows: blocks.rows,
            part_rows: part_rows.to_vec(),
            halo: blocks.halo.clone(),
            recv_ptr: blocks.recv_ptr.clone(),
            send: blocks.send.clone(),
            method,
        })
    }

    /// Part `part` of a whole partition.
    pub fn from_partition(p: &Partition, part: usize, method: ExchangeMethod) -> Result<Halo> {
        let blocks = p.blocks.get(part).ok_or_else(|| Error::Shape(format!("part {part} of a partition into {}", p.parts())))?;
        let rows: Vec<usize> = p.blocks.iter().map(|b| b.rows).collect();
        Halo::new(blocks, &rows, method)
    }

    pub fn method(&self) -> ExchangeMethod {
        self.method
    }

    pub fn halo_rows(&self) -> usize {
        self.halo.len()
    }

    /// This part's index.
    pub fn part(&self) -> usize {
        self.part
    }

    /// `send_lists()[q]`: the rows of this part (0-based among its own) that part q receives,
    /// in the order q lists them in its halo (empty for q = this part).
    pub fn send_lists(&self) -> &[Vec<u32>] {
        &self.send
    }

    /// What this part receives from q is halo rows `recv_ptr()[q]..recv_ptr()[q + 1]`.
    pub fn recv_ptr(&self) -> &[usize] {
        &self.recv_ptr
    }

    /// Forward: `x_halo` (halo rows x k) = the owners' rows, from this part's `x_local` (rows x k)
    /// and the others'.
    pub fn gather<T: Real, C: Communicator>(&self, comm: &C, x_local: &[T], k: usize, x_halo: &mut [T]) -> Result<()> {
        self.check(comm, x_local.len(), x_halo.len(), k, "halo gather")?;
        match self.method {
            ExchangeMethod::PointToPoint => {
                let packed: Vec<(usize, Vec<T>)> = self.peers(&self.send).map(|(q, rows)| (q, pack_rows(x_local, rows, k))).collect();
                let sends: Vec<(usize, &[T])> = packed.iter().map(|(q, v)| (*q, v.as_slice())).collect();
                let mut recvs = self.recv_slices(x_halo, k);
                comm.exchange(&sends, &mut recvs)
            }
            ExchangeMethod::AllGather => {
                let max = self.max_rows();
                let mut mine = vec![T::zero(); max * k];
                mine[..x_local.len()].copy_from_slice(x_local);
                let mut all = vec![T::zero(); self.part_rows.len() * max * k];
                comm.all_gather(&mine, &mut all)?;
                for (h, &(q, r)) in self.halo.iter().enumerate() {
                    let at = (q as usize * max + r as usize) * k;
                    x_halo[h * k..(h + 1) * k].copy_from_slice(&all[at..at + k]);
                }
                Ok(())
            }
        }
    }

    /// Backward: `g_local` (rows x k) += the gradient rows other parts computed for this part's
    /// rows; `g_halo` (halo rows x k) is this part's gradient for the rows it received, which go
    /// back to their owners.
    pub fn scatter_add<T: Real, C: Communicator>(&self, comm: &C, g_halo: &[T], k: usize, g_local: &mut [T]) -> Result<()> {
        self.check(comm, g_local.len(), g_halo.len(), k, "halo scatter")?;
        match self.method {
            ExchangeMethod::PointToPoint => {
                // What this part received from q is one contiguous slice of the halo: send it back as is.
                let sends: Vec<(usize, &[T])> =
                    self.peers_recv().map(|q| (q, &g_halo[self.recv_ptr[q] * k..self.recv_ptr[q + 1] * k])).collect();
                let mut bufs: Vec<(usize, Vec<T>)> = self.peers(&self.send).map(|(q, rows)| (q, vec![T::zero(); rows.len() * k])).collect();
                let mut recvs: Vec<(usize, &mut [T])> = bufs.iter_mut().map(|(q, v)| (*q, v.as_mut_slice())).collect();
                comm.exchange(&sends, &mut recvs)?;
                // Summed in increasing part order: the same order on every run.
                for (q, buf) in &bufs {
                    for (i, &r) in self.send[*q].iter().enumerate() {
                        let dst = &mut g_local[r as usize * k..(r as usize + 1) * k];
                        dst.iter_mut().zip(&buf[i * k..(i + 1) * k]).for_each(|(d, &s)| *d += s);
                    }
                }
                Ok(())
            }
            ExchangeMethod::AllGather => {
                let max = self.max_rows();
                let mut all = vec![T::zero(); self.part_rows.len() * max * k];
                for (h, &(q, r)) in self.halo.iter().enumerate() {
                    let at = (q as usize * max + r as usize) * k;
                    all[at..at + k].copy_from_slice(&g_halo[h * k..(h + 1) * k]);
                }
                let mut mine = vec![T::zero(); max * k];
                comm.reduce_scatter_sum(&all, &mut mine)?;
                g_local.iter_mut().zip(&mine).for_each(|(d, &s)| *d += s);
                Ok(())
            }
        }
    }

    fn max_rows(&self) -> usize {
        self.part_rows.iter().copied().max().unwrap_or(0)
    }

    /// (peer, rows) for every other part with a non-empty list.
    fn peers<'a>(&'a self, lists: &'a [Vec<u32>]) -> impl Iterator<Item = (usize, &'a [u32])> + 'a {
        lists.iter().enumerate().filter(move |(q, l)| *q != self.part && !l.is_empty()).map(|(q, l)| (q, l.as_slice()))
    }

    /// Parts this part receives halo rows from.
    fn peers_recv(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.part_rows.len()).filter(|&q| self.recv_ptr[q + 1] > self.recv_ptr[q])
    }

    /// The halo matrix cut into one slice per owner it receives from.
    fn recv_slices<'a, T>(&self, x_halo: &'a mut [T], k: usize) -> Vec<(usize, &'a mut [T])> {
        let parts = self.part_rows.len();
        let lens = (0..parts).map(|q| (self.recv_ptr[q + 1] - self.recv_ptr[q]) * k);
        split_lengths(x_halo, lens).into_iter().enumerate().filter(|(_, s)| !s.is_empty()).collect()
    }

    fn check<C: Communicator>(&self, comm: &C, local_len: usize, halo_len: usize, k: usize, what: &str) -> Result<()> {
        if comm.rank() != self.part || comm.world_size() != self.part_rows.len() {
            return Err(Error::comm(
                what,
                format!("part {} of {} on rank {} of {}", self.part, self.part_rows.len(), comm.rank(), comm.world_size()),
            ));
        }
        if local_len != self.rows * k || halo_len != self.halo.len() * k {
            return Err(Error::Shape(format!(
                "{what}: part {} needs {} x {k} own rows and {} x {k} halo rows, got {local_len} and {halo_len} elements",
                self.part,
                self.rows,
                self.halo.len()
            )));
        }
        Ok(())
    }
}

fn pack_rows<T: Real>(x: &[T], rows: &[u32], k: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(rows.len() * k);
    for &r in rows {
        out.extend_from_slice(&x[r as usize * k..(r as usize + 1) * k]);
    }
    out
}
