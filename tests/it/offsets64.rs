//! Matrices of more than 2^32 elements (issue 15, item 4): the element-offset arithmetic the
//! kernels share (`kernels-gpu/src/index.rs`, `rng.rs`) on the CPU around and past 2^32, the
//! dropout mask of rows whose elements sit past 2^32, and on the GPU (when it has the memory)
//! the nn ops over a matrix of 8.6M x 504 = 4.33e9 elements, sampled rows against the CPU.

use crate::common;

use rayon::prelude::*;
use tcgnn::gpu::DeviceMatrix;
use tcgnn::gpu::memory::padded_ld;
use tcgnn::ops::nn::head_columns::head_take;
use tcgnn::ops::nn::*;
use tcgnn::shared::index::{Strided, elem_offset, split_offset};
use tcgnn::shared::rng::{
    DropoutStep, dropout_bits_span, dropout_hash_span, dropout_keep, dropout_seed_key, dropout_span_key, dropout_threshold, mix64,
};

const TWO32: u64 = 1 << 32;

#[test]
fn split_and_offset_agree_around_and_past_2_32() {
    for ld in [8u32, 504, 1000, 4096, 65_536] {
        // Around 2^32 (the 32-bit path's last offsets, the 64-bit path's first) and near the
        // largest matrix allowed (2^31 - 1 rows).
        let last = (u32::MAX / 2) as u64 * ld as u64 - 1;
        for base in [TWO32 - 3000, last - 3000] {
            for i in base..base + 6000 {
                if i > last {
                    break;
                }
                let (r, c) = split_offset(i, ld);
                assert_eq!((r as u64, c as u64), (i / ld as u64, i % ld as u64), "split_offset({i}, {ld})");
                assert_eq!(elem_offset(r, ld, c), i, "elem_offset of split_offset({i}, {ld})");
            }
        }
    }
    // The product itself does not wrap: 2^31 - 1 rows of stride 2^31.
    assert_eq!(elem_offset(u32::MAX / 2, 1 << 31, 7), (u32::MAX / 2) as u64 * (1u64 << 31) + 7);
}

#[test]
fn grid_stride_positions_pass_2_32_and_end() {
    // A loop over n = 2^32 + 5 items from thread 2^32 - 3 with 4 threads: u32 positions would
    // wrap at 2^32 and never reach n.
    let got: Vec<u64> = Strided::new(TWO32 - 3, 4, TWO32 + 5).collect();
    assert_eq!(got, vec![TWO32 - 3, TWO32 + 1]);
    // Near u64::MAX the step saturates instead of wrapping to the start.
    let got: Vec<u64> = Strided::new(u64::MAX - 2, 1 << 20, u64::MAX).collect();
    assert_eq!(got, vec![u64::MAX - 2]);
    assert_eq!(Strided::new(5, 3, 5).count(), 0);
}

#[test]
fn dropout_hash_spans_share_a_key_below_2_32_and_past_it_are_fresh() {
    let (seed, step, thr) = (0x5EED, 9, dropout_threshold(0.5));
    let key = dropout_seed_key(seed);
    // Every index below 2^32 is drawn from the first span's key (what kernels hoist), through
    // `DropoutStep` too.
    let draw = DropoutStep::new(key, step);
    let span0 = dropout_span_key(key, step, 0);
    for i in (0..2_000_000u32).chain(u32::MAX - 1000..=u32::MAX) {
        assert_eq!(dropout_keep(seed, step, i as u64, thr), dropout_bits_span(span0, i) >= thr, "index {i}");
        assert_eq!(draw.keep(key, i as u64, thr), dropout_keep(seed, step, i as u64, thr), "index {i}");
        // An element's 16 bits are its half of its pair's hash.
        assert_eq!(dropout_bits_span(span0, i), (dropout_hash_span(span0, i / 2) >> (16 * (i % 2))) & 0xFFFF, "index {i}");
    }
    for i in [TWO32, TWO32 + 7, 5 * TWO32 + 3] {
        assert_eq!(draw.keep(key, i, thr), dropout_keep(seed, step, i, thr), "index {i}");
    }
    // Four at a time (what the kernels draw), even or odd first index, across 2^32 too.
    for base in (0..100_000u64).chain(TWO32 - 9..TWO32 + 9).chain(3 * TWO32 - 5..3 * TWO32 + 5) {
        let want = [0, 1, 2, 3].map(|e| dropout_keep(seed, step, base + e, thr));
        assert_eq!(draw.keep4(key, base, thr), want, "four from {base}");
        if base % 2 == 0 && base + 3 < TWO32 {
            assert_eq!(draw.keep4_low(base as u32, thr), want, "four from {base} (32-bit path)");
        }
    }
    // Within one span the pair hash is a bijection of the pair's index: no two pairs collide.
    let mut seen: Vec<u32> = (0..1_000_000u32).map(|i| dropout_hash_span(span0, i)).collect();
    seen.sort_unstable();
    assert!(seen.windows(2).all(|w| w[0] != w[1]), "two pairs of one span share a hash");
    // Past 2^32 the mask is not the first span's again (a truncated index would repeat it),
    // and it keeps half.
    let n = 1_000_000u64;
    let same = (0..n).filter(|&i| dropout_keep(seed, step, TWO32 + i, thr) == dropout_keep(seed, step, i, thr)).count();
    let kept = (0..n).filter(|&i| dropout_keep(seed, step, TWO32 + i, thr)).count();
    for (what, v) in [("agreement with the first span", same), ("kept", kept)] {
        let f = v as f64 / n as f64;
        assert!((f - 0.5).abs() < 0.005, "{what}: {f} (independent draws give 0.5)");
    }
}

