//! The partitioned SpMM equals the whole-graph SpMM: forward `Y_p = A_local X_p + A_remote X_halo`
//! with the halo rows exchanged through the in-process communicator, and backward
//! `dX = Aᵀ dY` with the remote block's gradient rows returned to their owners and summed there.
//! P = 1..4, both exchange methods, every partition method, f64 (to 1e-12) and f32, on graphs
//! with a hub row, an empty part and a part with no halo.

use std::time::Duration;

use crate::common;

use tcgnn::dist::{Communicator, ExchangeMethod, Halo, InProcess, Partition, PartitionMethod};
use tcgnn::graph::Csr;
use tcgnn::util::Real;
use tcgnn::util::rng::SplitMix64;

fn spmm<T: Real>(a: &Csr, x: &[T], k: usize) -> Vec<T> {
    let mut y = vec![T::zero(); a.n_rows() * k];
    for r in 0..a.n_rows() {
        for (c, v) in a.row(r) {
            let v = T::from_f64(v as f64);
            for j in 0..k {
                y[r * k + j] += v * x[c as usize * k + j];
            }
        }
    }
    y
}

fn transpose(a: &Csr) -> Csr {
    tcgnn::graph::ops::transpose(a)
}

fn random<T: Real>(n: usize, seed: u64) -> Vec<T> {
    let mut rng = SplitMix64::new(seed);
    (0..n).map(|_| T::from_f64(rng.next_f64() * 2.0 - 1.0)).collect()
}

/// A random directed graph with values and a hub: row 0 reaches every node, every node reaches 1.
fn hub_graph(n: usize, seed: u64) -> Csr {
    let mut rng = SplitMix64::new(seed);
    let mut t = Vec::new();
    for i in 0..n as u32 {
        for _ in 0..3 {
            t.push((i, rng.below(n as u64) as u32, rng.uniform(0.1, 1.0)));
        }
        t.push((0, i, 0.25));
        t.push((i, 1.min(n as u32 - 1), 0.5));
    }
    Csr::from_triplets(n, n, &t).unwrap()
}

/// One rank's forward and backward: (its rows of Y, its rows of dX).
fn rank_step<T: Real, C: Communicator>(
    c: &C,
    p: &Partition,
    method: ExchangeMethod,
    x: &[T],
    dy: &[T],
    k: usize,
) -> tcgnn::Result<(Vec<T>, Vec<T>)> {
    let b = &p.blocks[c.rank()];
    let rows = b.first_row * k..(b.first_row + b.rows) * k;
    let halo = Halo::from_partition(p, c.rank(), method)?;
    // forward
    let mut y = spmm(&b.local, &x[rows.clone()], k);
    let mut x_halo = vec![T::from_f64(f64::NAN); halo.halo_rows() * k]; // unwritten rows fail
    halo.gather(c, &x[rows.clone()], k, &mut x_halo)?;
    let remote = spmm(&b.remote, &x_halo, k);
    y.iter_mut().zip(&remote).for_each(|(y, &r)| *y += r);
    // backward
    let mut dx = spmm(&b.local_t, &dy[rows.clone()], k);
    let g_halo = spmm(&b.remote_t, &dy[rows], k);
    halo.scatter_add(c, &g_halo, k, &mut dx)?;
    Ok((y, dx))
}

/// Inputs in the partition's order: (X, dY) random, n x k each.
fn inputs<T: Real>(p: &Partition, k: usize) -> (Vec<T>, Vec<T>) {
    (random(p.nodes() * k, 11), random(p.nodes() * k, 12))
}

/// The ranks' rows, concatenated, against the whole-graph products.
fn compare<T: Real>(g: &Csr, p: &Partition, (x, dy): (&[T], &[T]), k: usize, out: Vec<(Vec<T>, Vec<T>)>, tol: f64, what: &str) {
    let a = p.perm.apply_to_csr(g).unwrap();
    let y_ref = spmm(&a, x, k);
    let dx_ref = spmm(&transpose(&a), dy, k);
    let (y, dx): (Vec<T>, Vec<T>) = out.into_iter().fold((Vec::new(), Vec::new()), |(mut y, mut dx), (py, pdx)| {
        y.extend(py);
        dx.extend(pdx);
        (y, dx)
    });
    for (name, got, want) in [("Y", &y, &y_ref), ("dX", &dx, &dx_ref)] {
        assert_eq!(got.len(), want.len());
        let err = got.iter().zip(want.iter()).map(|(a, b)| (a.to_f64() - b.to_f64()).abs()).fold(0.0, f64::max);
        let scale = want.iter().map(|v| v.to_f64().abs()).fold(1.0, f64::max);
        assert!(err <= tol * scale, "{name}: max error {err:e} (P = {}, {what}, {:?})", p.parts(), p.method);
    }
}

