//! Compiles the `kernels-gpu` crate to PTX with the pinned nightly's NVPTX backend and leaves it
//! in OUT_DIR for `include_str!` (the role `cuda_builder` plays in rust-cuda, without LLVM 7).
//!
//! Target architecture: `TCGNN_CUDA_ARCH` (sm_80, sm_86, sm_89, sm_90; default sm_90).

use std::path::PathBuf;
use std::process::Command;

const ARCHS: [&str; 4] = ["sm_80", "sm_86", "sm_89", "sm_90"];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let kernels = manifest_dir.join("kernels-gpu");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    println!("cargo:rerun-if-changed=kernels-gpu/src");
    println!("cargo:rerun-if-changed=kernels-gpu/Cargo.toml");
    println!("cargo:rerun-if-env-changed=TCGNN_CUDA_ARCH");

    let arch = std::env::var("TCGNN_CUDA_ARCH").unwrap_or_else(|_| "sm_90".into());
    if !ARCHS.contains(&arch.as_str()) {
        panic!("TCGNN_CUDA_ARCH={arch} is not supported; use one of {ARCHS:?} (mma.sync m16n8k* needs sm_80+)");
    }

    let ptx = out_dir.join("kernels.ptx");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&kernels)
        .args(["rustc", "--release", "--target", "nvptx64-nvidia-cuda", "-Zbuild-std=core"])
        .arg("--target-dir")
        .arg(out_dir.join("kernels-target")) // own target dir: no wait on the outer build lock
        .arg("--")
        .arg(format!("--emit=asm={}", ptx.display()))
        .args(["-C", &format!("target-cpu={arch}")])
        // PTX ISA 8.4 (CUDA 12.4 drivers and newer): sm_90's bulk copies, mbarrier transaction
        // counts and vector reductions need it; rustc's default for these targets is 7.8.
        .args(["-C", "target-feature=+ptx84"]);
    // The outer build's wrappers and flags are for the host (clippy-driver, -D warnings, ...).
    for var in [
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "MFLAGS",
    ] {
        cmd.env_remove(var);
    }
    let output = cmd.output().unwrap_or_else(|e| panic!("could not run cargo to build kernels-gpu: {e}"));
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let hint = if stderr.contains("rust-src") || stderr.contains("build-std") {
            "\nhint: the device crate needs the pinned nightly with rust-src:\n  rustup toolchain install nightly-2026-05-20 --component rust-src clippy rustfmt\n"
        } else if stderr.contains("nvptx64") {
            "\nhint: the nightly's nvptx64-nvidia-cuda target builds core from rust-src (-Zbuild-std=core); check `rustup component list --installed`\n"
        } else {
            ""
        };
        panic!("building kernels-gpu to PTX ({arch}) failed:\n{stderr}{hint}");
    }
    if !ptx.exists() {
        panic!("kernels-gpu built but {} is missing", ptx.display());
    }
    println!("cargo:rerun-if-changed=kernels-gpu/register_caps.rs");
    let text = std::fs::read_to_string(&ptx).unwrap_or_else(|e| panic!("reading {}: {e}", ptx.display()));
    // A temporary name first: an interrupted write must not leave a cut PTX that the next
    // build (the kernels unchanged, so not rebuilt) would embed.
    let tmp = ptx.with_extension("ptx.tmp");
    std::fs::write(&tmp, cap_registers(&text, &arch)).unwrap_or_else(|e| panic!("writing {}: {e}", tmp.display()));
    std::fs::rename(&tmp, &ptx).unwrap_or_else(|e| panic!("renaming {} to {}: {e}", tmp.display(), ptx.display()));
    println!("cargo:rustc-env=TCGNN_PTX_ARCH={arch}");
    // The commit benchmark reports name (the GPU machine has no git); follow HEAD so it is
    // never stale.
    for f in [".git/HEAD", ".git/refs/heads", ".git/packed-refs"] {
        if manifest_dir.join(f).exists() {
            println!("cargo:rerun-if-changed={f}");
        }
    }
    let commit = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=TCGNN_GIT_COMMIT={commit}");
}

include!("kernels-gpu/register_caps.rs");

/// The PTX with `.maxnreg N` between each entry's parameter list and its body (where PTX puts
/// performance directives) for the caps of `arch`. Caps an earlier run wrote are dropped first
/// (the kernels' build leaves the file alone when nothing changed; rustc writes no `.maxnreg`);
/// an entry in the table but not in the PTX is a build error.
fn cap_registers(ptx: &str, arch: &str) -> String {
    let mut out: String = ptx.split_inclusive('\n').filter(|l| !l.starts_with(".maxnreg ")).collect();
    for &(name, _, regs) in REGISTER_CAPS.iter().filter(|c| c.1 == arch) {
        let head = format!(".entry {name}(");
        let at = out.find(&head).unwrap_or_else(|| panic!("register cap for {name}: no such entry in the PTX"));
        let params_end = at + out[at..].find("\n)\n").unwrap_or_else(|| panic!("register cap for {name}: entry without parameters"));
        out.insert_str(params_end + 3, &format!(".maxnreg {regs}\n"));
    }
    out
}
