//! The default run: a GCN trained on a generated stochastic block model, then SpMM on a
//! generated R-MAT graph, with whatever the machine has (GPU if present, CPU otherwise).

use tcgnn::bench::budget::{check_feature_width, check_spmm_command};
use tcgnn::bench::spmm::{SpmmBenchOptions, bench_spmm};
use tcgnn::gpu::Gpu;
use tcgnn::graph::rmat::{RmatParams, rmat};
use tcgnn::graph::source::with_random_values;
use tcgnn::ops::GraphHandle;
use tcgnn::ops::spmm::cpu::{spmm_cpu, spmm_reference_f64};
use tcgnn::tensor::{Matrix, rel_error};

use super::table::print_records;

#[derive(clap::Args)]
pub struct DemoArgs {
    /// R-MAT scale (2^scale nodes).
    #[arg(long, default_value_t = 16)]
    pub scale: u32,
    /// R-MAT edge factor (edges per node before deduplication).
    #[arg(long, default_value_t = 16)]
    pub edge_factor: u32,
    /// Feature width K.
    #[arg(long, default_value_t = 128)]
    pub k: usize,
}

impl Default for DemoArgs {
    fn default() -> Self {
        DemoArgs { scale: 16, edge_factor: 16, k: 128 }
    }
}

pub fn run(a: &DemoArgs) -> tcgnn::Result<()> {
    println!("tcgnn demo 1/2: GCN 2x16 trained on a generated stochastic block model (20,000 nodes, 8 classes)");
    let train =
        super::train_cmd::TrainArgs { epochs: 100, features: Some(32.into()), ..super::train_cmd::TrainArgs::for_graph("sbm:20000:8:10") };
    super::train_cmd::run(&train)?;
    println!();
    print!("tcgnn demo 2/2: ");
    check_feature_width(a.k)?;
    let g = with_random_values(rmat(RmatParams::new(a.scale, a.edge_factor, 1)), 0xbeef);
    check_spmm_command(&g, a.k, None)?;
    let name = format!("rmat:{}:{}", a.scale, a.edge_factor);
    println!("SpMM Y = S X on R-MAT 2^{} ({} nodes, {} nnz), K = {}", a.scale, g.n_rows(), g.nnz(), a.k);

    let x = Matrix::random(g.n_cols(), a.k, 0x5eed);
    let reference = spmm_reference_f64(&g, &x);
    let t = std::time::Instant::now();
    let y = spmm_cpu(&g, &x);
    let ms = t.elapsed().as_secs_f64() * 1e3;
    println!(
        "CPU  f32 ({} threads): {ms:.2} ms, {:.2} GFLOPS, rel. error {:.1e}",
        rayon::current_num_threads(),
        2.0 * g.nnz() as f64 * a.k as f64 / (ms * 1e-3) / 1e9,
        rel_error(&y.data, &reference)
    );

    let gpu = match Gpu::probe() {
        Ok(gpu) => gpu,
        Err(e) => {
            println!("GPU: {e}. Only the CPU part ran.");
            return Ok(());
        }
    };
    println!("GPU: {}", gpu.info().name);
    check_spmm_command(&g, a.k, Some(&gpu))?;
    let copy_gbs = tcgnn::bench::copy_bandwidth_gbs(&gpu)?;
    let handle = GraphHandle::new(g, Some(gpu.clone()));
    let opt = SpmmBenchOptions { warmup: 5, reps: 20, copy_gbs, only: vec![], tc8_sources: false, hybrid_t: vec![] };
    print_records(&bench_spmm(&gpu, &name, &handle, a.k, &opt)?);
    Ok(())
}
