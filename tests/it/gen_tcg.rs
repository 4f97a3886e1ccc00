//! `tcgnn gen ... -o G.tcg` writes the binary CSR directly (large generated graphs for setup
//! benchmarks skip the text round trip): the same graph as the Matrix Market output.

use std::process::Command;

fn bin() -> String {
    std::env::var("TCGNN_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tcgnn").to_string())
}

#[test]
fn gen_writes_tcg_equal_to_its_mtx() {
    let d = std::env::temp_dir().join(format!("tcgnn-gen-tcg-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    for kind in ["sbm", "rmat"] {
        let mut graphs = Vec::new();
        for ext in ["mtx", "tcg"] {
            let p = d.join(format!("{kind}.{ext}"));
            let out = Command::new(bin()).args(["gen", kind, "--n", "500", "--scale", "9", "-o"]).arg(&p).output().unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            graphs.push(tcgnn::graph::source::load(&p.display().to_string()).unwrap());
        }
        assert!(graphs[0].nnz() > 0, "{kind}: empty graph");
        assert_eq!(graphs[0], graphs[1], "{kind}: .tcg and .mtx differ");
    }
    let _ = std::fs::remove_dir_all(&d);
}
