//! Is GIN's tf32 gradient error (its first weight's gradient reached 4.8e-2 against f64 in
//! tests/nn_gpu.rs) rounding amplification or a reduced-precision defect? One GIN layer's ops,
//! in `GinConv`'s order (Xᵀ, sum aggregation, MLP), run on the GPU in tf32 and on the CPU in
//! f64, checked against the rounding bounds of tf32:
//!
//! - **each product alone** (inputs: the f64 reference's intermediates rounded to f32, so only
//!   the product's own rounding is measured): a tf32 product rounds (or truncates) each input
//!   to 10 mantissa bits, relative error at most e_in = 2^-10 per input, and accumulates in f32
//!   over K terms, so |fl(AB) - AB| <= (2 e_in + e_in^2 + K 2^-24) |A||B| element by element;
//!   in Frobenius norm the measured error must stay under that times || |A||B| ||. A kernel
//!   that breaks this bound has a defect. The ratio || |A||B| || / ||AB|| is the amplification:
//!   sums of many terms of both signs (Xᵀ dP over all rows) lose that factor of relative
//!   accuracy to rounding that is harmless term by term.
//! - **the whole chain** (each op fed with the GPU's own previous outputs): the error of
//!   C = A B is bounded by its own rounding plus ||ΔA|| ||B|| + ||A|| ||ΔB|| + ||ΔA|| ||ΔB||
//!   (Frobenius norms), elementwise ops add their input errors, and where the ReLU's mask
//!   flipped dZ's error is that element's whole dH. Measured within the bound at
//!   every step: the first weight's gradient error is compounded rounding, amplified, not a
//!   defect.
//!
//! Prints a table per graph (run with --nocapture): op, relative error, bound, amplification.
//! CPU-only runs check the f32 CPU backend against f64 with the f32 bounds (the check itself
//! is exercised without a GPU).

use crate::common;

use std::collections::BTreeMap;

use tcgnn::graph::Csr;
use tcgnn::graph::ops::pattern;
use tcgnn::nn::param::torch_linear_uniform;
use tcgnn::nn::{CpuBackend, CudaBackend, Ops, Side};
use tcgnn::ops::{Impl, Precision};
use tcgnn::tensor::Matrix;
use tcgnn::util::rng::SplitMix64;

type Mats = BTreeMap<&'static str, Matrix>;

/// The products of one GIN layer: (output, left operand or "A" / "At" for the aggregation,
/// transpose left, right operand, transpose right).
const PRODUCTS: [(&str, &str, bool, &str, bool); 7] = [
    ("P", "X", false, "W1", false),
    ("S", "A", false, "P", false),
    ("Out0", "H", false, "W2", false),
    ("dW2", "H", true, "dY", false),
    ("dH", "dY", false, "W2", true),
    ("G", "At", false, "dZ", false),
    ("dW1", "X", true, "dP", false),
];

/// `out = op(l) op(r)` (or the aggregation of `r`) on backend `b`, from host matrices.
fn product<B: Ops>(b: &B, csr: &Csr, prod: (&str, &str, bool, &str, bool), l: Option<&Matrix>, r: &Matrix) -> Matrix {
    let (_, left, tl, _, tr) = prod;
    let rm = b.upload(r).unwrap();
    let out = match left {
        "A" | "At" => {
            let g = b.graph(csr.clone()).unwrap();
            let side = if left == "A" { Side::Forward } else { Side::Transposed };
            let vals = b.graph_values(&g, side).unwrap();
            let mut y = b.matrix(r.rows, r.cols).unwrap();
            b.spmm(&g, side, &vals, &rm, &mut y).unwrap();
            y
        }
        _ => {
            let l = l.expect("a dense left operand");
            let lm = b.upload(l).unwrap();
            let rows = if tl { l.cols } else { l.rows };
            let cols = if tr { r.rows } else { r.cols };
            let mut y = b.matrix(rows, cols).unwrap();
            b.gemm(&lm, tl, &rm, tr, 0.0, &mut y).unwrap();
            y
        }
    };
    b.download(&out).unwrap()
}

