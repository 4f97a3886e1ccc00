//! Parts balanced on measured time (`--rebalance`).
//!
//! A partition balances a weight per node, its edges plus a row weight
//! ([`crate::dist::partition::node_weights`]); what a node really costs a step depends on more
//! than its degree: on R-MAT, a hub region's edges gather rows that the tensor-core blocks and L2
//! reuse, while a periphery of low-degree rows reuses nothing. So one row weight that balances
//! one graph leaves another's parts apart (H200, GCN, lp, row weight 7: R-MAT 2^22 x 16 5.49 /
//! 5.75 ms, R-MAT 2^21 x 32 3.80 / 4.51).
//!
//! The measured way: time each part's step alone ([`time_alone`], a [`Detached`] rank: the
//! rank's kernels without its waits) and cut again with uneven *shares* of the same weights: a
//! part that took longer per unit of its share gets a smaller one ([`measured_shares`]). The
//! node weights, and so the partitioner's clusters, stay as they were; only the cuts move along
//! the same order, so a part's time follows its share. (Scaling each node's weight by its part's
//! cost instead made lp re-form its clusters and cut elsewhere every round: on the H200 the parts
//! oscillated around the balance, R-MAT 2^21 x 32 GCN 3.79 / 4.49 ms, then 3.95 / 4.33, 4.30 /
//! 3.91, 3.66 / 4.41; bench/NOTES.md.) [`rebalance_ranks`] measures every cut it makes and keeps
//! the fastest.

use std::sync::Arc;

use crate::dist::comm::Communicator;
use crate::dist::detached::Detached;
use crate::dist::dist_backend::DistBackend;
use crate::dist::part_graph::relabel;
use crate::dist::partition::{Partition, PartitionMethod};
use crate::dist::train::{DistOptions, DistTrainer, StepTiming};
use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::nn::models::ModelConfig;
use crate::task::node::data::Dataset;
use crate::task::node::train::{Recorded, TrainConfig};

/// Per-op time of a step: (op, ms per step, calls per step).
pub type OpTimes = Vec<(String, f64, f64)>;

/// A partition and the dataset relabelled by it.
pub type Cut = (Partition, Dataset);

/// What the shares of one partition add up to (a part's share resolved to 1e-6 of the whole).
pub const SHARE_TOTAL: u64 = 1_000_000;

/// Part `rank` of `partition` of `data` (relabelled by it) alone on `backend`'s device, its
/// exchanges moving nothing: the timing of `reps` steps after `warmup`, then (`op_steps` > 0)
/// the per-op time of `op_steps` more steps (the backend's `time_ops`: empty where it keeps no
/// per-op events); `cuda_graph`: the steps replay a recorded CUDA graph. The steps train on
/// stale halo rows: their losses are not the run's.
#[allow(clippy::too_many_arguments)]
pub fn time_alone<B: DistBackend<Detached>>(
    backend: Arc<B>,
    data: &Dataset,
    partition: &Partition,
    rank: usize,
    options: DistOptions,
    model: &ModelConfig,
    train: &TrainConfig,
    (warmup, reps, op_steps): (usize, usize, usize),
    cuda_graph: bool,
) -> Result<(StepTiming, OpTimes)> {
    let comm = std::rc::Rc::new(Detached::new(rank, partition.parts())?);
    let mut t = DistTrainer::with_options(backend.clone(), comm, data, partition, options, model, train)?;
    if cuda_graph {
        if op_steps > 0 {
            return Err(Error::Unsupported("per-op times need eager steps: not with a recorded CUDA graph".into()));
        }
        match t.record()? {
            Recorded::Yes => {}
            Recorded::NotSupported => return Err(Error::Unsupported("this backend records no CUDA graph".into())),
            Recorded::Failed(why) => return Err(Error::Unsupported(format!("recording part {rank}'s step failed: {why}"))),
        }
    }
    for _ in 0..warmup {
        t.step()?;
    }
    t.take_timing();
    for _ in 0..reps {
        t.step()?;
    }
    let timing = t.take_timing();
    if op_steps == 0 {
        return Ok((timing, Vec::new()));
    }
    let ops = backend.time_ops(&mut || (0..op_steps).try_for_each(|_| t.step()))?;
    let n = op_steps as f64;
    Ok((timing, ops.into_iter().map(|(name, ms, calls)| (name, ms / n, calls as f64 / n)).collect()))
}

