//! Plain-text tables of benchmark records for the terminal.

use tcgnn::bench::Record;

pub fn print_records(records: &[Record]) {
    println!(
        "{:<22} {:>5} {:<28} {:>10} {:>9} {:>9} {:>9} {:>7} {:>9}",
        "graph", "K", "implementation", "ms", "GFLOPS", "vs cuSP", "vs f16", "floor", "rel.err"
    );
    for r in records {
        let f = |v: Option<f64>, d: usize| v.map_or("-".to_string(), |x| format!("{x:.d$}"));
        match &r.error {
            Some(e) => println!("{:<22} {:>5} {:<28} not run: {e}", r.graph, r.k, r.variant),
            None => println!(
                "{:<22} {:>5} {:<28} {:>10} {:>9} {:>8}x {:>8}x {:>7} {:>9}",
                r.graph,
                r.k,
                r.variant,
                f(r.ms, 4),
                f(r.gflops, 1),
                f(r.speedup_vs_cusparse, 2),
                f(r.speedup_vs_cusparse_f16, 2),
                f(r.floor_fraction, 2),
                r.rel_error.map_or("-".into(), |e| format!("{e:.1e}"))
                    + &r.setup_ms.map_or(String::new(), |s| format!("  (one-time {s:.1} ms)"))
            ),
        }
    }
}
