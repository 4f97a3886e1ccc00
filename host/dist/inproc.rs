//! The in-process [`Communicator`]: P ranks as threads of one process, one channel per ordered
//! pair of ranks. The tests and CI run the partitioned path through it without several GPUs.
//!
//! A channel per (source, destination) keeps messages between a pair in order, which is exactly
//! the matching rule of NCCL's grouped send/recv; sends never block (unbounded channels), so a
//! group posts all its sends and then takes its receives, and no order of calls deadlocks.
//! Every message carries the operation's name, so two ranks that call different operations get
//! an error naming both instead of silently mixing buffers.

use std::any::Any;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use crate::dist::comm::{Communicator, check_blocks, check_peer};
use crate::error::{Error, Result};
use crate::util::Real;

struct Msg {
    op: &'static str,
    data: Box<dyn Any + Send>,
}

/// One rank of an in-process world.
pub struct InProcess {
    rank: usize,
    world: usize,
    /// `to[q]`: the channel to rank q.
    to: Vec<Sender<Msg>>,
    /// `from[q]`: the channel from rank q.
    from: Vec<Receiver<Msg>>,
    /// How long a receive waits for its peer before it reports an error.
    timeout: Duration,
}

impl InProcess {
    /// The `world` ranks, to be moved each onto its own thread.
    pub fn world(world: usize, timeout: Duration) -> Result<Vec<InProcess>> {
        if world == 0 {
            return Err(Error::comm("in-process world", "a world needs at least one rank"));
        }
        // chans[src][dst]
        let mut senders: Vec<Vec<Sender<Msg>>> = Vec::with_capacity(world);
        let mut receivers: Vec<Vec<Option<Receiver<Msg>>>> = (0..world).map(|_| (0..world).map(|_| None).collect()).collect();
        for src in 0..world {
            let mut row = Vec::with_capacity(world);
            for rx_row in receivers.iter_mut() {
                let (tx, rx) = mpsc::channel();
                row.push(tx);
                rx_row[src] = Some(rx);
            }
            senders.push(row);
        }
        Ok(senders
            .into_iter()
            .zip(receivers)
            .enumerate()
            .map(|(rank, (to, from))| InProcess {
                rank,
                world,
                to,
                from: from.into_iter().map(|r| r.expect("every pair has a channel")).collect(),
                timeout,
            })
            .collect())
    }

    /// Runs `f` on every rank of a new world, one thread each; the ranks' results in rank order,
    /// or the first error (a rank that panicked is reported as an error, its peers see it gone).
    pub fn run<R: Send>(world: usize, timeout: Duration, f: impl Fn(InProcess) -> Result<R> + Sync) -> Result<Vec<R>> {
        let ranks = InProcess::world(world, timeout)?;
        let f = &f;
        std::thread::scope(|s| {
            let handles: Vec<_> = ranks.into_iter().map(|c| s.spawn(move || f(c))).collect();
            handles
                .into_iter()
                .enumerate()
                .map(|(r, h)| h.join().map_err(|_| Error::comm("in-process world", format!("rank {r} panicked")))?)
                .collect()
        })
    }

    pub(crate) fn post<T: Send + 'static>(&self, peer: usize, op: &'static str, data: Vec<T>) -> Result<()> {
        self.to[peer]
            .send(Msg { op, data: Box::new(data) })
            .map_err(|_| Error::comm(op, format!("rank {}: rank {peer} has exited", self.rank)))
    }

    pub(crate) fn take<T: Send + 'static>(&self, peer: usize, op: &'static str, len: usize) -> Result<Vec<T>> {
        let me = self.rank;
        let msg = self.from[peer].recv_timeout(self.timeout).map_err(|e| match e {
            RecvTimeoutError::Timeout => Error::comm(op, format!("rank {me}: nothing from rank {peer} within {:?}", self.timeout)),
            RecvTimeoutError::Disconnected => Error::comm(op, format!("rank {me}: rank {peer} has exited")),
        })?;
        if msg.op != op {
            return Err(Error::comm(op, format!("rank {me} is in {op} but rank {peer} sent for {}", msg.op)));
        }
        let data =
            msg.data.downcast::<Vec<T>>().map_err(|_| Error::comm(op, format!("rank {me}: rank {peer} sent another element type")))?;
        if data.len() != len {
            return Err(Error::comm(op, format!("rank {me} expects {len} elements from rank {peer}, got {}", data.len())));
        }
        Ok(*data)
    }
}

impl Communicator for InProcess {
    fn rank(&self) -> usize {
        self.rank
    }
    fn world_size(&self) -> usize {
        self.world
    }

    fn exchange<T: Real>(&self, sends: &[(usize, &[T])], recvs: &mut [(usize, &mut [T])]) -> Result<()> {
        const OP: &str = "exchange";
        for &(peer, data) in sends {
            check_peer(self.rank, self.world, peer, OP)?;
            self.post(peer, OP, data.to_vec())?;
        }
        for (peer, buf) in recvs.iter_mut() {
            check_peer(self.rank, self.world, *peer, OP)?;
            let data = self.take::<T>(*peer, OP, buf.len())?;
            buf.copy_from_slice(&data);
        }
        Ok(())
    }

