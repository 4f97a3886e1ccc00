//! Running the `tcgnn` binary on hostile inputs: under an address-space limit (an allocation
//! sized by a hostile header fails instead of taking the machine), killed past a time limit (a
//! hang fails the test), stdout and stderr captured.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Address-space limit for the runs (KiB): far below what the hostile sizes ask for.
pub const LIMIT_KB: u64 = 8 << 20;

/// The binary under test: `$TCGNN_BIN` (the GPU machine's staged one) or cargo's.
pub fn bin() -> String {
    std::env::var("TCGNN_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tcgnn").to_string())
}

pub struct Outcome {
    pub code: Option<i32>,
    pub stderr: String,
    pub stdout: String,
}

/// Runs `tcgnn ARGS` in `dir` (also its `$TCGNN_DATASETS`), stdout into `out` and stderr beside
/// it (`out` with the extension `err`); panics if it runs past `limit`.
pub fn run_tcgnn(dir: &Path, args: &[&str], out: &Path, limit: Duration) -> Outcome {
    let err = out.with_extension("err");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {LIMIT_KB} && exec \"$0\" \"$@\""))
        .arg(bin())
        .args(args)
        .current_dir(dir)
        .env("TCGNN_DATASETS", dir)
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            child.kill().ok();
            child.wait().ok();
            panic!("tcgnn {args:?} hung (still running after {limit:?})");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let read = |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned();
    Outcome { code: status.code(), stderr: read(&err), stdout: read(out) }
}