/// The next shares from `shares` (part p's share of the weight) and `part_ms` (part p's measured
/// step): part p's share over its time, renormalised to [`SHARE_TOTAL`], so that if a part's time
/// is proportional to its share the parts come out even. A part with no time (nothing to do)
/// counts at the mean rate of the others.
pub fn measured_shares(shares: &[u64], part_ms: &[f64]) -> Result<Vec<u64>> {
    if shares.len() != part_ms.len() || shares.is_empty() {
        return Err(Error::Shape(format!("{} part times for {} shares", part_ms.len(), shares.len())));
    }
    if let Some((p, t)) = part_ms.iter().enumerate().find(|(_, t)| !t.is_finite() || **t < 0.0) {
        return Err(Error::Unsupported(format!("part {p}'s measured step of {t} ms")));
    }
    if let Some(p) = shares.iter().position(|&s| s == 0) {
        return Err(Error::Unsupported(format!("part {p}'s share is 0")));
    }
    let timed = || shares.iter().zip(part_ms).filter(|(_, t)| **t > 0.0);
    let (timed_ms, timed_share) = (timed().map(|(_, t)| t).sum::<f64>(), timed().map(|(&s, _)| s as f64).sum::<f64>());
    if timed_ms <= 0.0 {
        return Ok(shares.to_vec());
    }
    let mean_rate = timed_ms / timed_share;
    // Shares one unit of time buys in each part.
    let speed: Vec<f64> = shares.iter().zip(part_ms).map(|(&s, &t)| 1.0 / if t > 0.0 { t / s as f64 } else { mean_rate }).collect();
    let all: f64 = speed.iter().sum();
    Ok(speed.iter().map(|v| ((v / all * SHARE_TOTAL as f64).round() as u64).max(1)).collect())
}

/// `weights` cut again by `method` with the [`measured_shares`] from `shares` and `part_ms`:
/// the new partition and its shares (the next round's start).
pub fn rebalanced(graph: &Csr, method: PartitionMethod, weights: &[u64], shares: &[u64], part_ms: &[f64]) -> Result<(Partition, Vec<u64>)> {
    let shares = measured_shares(shares, part_ms)?;
    Ok((Partition::with_shares(graph, method, weights, &shares)?, shares))
}