/// One GIN layer (eps = 0), forward and backward, as `GinConv` runs it; every intermediate.
fn chain<B: Ops>(b: &B, csr: &Csr, inputs: &Mats) -> Mats {
    let mut m = inputs.clone();
    let run = |m: &Mats, name: &str| {
        let p = PRODUCTS.iter().find(|p| p.0 == name).copied().unwrap();
        product(b, csr, p, m.get(p.1), &m[p.3])
    };
    let up = |x: &Matrix| b.upload(x).unwrap();
    let p = run(&m, "P");
    m.insert("P", p);
    let s = run(&m, "S");
    m.insert("S", s);
    // Z = S + P + b1; H = relu(Z).
    let mut z = up(&m["S"]);
    b.add_assign(&mut z, &up(&m["P"])).unwrap();
    b.bias_add(&mut z, &up(&m["b1"])).unwrap();
    m.insert("Z", b.download(&z).unwrap());
    b.relu(&mut z).unwrap();
    m.insert("H", b.download(&z).unwrap());
    let out0 = run(&m, "Out0");
    m.insert("Out0", out0);
    let dw2 = run(&m, "dW2");
    m.insert("dW2", dw2);
    let dh = run(&m, "dH");
    m.insert("dH", dh);
    // dZ = dH ⊙ (H > 0).
    let mut dz = up(&m["dH"]);
    b.relu_backward(&up(&m["H"]), &mut dz).unwrap();
    m.insert("dZ", b.download(&dz).unwrap());
    let g = run(&m, "G");
    m.insert("G", g);
    // dP = Aᵀ dZ + dZ.
    let mut dp = up(&m["G"]);
    b.add_assign(&mut dp, &up(&m["dZ"])).unwrap();
    m.insert("dP", b.download(&dp).unwrap());
    let dw1 = run(&m, "dW1");
    m.insert("dW1", dw1);
    m
}

fn norm(m: &Matrix) -> f64 {
    m.data.iter().map(|&v| (v as f64).powi(2)).sum::<f64>().sqrt()
}

fn diff(a: &Matrix, b: &Matrix) -> f64 {
    a.data.iter().zip(&b.data).map(|(&x, &y)| (x as f64 - y as f64).powi(2)).sum::<f64>().sqrt()
}

fn abs(m: &Matrix) -> Matrix {
    Matrix { rows: m.rows, cols: m.cols, data: m.data.iter().map(|v| v.abs()).collect() }
}

/// The layer's inputs: features in [-1, 1), torch-initialised MLP 12 -> 16 -> 16 (the
/// nn_gpu.rs shapes), a random output gradient.
fn inputs(n: usize, seed: u64) -> Mats {
    let (f, h, o) = (12, 16, 16);
    let mut rng = SplitMix64::new(seed);
    let mut m = Mats::new();
    m.insert("X", Matrix::random(n, f, seed + 1));
    m.insert("W1", torch_linear_uniform(f, f, h, &mut rng));
    m.insert("b1", torch_linear_uniform(f, 1, h, &mut rng));
    m.insert("W2", torch_linear_uniform(h, h, o, &mut rng));
    m.insert("dY", Matrix::random(n, o, seed + 2));
    m
}