/// Runs the distributed forward and backward on `p` with in-process ranks and compares.
fn check<T: Real>(g: &Csr, p: &Partition, method: ExchangeMethod, k: usize, tol: f64) {
    let (x, dy) = inputs::<T>(p, k);
    let out = InProcess::run(p.parts(), Duration::from_secs(30), |c| rank_step(&c, p, method, &x, &dy, k)).unwrap();
    compare(g, p, (&x, &dy), k, out, tol, &format!("{method:?}"));
}

const METHODS: [PartitionMethod; 4] =
    [PartitionMethod::Contiguous, PartitionMethod::Community, PartitionMethod::Metis, PartitionMethod::LabelProp];
const EXCHANGES: [ExchangeMethod; 2] = [ExchangeMethod::PointToPoint, ExchangeMethod::AllGather];

#[test]
fn partitioned_spmm_matches_whole_graph_f64() {
    let g = hub_graph(61, 5);
    for parts in 1..=4 {
        for m in METHODS {
            let p = match Partition::new(&g, parts, m) {
                Ok(p) => p,
                Err(e) if m == PartitionMethod::Metis && e.to_string().contains("no METIS") => continue,
                Err(e) => panic!("{e}"),
            };
            assert_eq!(p.blocks.iter().map(|b| b.rows).sum::<usize>(), 61);
            for ex in EXCHANGES {
                check::<f64>(&g, &p, ex, 5, 1e-12);
            }
        }
    }
}

#[test]
fn partitioned_spmm_matches_whole_graph_f32() {
    let g = hub_graph(40, 9);
    for parts in [2, 3] {
        let p = Partition::new(&g, parts, PartitionMethod::Community).unwrap();
        for ex in EXCHANGES {
            check::<f32>(&g, &p, ex, 8, 1e-5);
        }
    }
}

#[test]
fn empty_part_and_part_without_halo() {
    // Nodes 0..4: a cycle of their own (part 0: no halo, and nobody needs its rows);
    // nodes 4..12: a hub graph split over parts 2 and 3; part 1 is empty.
    let mut t: Vec<(u32, u32, f32)> = (0..4).map(|i| (i, (i + 1) % 4, 1.0 + i as f32)).collect();
    for i in 4..12u32 {
        t.push((4, i, 0.5));
        t.push((i, 4 + (i * 5) % 8, 0.75));
    }
    let g = Csr::from_triplets(12, 12, &t).unwrap();
    let assign = [0, 0, 0, 0, 2, 2, 2, 2, 3, 3, 3, 3];
    let p = Partition::from_assignment(&g, &assign, 4).unwrap();
    assert_eq!(p.blocks[1].rows, 0);
    assert_eq!(p.blocks[0].halo_rows(), 0);
    assert!(p.blocks[0].send.iter().all(|s| s.is_empty()));
    assert!(p.blocks[2].halo_rows() > 0 && p.blocks[3].halo_rows() > 0);
    for ex in EXCHANGES {
        check::<f64>(&g, &p, ex, 3, 1e-12);
    }
    // One node, more parts than nodes.
    let one = Csr::from_triplets(1, 1, &[(0, 0, 2.0)]).unwrap();
    let p = Partition::new(&one, 3, PartitionMethod::Contiguous).unwrap();
    for ex in EXCHANGES {
        check::<f64>(&one, &p, ex, 2, 1e-12);
    }
}