    fn all_reduce_sum<T: Real>(&self, buf: &mut [T]) -> Result<()> {
        const OP: &str = "all_reduce";
        for q in (0..self.world).filter(|&q| q != self.rank) {
            self.post(q, OP, buf.to_vec())?;
        }
        let mine = buf.to_vec();
        // Summed in rank order on every rank: identical results everywhere.
        for q in 0..self.world {
            let part = if q == self.rank { mine.clone() } else { self.take::<T>(q, OP, buf.len())? };
            if q == 0 {
                buf.copy_from_slice(&part);
            } else {
                buf.iter_mut().zip(&part).for_each(|(b, &p)| *b += p);
            }
        }
        Ok(())
    }

    fn all_gather<T: Real>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        const OP: &str = "all_gather";
        check_blocks(self.world, send.len(), recv.len(), OP)?;
        for q in (0..self.world).filter(|&q| q != self.rank) {
            self.post(q, OP, send.to_vec())?;
        }
        let n = send.len();
        for q in 0..self.world {
            let block = &mut recv[q * n..(q + 1) * n];
            if q == self.rank {
                block.copy_from_slice(send);
            } else {
                block.copy_from_slice(&self.take::<T>(q, OP, send.len())?);
            }
        }
        Ok(())
    }

    fn reduce_scatter_sum<T: Real>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        const OP: &str = "reduce_scatter";
        let n = recv.len();
        check_blocks(self.world, n, send.len(), OP)?;
        for q in (0..self.world).filter(|&q| q != self.rank) {
            self.post(q, OP, send[q * n..(q + 1) * n].to_vec())?;
        }
        let mine = &send[self.rank * n..(self.rank + 1) * n];
        for q in 0..self.world {
            let part = if q == self.rank { mine.to_vec() } else { self.take::<T>(q, OP, n)? };
            if q == 0 {
                recv.copy_from_slice(&part);
            } else {
                recv.iter_mut().zip(&part).for_each(|(r, &p)| *r += p);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(10);

    #[test]
    fn collectives_on_three_ranks() {
        let out = InProcess::run(3, T, |c| {
            let r = c.rank() as f64;
            let mut buf = vec![r, 10.0 * r];
            c.all_reduce_sum(&mut buf)?;
            let mut all = vec![0.0; 6];
            c.all_gather(&[r, r + 0.5], &mut all)?;
            let mut mine = vec![0.0; 2];
            // Rank q's block b holds 100 q + b: the sum over q at block `rank`.
            let blocks: Vec<f64> = (0..3).flat_map(|b| [100.0 * r + b as f64, 1.0]).collect();
            c.reduce_scatter_sum(&blocks, &mut mine)?;
            Ok((buf, all, mine))
        })
        .unwrap();
        for (rank, (buf, all, mine)) in out.into_iter().enumerate() {
            assert_eq!(buf, vec![3.0, 30.0]);
            assert_eq!(all, vec![0.0, 0.5, 1.0, 1.5, 2.0, 2.5]);
            assert_eq!(mine, vec![300.0 + 3.0 * rank as f64, 3.0]);
        }
    }

    #[test]
    fn exchange_ring_and_errors() {
        let out = InProcess::run(4, T, |c| {
            let (r, w) = (c.rank(), c.world_size());
            let data = vec![r as f32; r + 1];
            let from = (r + w - 1) % w;
            let mut got = vec![0f32; from + 1];
            c.exchange(&[((r + 1) % w, &data[..])], &mut [(from, &mut got[..])])?;
            Ok(got)
        })
        .unwrap();
        assert_eq!(out[0], vec![3.0; 4]);
        assert_eq!(out[2], vec![1.0; 2]);

        // Wrong length, a peer outside the world, different operations: errors, no hang.
        let e = InProcess::run(2, T, |c| {
            let mut got = [0f32; 3];
            c.exchange(&[(1 - c.rank(), &[1.0f32, 2.0][..])], &mut [(1 - c.rank(), &mut got[..])])
        });
        assert!(e.unwrap_err().to_string().contains("expects 3 elements"));
        let e = InProcess::run(1, T, |c| c.exchange::<f32>(&[(5, &[][..])], &mut []));
        assert!(e.unwrap_err().to_string().contains("outside the world"));
        let e = InProcess::run(2, Duration::from_millis(200), |c| {
            if c.rank() == 0 { c.all_reduce_sum(&mut [1.0f32]) } else { c.all_gather(&[1.0f32], &mut [0.0; 2]) }
        });
        assert!(e.unwrap_err().to_string().contains("sent for"));
        // A rank that never answers: a timeout, not a hang.
        let e = InProcess::run(2, Duration::from_millis(100), |c| {
            if c.rank() == 0 {
                c.all_reduce_sum(&mut [1.0f32])
            } else {
                std::thread::sleep(Duration::from_millis(400));
                Ok(())
            }
        });
        assert!(e.unwrap_err().to_string().contains("within"));
    }
}