fn value(r: usize, c: usize) -> f64 {
    ((mix64(((r as u64) << 20) ^ c as u64 ^ 0xABCD) >> 40) as f64 / (1u64 << 24) as f64) * 2.0 - 1.0
}

/// Rows `row0 .. row0 + rows` of the matrix `value(r, c)`, unpadded.
fn rows_of(row0: usize, rows: usize, cols: usize) -> Vec<f64> {
    (row0..row0 + rows).flat_map(|r| (0..cols).map(move |c| value(r, c))).collect()
}

/// `dropout_matrix_cpu_at` of rows (`DropKey::at_row`) whose elements cross 2^32 (generic: f32 and f64) draws the
/// mask at the 64-bit index, not at the index wrapped to 32 bits.
fn dropout_rows_past_2_32<T: tcgnn::util::Real>() {
    let (cols, p, seed, step) = (500usize, 0.3f32, 77u64, 4u32);
    let ld = padded_ld(cols);
    let row0 = (TWO32 / ld as u64) as usize - 10; // rows row0 .. row0 + 20 cross 2^32
    let rows = 20;
    let x: Vec<T> = rows_of(row0, rows, cols).into_iter().map(T::from_f64).collect();
    let (mut y, mut mask) = (vec![T::zero(); rows * cols], vec![0u8; rows * ld]);
    dropout_matrix_cpu_at(&x, rows, cols, &mut y, &mut mask, DropKey::new(p, seed).at_row(row0, cols), step).unwrap();
    let thr = dropout_threshold(p);
    let (mut past, mut differs) = (0, 0);
    for r in 0..rows {
        for c in 0..ld {
            let i = ((row0 + r) * ld + c) as u64;
            let keep = dropout_keep(seed, step, i, thr);
            assert_eq!(mask[r * ld + c] != 0, keep, "mask at row {} col {c}", row0 + r);
            if i >= TWO32 {
                past += 1;
                differs += (keep != dropout_keep(seed, step, i as u32 as u64, thr)) as usize;
            }
            if c < cols {
                let want = if keep { x[r * cols + c].to_f64() / (1.0 - p as f64) } else { 0.0 };
                assert!((y[r * cols + c].to_f64() - want).abs() <= 1e-6 * want.abs().max(1.0), "y at row {} col {c}", row0 + r);
            }
        }
    }
    assert!(past > 4000 && differs > past / 4, "{past} elements past 2^32, {differs} differ from the wrapped index");
}

#[test]
fn cpu_dropout_rows_past_2_32_f32_and_f64() {
    dropout_rows_past_2_32::<f32>();
    dropout_rows_past_2_32::<f64>();
}