#[test]
fn halo_refuses_the_wrong_rank_and_sizes() {
    let g = hub_graph(20, 3);
    let p = Partition::new(&g, 2, PartitionMethod::Contiguous).unwrap();
    let errs = InProcess::run(2, Duration::from_secs(5), |c| {
        // Every rank uses part 0's lists: rank 1 must be refused before it sends anything.
        let halo = Halo::from_partition(&p, 0, ExchangeMethod::PointToPoint)?;
        let b = &p.blocks[0];
        let mut out = vec![0.0f64; halo.halo_rows()];
        let r = halo.gather(&c, &vec![0.0; b.rows], 1, &mut out);
        if c.rank() == 0 {
            // Rank 0 is right but its peer never sends: it must time out, not hang.
            return Ok(r.is_err());
        }
        Ok(r.unwrap_err().to_string().contains("part 0 of 2 on rank 1"))
    })
    .unwrap();
    assert_eq!(errs, vec![true, true]);
    let e = InProcess::run(1, Duration::from_secs(5), |c| {
        let p1 = Partition::new(&g, 1, PartitionMethod::Contiguous).unwrap();
        let halo = Halo::from_partition(&p1, 0, ExchangeMethod::AllGather)?;
        halo.gather(&c, &[0.0f64; 3], 1, &mut [])
    });
    assert!(e.unwrap_err().to_string().contains("own rows"));
    assert!(Halo::from_partition(&p, 2, ExchangeMethod::AllGather).is_err());
}

/// NCCL: a world of one per process on one GPU (plumbing: collectives and a self-exchange), and
/// the partitioned SpMM over two GPUs when a second one is present.
#[test]
fn nccl_world_plumbing() {
    use tcgnn::dist::NcclCommunicator;
    use tcgnn::dist::nccl::{nccl_present, new_unique_id};
    let Some(gpu) = common::gpu_or_skip("nccl_world_plumbing") else { return };
    if let Err(e) = nccl_present() {
        println!("nccl_world_plumbing: skipped: {e}");
        return;
    }
    let id = new_unique_id().unwrap();
    let c = NcclCommunicator::new(gpu.clone(), 0, 1, &id).unwrap();
    assert_eq!(std::env::var("NCCL_NVLS_ENABLE").as_deref(), Ok("0"));
    let mut buf = vec![1.5f32, -2.0, 3.25];
    c.all_reduce_sum(&mut buf).unwrap();
    assert_eq!(buf, vec![1.5, -2.0, 3.25]);
    let mut all = vec![0f64; 2];
    c.all_gather(&[0.1f64, 0.2], &mut all).unwrap();
    assert_eq!(all, vec![0.1, 0.2]);
    let mut mine = vec![0f32; 2];
    c.reduce_scatter_sum(&[4.0f32, 5.0], &mut mine).unwrap();
    assert_eq!(mine, vec![4.0, 5.0]);
    let mut got = vec![0f64; 3];
    c.exchange(&[(0, &[7.0f64, 8.0, 9.0][..])], &mut [(0, &mut got[..])]).unwrap();
    assert_eq!(got, vec![7.0, 8.0, 9.0]);
    assert!(c.all_gather(&[1.0f32], &mut [0.0; 3]).is_err());
    drop(c);

    // Two GPUs of one host: one thread (and communicator) per GPU, the partitioned SpMM exact.
    let Ok(gpu1) = tcgnn::gpu::Gpu::new(1) else {
        println!("nccl_world_plumbing: two-GPU part skipped: one GPU");
        return;
    };
    let g = hub_graph(300, 4);
    let p = Partition::new(&g, 2, PartitionMethod::Contiguous).unwrap();
    let (x, dy) = inputs::<f64>(&p, 16);
    for method in EXCHANGES {
        let id = new_unique_id().unwrap(); // one id per world
        let out = std::thread::scope(|s| {
            let hs: Vec<_> = [gpu.clone(), gpu1.clone()]
                .into_iter()
                .enumerate()
                .map(|(rank, gpu)| {
                    let (p, x, dy) = (&p, &x, &dy);
                    // Comm is not Send: created on the thread that uses it.
                    s.spawn(move || -> tcgnn::Result<(Vec<f64>, Vec<f64>)> {
                        let c = NcclCommunicator::new(gpu, rank, 2, &id)?;
                        rank_step(&c, p, method, x, dy, 16)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap().unwrap()).collect::<Vec<_>>()
        });
        compare(&g, &p, (&x, &dy), 16, out, 1e-12, "NCCL, 2 GPUs");
    }
}

/// Without libnccl (CI, this build machine) NCCL calls are a clear error, never a panic.
#[test]
fn no_nccl_is_an_error() {
    use tcgnn::dist::nccl::{nccl_present, new_unique_id};
    if nccl_present().is_ok() {
        println!("no_nccl_is_an_error: skipped: libnccl is present");
        return;
    }
    let e = new_unique_id().unwrap_err().to_string();
    assert!(e.contains("no NCCL") && e.contains("libnccl"), "{e}");
}