/// `rounds` rounds of [`rebalanced`] across the ranks of `comm`: each rank times its own part
/// alone on its own device (`make`'s backend), the times are gathered, and every rank cuts the
/// same new partition (the partitioners are deterministic). Starts from `start` (the even cut of
/// `data` by `weights`, and `data` relabelled by it). Every partition is measured, the last one
/// too; returns the one whose slowest part was fastest with `data` relabelled by it (`None`:
/// `start` was, and the caller keeps it: no copy of the dataset), and every partition's part
/// times (ms), `start`'s first.
#[allow(clippy::too_many_arguments)]
pub fn rebalance_ranks<B: DistBackend<Detached>, C: Communicator>(
    comm: &C,
    make: impl Fn() -> Result<B>,
    data: &Dataset,
    start: (&Partition, &Dataset),
    method: PartitionMethod,
    weights: &[u64],
    options: DistOptions,
    model: &ModelConfig,
    train: &TrainConfig,
    rounds: u32,
    (warmup, reps): (usize, usize),
) -> Result<(Option<Cut>, Vec<Vec<f64>>)> {
    let measure = |p: &Partition, d: &Dataset| -> Result<Vec<f64>> {
        let (t, _) = time_alone(Arc::new(make()?), d, p, comm.rank(), options, model, train, (warmup, reps, 0), false)?;
        let mine = [1e3 * t.step_seconds / t.steps.max(1) as f64];
        let mut all = vec![0.0f64; comm.world_size()];
        comm.all_gather(&mine, &mut all)?;
        Ok(all)
    };
    let slowest = |t: &[f64]| t.iter().copied().fold(0.0f64, f64::max);
    let mut shares = vec![SHARE_TOTAL / comm.world_size().max(1) as u64; comm.world_size()];
    let mut times = vec![measure(start.0, start.1)?];
    let mut best = None;
    let mut best_ms = slowest(&times[0]);
    for _ in 0..rounds {
        let next;
        (next, shares) = rebalanced(&data.graph, method, weights, &shares, times.last().expect("measured"))?;
        let d = relabel(data, &next.perm)?;
        let t = measure(&next, &d)?;
        if slowest(&t) < best_ms {
            best_ms = slowest(&t);
            best = Some((next, d));
        }
        times.push(t);
    }
    Ok((best, times))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::partition::node_weights;

    fn path(n: usize) -> Csr {
        let t: Vec<(u32, u32, f32)> = (0..n as u32 - 1).flat_map(|i| [(i, i + 1, 1.0), (i + 1, i, 1.0)]).collect();
        Csr::from_triplets(n, n, &t).unwrap()
    }

    #[test]
    fn a_slower_part_gets_a_smaller_share() {
        let g = path(400);
        let w = node_weights(&g, 1);
        let p = Partition::with_node_weights(&g, 2, PartitionMethod::Contiguous, &w).unwrap();
        let sizes = |p: &Partition| p.stats().iter().map(|s| s.nodes).collect::<Vec<_>>();
        assert_eq!(sizes(&p), vec![200, 200]);
        // Part 1 took 1.5x as long for the same share: it gets 2/5 of the weight, part 0 3/5.
        let half = SHARE_TOTAL / 2;
        let (q, shares) = rebalanced(&g, PartitionMethod::Contiguous, &w, &[half, half], &[2.0, 3.0]).unwrap();
        assert_eq!(shares, vec![600_000, 400_000]);
        assert_eq!(sizes(&q), vec![240, 160]);
        // Each node at its old part's cost (0.01 ms in part 0, 0.015 in part 1) would now give
        // 2.0 + 40 x 0.015 = 2.6 and 160 x 0.015 = 2.4 ms: within the one step's linear guess.
        // Times that now agree keep the shares and the cut.
        let (r, same) = rebalanced(&g, PartitionMethod::Contiguous, &w, &shares, &[2.5, 2.5]).unwrap();
        assert_eq!(same, shares);
        assert_eq!(sizes(&r), sizes(&q));
    }

    #[test]
    fn empty_parts_and_bad_times_are_handled() {
        // A part with nothing to do (0 ms) counts at the others' mean rate (here 1 ms a share,
        // as theirs: so the shares even out, each part then 4/3 ms).
        assert_eq!(measured_shares(&[1, 1, 2], &[1.0, 0.0, 2.0]).unwrap(), vec![333_333, 333_333, 333_333]);
        assert_eq!(measured_shares(&[1, 1], &[1.0, 3.0]).unwrap(), vec![750_000, 250_000]);
        assert_eq!(measured_shares(&[3, 1], &[0.0, 0.0]).unwrap(), vec![3, 1]);
        assert!(measured_shares(&[1, 1], &[1.0]).is_err());
        assert!(measured_shares(&[], &[]).is_err());
        assert!(measured_shares(&[1, 1], &[1.0, f64::NAN]).is_err());
        assert!(measured_shares(&[1, 1], &[1.0, -1.0]).is_err());
        assert!(measured_shares(&[1, 0], &[1.0, 1.0]).is_err());
    }
}
