//! `tcgnn spmm GRAPH --k 128 --impl tc8 --precision f16`.

use tcgnn::bench::budget::{check_feature_width, check_spmm_command};
use tcgnn::bench::spmm::{SpmmBenchOptions, bench_spmm};
use tcgnn::gpu::Gpu;
use tcgnn::graph::source;
use tcgnn::ops::spmm::cpu::{spmm_cpu, spmm_reference_f64};
use tcgnn::ops::{GraphHandle, Impl, Precision};
use tcgnn::tensor::{Matrix, rel_error};

use super::table::print_records;

#[derive(clap::Args)]
pub struct SpmmArgs {
    /// Graph: path, dataset name, or rmat:SCALE:EDGE_FACTOR[:SEED][:relabel].
    pub graph: String,
    /// Feature width K (any K; kernels pad to a multiple of 8).
    #[arg(long, default_value_t = 128)]
    pub k: usize,
    /// Implementation (cusparse is always measured alongside as the baseline on a GPU).
    #[arg(long = "impl", value_enum, default_value_t = Impl::Auto)]
    pub imp: Impl,
    /// Precision: f32 (CUDA cores), tf32 or f16 (tensor cores, f32 accumulation).
    #[arg(long, value_enum, default_value_t = Precision::F32)]
    pub precision: Precision,
    /// `--impl hybrid`: this threshold (>= 1; 1 = all on tensor cores, 9 = all on CUDA cores)
    /// instead of the cost model's choice.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub hybrid_t: Option<u64>,
    /// Timed repetitions (median reported).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub reps: u64,
    /// Warm-up runs before timing.
    #[arg(long, default_value_t = 5)]
    pub warmup: usize,
}

pub fn run(a: &SpmmArgs) -> tcgnn::Result<()> {
    check_feature_width(a.k)?;
    let name = source::display_name(&a.graph);
    let g = source::with_random_values(source::load(&a.graph)?, 0xbeef);
    if a.imp == Impl::Cpu {
        return run_cpu(&name, g, a);
    }
    let gpu = match Gpu::probe() {
        Ok(gpu) => gpu,
        Err(e) if a.imp == Impl::Auto => {
            println!("{e}; running on the CPU");
            return run_cpu(&name, g, a);
        }
        Err(e) => return Err(e),
    };
    check_spmm_command(&g, a.k, Some(&gpu))?;
    println!("{} | {} nodes, {} nnz, K = {}", gpu.info().name, g.n_rows(), g.nnz(), a.k);
    let copy_gbs = tcgnn::bench::copy_bandwidth_gbs(&gpu)?;
    let handle = GraphHandle::new(g, Some(gpu.clone()));
    let only = if a.imp == Impl::Cusparse { vec![Impl::Cusparse] } else { vec![Impl::Cusparse, a.imp] };
    let hybrid_t = a.hybrid_t.map(|t| vec![t as usize]).unwrap_or_default();
    let opt = SpmmBenchOptions { warmup: a.warmup, reps: a.reps as usize, copy_gbs, only, tc8_sources: false, hybrid_t };
    let mut records = bench_spmm(&gpu, &name, &handle, a.k, &opt)?;
    // `--precision` picks among the requested implementation's variants (notes in parentheses
    // after the precision, as in "hybrid f16 (t=2, CC 84%)", do not count).
    records.retain(|r| {
        let v = r.variant_group();
        r.variant.starts_with("cusparse")
            || v.ends_with(&format!("{:?}", a.precision).to_lowercase())
            || (a.precision == Precision::F32 && v.ends_with("tf32"))
    });
    print_records(&records);
    Ok(())
}

fn run_cpu(name: &str, g: tcgnn::graph::Csr, a: &SpmmArgs) -> tcgnn::Result<()> {
    check_spmm_command(&g, a.k, None)?;
    let x = Matrix::random(g.n_cols(), a.k, 0x5eed);
    let reference = spmm_reference_f64(&g, &x);
    let mut times = Vec::new();
    let mut y = Matrix::zeros(0, 0);
    if a.precision != Precision::F32 {
        eprintln!("warning: --precision {:?} applies to the GPU kernels; the CPU SpMM runs in f32", a.precision);
    }
    for _ in 0..a.reps {
        let t = std::time::Instant::now();
        y = spmm_cpu(&g, &x);
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    let ms = times[times.len() / 2];
    let gflops = 2.0 * g.nnz() as f64 * a.k as f64 / (ms * 1e-3) / 1e9;
    println!(
        "{name}: CPU f32 SpMM ({} threads), {} nodes, {} nnz, K = {}: {ms:.3} ms (median of {} reps), {gflops:.2} GFLOPS, rel. error {:.1e}",
        rayon::current_num_threads(),
        g.n_rows(),
        g.nnz(),
        a.k,
        a.reps,
        rel_error(&y.data, &reference)
    );
    Ok(())
}