/// Checks `test` (a backend of precision `e_in` per product input) against the f64 reference:
/// each product alone, then the compounded chain. Returns the first weight gradient's
/// compounded relative error.
fn check<B: Ops>(name: &str, test: &B, e_in: f64, csr: &Csr, seed: u64) -> f64 {
    let reference = CpuBackend::<f64>::new();
    let inp = inputs(csr.n_rows(), seed);
    let want = chain(&reference, csr, &inp);
    let got = chain(test, csr, &inp);
    // Rounding of a K-term product: inputs, then f32 accumulation (K ≤ rows).
    let local = |k: usize| 2.0 * e_in + e_in * e_in + k as f64 * 2f64.powi(-24) * 1.01;
    let k_of = |p: &(&str, &str, bool, &str, bool)| match p.1 {
        // Terms per output element: the longest row of A (of Aᵀ: the longest column).
        "A" => (0..csr.n_rows()).map(|r| csr.row_range(r).len()).max().unwrap_or(0),
        "At" => {
            let mut cols = vec![0usize; csr.n_cols()];
            csr.col_idx().iter().for_each(|&c| cols[c as usize] += 1);
            cols.into_iter().max().unwrap_or(0)
        }
        l => {
            let m = &want[l];
            if p.2 { m.rows } else { m.cols }
        }
    };
    println!("{name}: op | alone: rel err, bound | chain: rel err, bound | amplification || |A||B| || / ||AB||");
    // Each product alone, on the reference's intermediates.
    let mut alone = BTreeMap::new();
    for p in PRODUCTS {
        let (l, r) = (want.get(p.1), &want[p.3]);
        let exact = product(&reference, csr, p, l, r);
        let out = product(test, csr, p, l, r);
        let mag = norm(&product(&reference, csr, p, l.map(abs).as_ref(), &abs(r)));
        let (err, bound) = (diff(&out, &exact), local(k_of(&p)) * mag);
        assert!(err <= bound, "{name} {}: alone, error {err:.3e} over its rounding bound {bound:.3e}: a defect", p.0);
        alone.insert(p.0, (err, bound, mag));
    }
    // The compounded chain: every step within its own rounding plus its inputs' errors.
    let d = |k: &str| diff(&got[k], &want[k]);
    let mut bound: BTreeMap<&str, f64> = ["X", "W1", "b1", "W2", "dY"].iter().map(|&k| (k, 0.0)).collect();
    let f32_round = 2f64.powi(-23);
    for step in ["P", "S", "Z", "H", "Out0", "dW2", "dH", "dZ", "G", "dP", "dW1"] {
        let b = match step {
            "Z" => {
                bound["S"] + bound["P"] + f32_round * (norm(&got["S"]) + norm(&got["P"]) + norm(&got["b1"]) * (csr.n_rows() as f64).sqrt())
            }
            "H" => bound["Z"],
            "dP" => bound["G"] + bound["dZ"] + f32_round * (norm(&got["G"]) + norm(&got["dZ"])),
            "dZ" => {
                // Where the two ReLU masks differ (Z's error reached Z), dZ's error is the whole
                // dH there; elsewhere it is dH's error.
                let (zr, zg, hg, hr) = (&want["Z"].data, &got["Z"].data, &got["dH"].data, &want["dH"].data);
                let mut s = 0.0;
                for i in 0..zr.len() {
                    let dh = (hg[i] as f64 - hr[i] as f64).abs();
                    s += if (zr[i] > 0.0) != (zg[i] > 0.0) { (dh + (hr[i] as f64).abs()).powi(2) } else { dh * dh };
                }
                s.sqrt()
            }
            _ => {
                let p = PRODUCTS.iter().find(|p| p.0 == step).copied().unwrap();
                let (l, r) = (p.1, p.3);
                let mag = norm(&product(&reference, csr, p, got.get(l).map(abs).as_ref(), &abs(&got[r])));
                // ||A||_F of the left operand and its error; the aggregation's A is exact (unit values).
                let (nl, dl) = match l {
                    "A" | "At" => ((csr.nnz() as f64).sqrt(), 0.0),
                    _ => (norm(&want[l]), bound[l]),
                };
                local(k_of(&p)) * mag + dl * norm(&want[r]) + nl * bound[r] + dl * bound[r]
            }
        };
        // The bound uses the *measured* errors of the inputs (not their bounds): tighter and
        // still rigorous, since each step's inequality holds for the actual input errors.
        bound.insert(step, b);
        let e = d(step);
        assert!(e <= b, "{name} {step}: chained error {e:.3e} over its bound {b:.3e}");
        // From here on, propagate the measured error (the bound only has to hold step by step).
        bound.insert(step, e);
        let r = norm(&want[step]).max(f64::MIN_POSITIVE);
        match alone.get(step) {
            Some(&(ea, ba, mag)) => println!("  {step:5} | {:.2e}, {:.2e} | {:.2e}, {:.2e} | {:.1}", ea / r, ba / r, e / r, b / r, mag / r),
            None => println!("  {step:5} |                    | {:.2e}, {:.2e} |", e / r, b / r),
        }
    }
    d("dW1") / norm(&want["dW1"])
}

fn graphs() -> Vec<(String, Csr)> {
    common::odd_shapes(3).into_iter().filter(|(_, g)| g.nnz() > 0).map(|(n, g)| (n, pattern(&g.canonical()))).collect()
}

#[test]
fn gin_layer_f32_cpu_within_rounding_bounds() {
    // The bound machinery on the CPU's f32 backend (unit 2^-24 per input).
    for (name, g) in graphs() {
        check(&format!("cpu f32 {name}"), &CpuBackend::<f32>::new(), 2f64.powi(-24), &g, 1);
    }
}

#[test]
fn gin_layer_tf32_gpu_within_rounding_bounds() {
    let Some(gpu) = common::gpu_or_skip("gin_layer_tf32_gpu_within_rounding_bounds") else { return };
    let b = CudaBackend::new(gpu, Precision::Tf32, Impl::Auto).unwrap();
    for (name, g) in graphs() {
        let e = check(&format!("gpu tf32 {name}"), &b, 2f64.powi(-10), &g, 1);
        println!("gpu tf32 {name}: first weight's gradient {e:.2e} against f64");
    }
}
