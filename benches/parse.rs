//! Parsing throughput: Matrix Market (.mtx.gz) and edge lists, in nonzeros per second.
//!
//! Inputs: a 2^18-node R-MAT graph (edge factor 16, 3.9 M nnz) written to a temp dir, and the largest real
//! dataset (ogbl-ddi, 2.1 M nnz) from `$TCGNN_DATASETS` (default `../shared/datasets`) if present.

use std::path::PathBuf;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tcgnn::graph::edgelist::{EdgeListOptions, read_edgelist};
use tcgnn::graph::mtx::{read_mtx, write_mtx};
use tcgnn::graph::rmat::{RmatParams, rmat};

fn datasets() -> PathBuf {
    std::env::var_os("TCGNN_DATASETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/datasets"))
}

fn bench_parse(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("tcgnn-bench-parse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let g = rmat(RmatParams::new(18, 16, 1));
    let mtx = dir.join("rmat18.mtx.gz");
    write_mtx(&mtx, &g).unwrap();
    // The same graph as a gzipped 0-based edge list.
    let el = dir.join("rmat18.txt.gz");
    {
        use std::io::Write;
        let f = std::fs::File::create(&el).unwrap();
        let mut w = flate2::write::GzEncoder::new(std::io::BufWriter::new(f), flate2::Compression::fast());
        writeln!(w, "# FromNodeId\tToNodeId").unwrap();
        for r in 0..g.n_rows() {
            for (col, _) in g.row(r) {
                writeln!(w, "{r}\t{col}").unwrap();
            }
        }
        w.finish().unwrap();
    }

    let mut group = c.benchmark_group("parse");
    group.sample_size(10);
    group.throughput(Throughput::Elements(g.nnz() as u64));
    group.bench_function(format!("mtx.gz rmat18 ({} nnz)", g.nnz()), |b| b.iter(|| read_mtx(&mtx).unwrap()));
    group.bench_function("edgelist.gz rmat18", |b| b.iter(|| read_edgelist(&el, EdgeListOptions::default()).unwrap()));
    let ddi = datasets().join("ogbl-ddi.mtx.gz");
    if ddi.exists() {
        let nnz = read_mtx(&ddi).unwrap().nnz();
        group.throughput(Throughput::Elements(nnz as u64));
        group.bench_function(format!("mtx.gz ogbl-ddi ({nnz} nnz)"), |b| b.iter(|| read_mtx(&ddi).unwrap()));
    } else {
        eprintln!("skipped ogbl-ddi: {} not found", ddi.display());
    }
    group.finish();
    std::fs::remove_dir_all(&dir).ok();
}

criterion_group!(benches, bench_parse);
criterion_main!(benches);
