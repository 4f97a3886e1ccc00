//! Large uploads go through the pinned staging ring (`gpu::pinned`): every element must arrive
//! bit-exactly whatever the size relative to the slots (under the threshold, one element short
//! of a slot, one over, several and a half), and a matrix's padding must stay zero.

use crate::common;

use tcgnn::gpu::pinned::{STAGED_MIN_BYTES, chunk_elems};
use tcgnn::gpu::{DeviceMatrix, DeviceVec};
use tcgnn::tensor::Matrix;
use tcgnn::util::rng::SplitMix64;

#[test]
fn gpu_staged_vectors_round_trip_bit_exactly() {
    let Some(gpu) = common::gpu_or_skip("gpu_staged_vectors_round_trip_bit_exactly") else { return };
    let slot = chunk_elems::<u32>();
    let threshold = STAGED_MIN_BYTES / 4;
    let mut rng = SplitMix64::new(7);
    for len in [0, 1, threshold - 1, threshold, slot - 1, slot, slot + 1, 3 * slot + slot / 2] {
        let host: Vec<u32> = (0..len).map(|_| rng.next_u64() as u32).collect();
        let d = DeviceVec::upload(&gpu, &host).unwrap();
        let back = d.download(&gpu).unwrap();
        assert_eq!(&back[..len], &host[..], "u32 upload of {len} elements");
        // f32 bit patterns, NaNs included, arrive as they were.
        let floats: Vec<f32> = host.iter().map(|&b| f32::from_bits(b)).collect();
        let back = DeviceVec::upload(&gpu, &floats).unwrap().download(&gpu).unwrap();
        assert!(back[..len].iter().zip(&floats).all(|(a, b)| a.to_bits() == b.to_bits()), "f32 upload of {len} elements");
    }
}

#[test]
fn gpu_staged_matrices_keep_values_and_zero_padding() {
    let Some(gpu) = common::gpu_or_skip("gpu_staged_matrices_keep_values_and_zero_padding") else { return };
    // 13 columns (ld 16): rows per slot do not divide the row count; 40 MB in f32, 20 MB in f16.
    let rows = 3 * chunk_elems::<f32>() / 16 / 2 + 7;
    let m = Matrix::random(rows, 13, 3);
    let d = DeviceMatrix::<f32>::upload(&gpu, &m).unwrap();
    let back = d.download_padded().unwrap();
    for r in [0, 1, rows / 2, rows - 1] {
        assert_eq!(&back[r * 16..r * 16 + 13], &m.data[r * 13..r * 13 + 13], "f32 row {r}");
    }
    assert!(back.chunks(16).all(|row| row[13..].iter().all(|&x| x == 0.0)), "f32 padding not zero");
    assert!(back.chunks(16).zip(m.data.chunks(13)).all(|(a, b)| a[..13] == *b), "f32 values");
    let h = DeviceMatrix::<half::f16>::upload(&gpu, &m).unwrap();
    let back = h.download_padded().unwrap();
    assert!(
        back.chunks(16).zip(m.data.chunks(13)).all(|(a, b)| a[..13].iter().zip(b).all(|(x, y)| *x == half::f16::from_f32(*y))),
        "f16 values"
    );
    assert!(back.chunks(16).all(|row| row[13..].iter().all(|x| x.to_f32() == 0.0)), "f16 padding not zero");
}

#[test]
fn gpu_arena_copies_land_in_order_across_slot_switches() {
    let Some(gpu) = common::gpu_or_skip("gpu_arena_copies_land_in_order_across_slot_switches") else { return };
    // 40 copies of 1 MiB plus odd sizes cycle the two 16 MiB arena slots several times; the
    // sources are gone before the copies run (the arena copied them). One copy larger than a
    // slot takes the staged path.
    let slot = tcgnn::gpu::pinned::ARENA_SLOT_BYTES / 4;
    let mut lens: Vec<usize> = (0..40).map(|i| (1 << 18) + i * 37).collect();
    lens.extend([1, 3, slot - 1, slot + 5]);
    let mut bufs = Vec::new();
    for (i, &len) in lens.iter().enumerate() {
        let d = DeviceVec::<u32>::zeros(&gpu, len).unwrap();
        let src: Vec<u32> = (0..len as u32).map(|x| x.wrapping_mul(2654435761).wrapping_add(i as u32)).collect();
        gpu.copy_htod_pinned(d.ptr(&gpu), len, |h: &mut [u32]| h.copy_from_slice(&src)).unwrap();
        drop(src);
        bufs.push(d);
    }
    for (i, (d, &len)) in bufs.iter().zip(&lens).enumerate() {
        let got = d.download(&gpu).unwrap();
        let want: Vec<u32> = (0..len as u32).map(|x| x.wrapping_mul(2654435761).wrapping_add(i as u32)).collect();
        assert!(got[..len] == want[..], "copy {i} of {len} elements");
    }
}