/// The nn ops on a matrix of more than 2^32 elements, where the GPU has about 45 GB free (an
/// H100 80 GB does): rows at the start, across 2^32 and at the end compared with the CPU.
#[test]
fn gpu_ops_over_2_32_elements() {
    let Some(gpu) = common::gpu_or_skip("gpu_ops_over_2_32_elements") else { return };
    let (cols, ld) = (500usize, 504usize);
    let rows = 8_600_000usize; // 4.33e9 elements
    assert!((rows * ld) as u64 > TWO32);
    let need = rows * ld * (4 + 4 + 1) + (1 << 30); // x, y, mask, slack
    let free = gpu.free_memory().unwrap();
    if free < need {
        println!("gpu_ops_over_2_32_elements: skipped: needs {:.1} GB of GPU memory, {:.1} GB free", need as f64 / 1e9, free as f64 / 1e9);
        return;
    }
    let boundary = (TWO32 / ld as u64) as usize;
    let samples = [0usize, 1, boundary - 2, boundary - 1, boundary, boundary + 1, rows - 2, rows - 1];

    // x = value(r, c), uploaded 65536 rows at a time (padding 0).
    let mut x = DeviceMatrix::<f32>::zeros(&gpu, rows, cols).unwrap();
    let chunk = 65_536;
    for r0 in (0..rows).step_by(chunk) {
        let n = chunk.min(rows - r0);
        let mut host = vec![0f32; n * ld];
        host.par_chunks_mut(ld).enumerate().for_each(|(r, row)| {
            for (c, v) in row[..cols].iter_mut().enumerate() {
                *v = value(r0 + r, c) as f32;
            }
        });
        x.upload_rows(r0, &host).unwrap();
    }
    let row_of = |m: &DeviceMatrix<f32>, r: usize| -> Vec<f64> {
        let padded = m.download_rows(r, 1).unwrap();
        assert!(padded[m.cols..].iter().all(|&v| v == 0.0), "padding of row {r} not zero");
        padded[..m.cols].iter().map(|&v| v as f64).collect()
    };
    let close = |what: &str, r: usize, got: &[f64], want: &[f64]| {
        let err = got.iter().zip(want).map(|(a, b)| (a - b).abs() / b.abs().max(1.0)).fold(0.0, f64::max);
        assert!(err < 1e-5, "{what}, row {r}: error {err}");
    };

    // dropout (64-bit mask index), then relu, bias_add, add_assign, scaled_add on y.
    let (p, seed) = (0.4f32, 0xD00D);
    let step = tcgnn::gpu::DeviceVec::upload(&gpu, &[3u32]).unwrap();
    let mut y = DeviceMatrix::<f32>::zeros(&gpu, rows, cols).unwrap();
    let mut mask = tcgnn::gpu::DeviceVec::<u8>::zeros(&gpu, rows * ld).unwrap();
    dropout_matrix(&x, &mut y, &mut mask, p, seed, &step).unwrap();
    let mask_host = |r: usize| -> Vec<u8> {
        let mut m = vec![0u8; ld];
        gpu.stream().memcpy_dtoh(&mask.slice().slice(r * ld..(r + 1) * ld), &mut m[..]).unwrap();
        gpu.stream().synchronize().unwrap();
        m
    };
    let mut want_y = Vec::new();
    for &r in &samples {
        let xr = rows_of(r, 1, cols);
        let (mut wy, mut wm) = (vec![0f64; cols], vec![0u8; ld]);
        dropout_matrix_cpu_at(&xr, 1, cols, &mut wy, &mut wm, DropKey::new(p, seed).at_row(r, cols), 3).unwrap();
        assert_eq!(mask_host(r), wm, "dropout mask of row {r}");
        close("dropout", r, &row_of(&y, r), &wy);
        want_y.push((xr, wy));
    }
    let b: Vec<f64> = (0..cols).map(|c| 0.01 * c as f64 - 2.0).collect();
    let bd = DeviceMatrix::upload(&gpu, &tcgnn::tensor::Matrix { rows: 1, cols, data: b.iter().map(|&v| v as f32).collect() }).unwrap();
    relu(&mut y).unwrap();
    bias_add(&mut y, &bd).unwrap();
    add_assign(&mut y, &x).unwrap();
    for (k, &r) in samples.iter().enumerate() {
        let (xr, wy) = &want_y[k];
        let mut w = wy.clone();
        relu_cpu(&mut w);
        bias_add_cpu(&mut w, 1, cols, &b);
        add_assign_cpu(&mut w, xr);
        close("relu + bias_add + add_assign", r, &row_of(&y, r), &w);
        want_y[k].1 = w;
    }

    // dropout backward into x (y as dy), then a head block of it out of the wide matrix.
    dropout_backward_matrix(&y, &mask, p, &mut x).unwrap();
    let mut head = DeviceMatrix::<f32>::zeros(&gpu, rows, 16).unwrap();
    head_take(&x, 480, 2.0, &mut head).unwrap();
    for (k, &r) in samples.iter().enumerate() {
        let wm = mask_host(r);
        let mut dx = vec![0f64; cols];
        dropout_backward_matrix_cpu(&want_y[k].1, &wm, 1, cols, p, &mut dx).unwrap();
        close("dropout_backward", r, &row_of(&x, r), &dx);
        let wh: Vec<f64> = dx[480..496].iter().map(|v| 2.0 * v).collect();
        close("head_take", r, &row_of(&head, r), &wh);
    }
    drop((head, mask, y));

    // Column sums and a dot over all 4.33e9 elements of a matrix of ones: col sums are the row
    // count (exact in f32 below 2^24), the dot rows * cols.
    let ones = vec![1f32; chunk * ld];
    for r0 in (0..rows).step_by(chunk) {
        let n = chunk.min(rows - r0);
        let mut host = ones[..n * ld].to_vec();
        for r in 0..n {
            host[r * ld + cols..(r + 1) * ld].fill(0.0);
        }
        x.upload_rows(r0, &host).unwrap();
    }
    let mut sums = DeviceMatrix::<f32>::zeros(&gpu, 1, cols).unwrap();
    col_sums(&x, &mut sums).unwrap();
    let s = sums.download().unwrap();
    assert!(s.data.iter().all(|&v| v == rows as f32), "col_sums of ones: {:?} (want {rows})", &s.data[..4]);
    let mut d = DeviceMatrix::<f32>::zeros(&gpu, 1, 1).unwrap();
    dot(&x, &x, &mut d).unwrap();
    let got = d.download().unwrap().data[0] as f64;
    let want = (rows * cols) as f64;
    assert!((got - want).abs() / want < 1e-4, "dot of ones: {got} (want {want})");
    println!("gpu_ops_over_2_32_elements: {rows} x {cols} (ld {ld}, {} elements) matched at rows {samples:?}", rows * ld);
}
