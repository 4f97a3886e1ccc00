//! Shared by the integration tests: GPU discovery that skips instead of failing, dataset
//! lookup, random graphs with the odd shapes every kernel must survive.
#![allow(dead_code)]

pub mod cli;
pub mod sample;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use tcgnn::gpu::Gpu;
use tcgnn::graph::Csr;
use tcgnn::util::rng::SplitMix64;

/// The GPU, or `None` after printing "skipped: <reason>" where there is none to test on (no
/// driver or device, or one older than the kernels need). A GPU that is there but fails
/// otherwise — the kernels' PTX not loading above all — fails the test: skipping then made every
/// GPU test of a binary report "ok" with nothing run (bench/NOTES.md, 2026-11-27 late night, item
/// 6). One context per test binary.
///
/// The calling test then holds the binary's one GPU lock until its thread ends: all tests share
/// one context and one stream, and a CUDA-graph capture in one test is invalidated by another
/// test's allocation or launch (seen once the tests became one binary: two capturing tests
/// failed with `CUDA_ERROR_STREAM_CAPTURE_INVALIDATED`). GPU tests run one at a time; CPU
/// tests stay parallel.
pub fn gpu_or_skip(test: &str) -> Option<Arc<Gpu>> {
    // (skip, reason) when there is no GPU to use.
    static GPU: OnceLock<Result<Arc<Gpu>, (bool, String)>> = OnceLock::new();
    let probed = GPU.get_or_init(|| {
        Gpu::probe().map_err(|e| (matches!(e, tcgnn::error::Error::NoGpu(_) | tcgnn::error::Error::Unsupported(_)), e.to_string()))
    });
    match probed {
        Ok(g) => {
            hold_gpu_lock();
            Some(g.clone())
        }
        Err((true, e)) => {
            println!("{test}: skipped: {e}");
            None
        }
        Err((false, e)) => panic!("{test}: a GPU is present but unusable: {e}"),
    }
}

/// Takes the binary's GPU lock for the calling thread (once: a second call on the thread is a
/// no-op); the harness runs each test on a thread of its own, so the lock goes with the test's
/// thread, panicking or not.
fn hold_gpu_lock() {
    static GPU_TESTS: Mutex<()> = Mutex::new(());
    thread_local! {
        static HELD: std::cell::RefCell<Option<MutexGuard<'static, ()>>> = const { std::cell::RefCell::new(None) };
    }
    HELD.with(|held| {
        let mut held = held.borrow_mut();
        if held.is_none() {
            // A test that panicked while holding it leaves it poisoned; the GPU is still usable.
            *held = Some(GPU_TESTS.lock().unwrap_or_else(|e| e.into_inner()));
        }
    });
}

/// [`gpu_or_skip`] for a test that records CUDA graphs: the binary's tests share one GPU
/// stream, and a capture records whatever any thread queues on it, so such tests hold this
/// lock while they run (the test harness runs tests on parallel threads).
pub fn gpu_serial_or_skip(test: &str) -> Option<(Arc<Gpu>, MutexGuard<'static, ()>)> {
    static SERIAL: Mutex<()> = Mutex::new(());
    let gpu = gpu_or_skip(test)?;
    // A test that panicked while holding the lock leaves it poisoned; the GPU is still usable.
    Some((gpu, SERIAL.lock().unwrap_or_else(|e| e.into_inner())))
}

/// `$TCGNN_DATASETS` or `../shared/datasets` next to the repository.
pub fn datasets_dir() -> PathBuf {
    std::env::var_os("TCGNN_DATASETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/datasets"))
}

/// Random graph: `n` nodes, about `avg_deg` edges per row, random values in [-1, 1); rows in
/// `empty_every` steps are left empty.
pub fn random_graph(n: usize, avg_deg: usize, empty_every: usize, seed: u64) -> Csr {
    let mut rng = SplitMix64::new(seed);
    let mut t = Vec::new();
    for r in 0..n {
        if empty_every > 0 && r % empty_every == 0 {
            continue;
        }
        let deg = rng.below(2 * avg_deg as u64 + 1) as usize;
        for _ in 0..deg {
            t.push((r as u32, rng.below(n as u64) as u32, rng.uniform(-1.0, 1.0)));
        }
    }
    Csr::from_triplets(n, n, &t).unwrap()
}

/// A graph where one row holds about a third of all edges (load-balance worst case).
pub fn one_huge_row(n: usize, avg_deg: usize, seed: u64) -> Csr {
    let mut rng = SplitMix64::new(seed);
    let mut t = Vec::new();
    let total = n * avg_deg;
    let heavy = (n / 3) as u32;
    for i in 0..total / 3 {
        t.push((heavy, (i % n) as u32, rng.uniform(-1.0, 1.0)));
    }
    for _ in 0..2 * total / 3 {
        t.push((rng.below(n as u64) as u32, rng.below(n as u64) as u32, rng.uniform(-1.0, 1.0)));
    }
    Csr::from_triplets(n, n, &t).unwrap()
}

/// The graphs every SpMM/SDDMM kernel is tested on: (name, graph).
pub fn odd_shapes(seed: u64) -> Vec<(String, Csr)> {
    vec![
        ("one node".into(), Csr::from_triplets(1, 1, &[(0, 0, 0.75)]).unwrap()),
        ("one node, no edge".into(), Csr::from_triplets(1, 1, &[]).unwrap()),
        ("n=37 with empty rows".into(), random_graph(37, 5, 3, seed)),
        ("n=1000 random".into(), random_graph(1000, 12, 0, seed + 1)),
        ("n=2051 every 7th row empty".into(), random_graph(2051, 20, 7, seed + 2)),
        ("one row with a third of the edges".into(), one_huge_row(3001, 16, seed + 3)),
    ]
}

/// Random features for `s` and the f64 reference Y = S X, with S's values and X rounded to f16
/// first when the kernel under test reads f16 (so only the kernel's own error is measured).
pub fn spmm_problem(s: &Csr, k: usize, prec: tcgnn::ops::Precision) -> (tcgnn::tensor::Matrix, Vec<f64>) {
    use tcgnn::ops::spmm::cpu::spmm_reference_f64;
    let x = tcgnn::tensor::Matrix::random(s.n_cols(), k, 7 + k as u64);
    let want = match prec {
        tcgnn::ops::Precision::F16 => {
            let vals: Vec<f32> = s.values().iter().map(|&v| half::f16::from_f32(v).to_f32()).collect();
            spmm_reference_f64(&s.clone().with_values(vals).unwrap(), &x.rounded_f16())
        }
        _ => spmm_reference_f64(s, &x),
    };
    (x, want)
}
