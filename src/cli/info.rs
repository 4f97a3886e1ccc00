//! `tcgnn info GRAPH`.

use tcgnn::graph::source;

#[derive(clap::Args, Default)]
pub struct InfoArgs {
    /// Graph: path, dataset name, or rmat:SCALE:EDGE_FACTOR.
    pub graph: String,
}

pub fn run(a: &InfoArgs) -> tcgnn::Result<()> {
    let t = std::time::Instant::now();
    let g = source::load(&a.graph)?;
    let load_s = t.elapsed().as_secs_f64();
    let degs: Vec<usize> = (0..g.n_rows()).map(|r| g.row_len(r)).collect();
    let (min, max) = (degs.iter().min().copied().unwrap_or(0), degs.iter().max().copied().unwrap_or(0));
    let mean = g.nnz() as f64 / g.n_rows().max(1) as f64;
    let empty = degs.iter().filter(|&&d| d == 0).count();
    println!("graph      {}", source::display_name(&a.graph));
    println!("nodes      {} x {}", g.n_rows(), g.n_cols());
    println!("nnz        {}", g.nnz());
    println!("degree     min {min}, mean {mean:.2}, max {max}; {empty} empty rows");
    println!("CSR memory {:.2} MB", g.bytes() as f64 / 1e6);
    println!("loaded in  {load_s:.3} s ({:.1} M nnz/s)", g.nnz() as f64 / load_s / 1e6);
    Ok(())
}
