//! Bitonic sort of u64 keys by one block: entirely in shared memory for up to
//! `SORT_SMEM_KEYS` keys, and for longer (power-of-two) arrays in global memory with every
//! step whose partner distance is below a chunk done chunk by chunk in shared memory.
//!
//! Compare-exchange of step (k, j) pairs element i with i + j (i has bit j clear); the pair is
//! put in ascending order when bit k of i's *global* index is clear, descending otherwise, so a
//! chunk sorted on its own is exactly the corresponding part of the whole network.

use crate::ptx;
use crate::translate::SORT_SMEM_KEYS;

/// Where a window's keys live while sorted and read back.
#[derive(Clone, Copy)]
pub enum Keys {
    /// 32-bit shared-window address.
    Smem(u32),
    /// Global scratch.
    Global(*mut u64),
}

impl Keys {
    #[inline(always)]
    pub unsafe fn get(self, i: u32) -> u64 {
        match self {
            Keys::Smem(a) => unsafe { ptx::ld_shared_u64(a + 8 * i) },
            Keys::Global(p) => unsafe { *p.add(i as usize) },
        }
    }
    #[inline(always)]
    pub unsafe fn set(self, i: u32, v: u64) {
        match self {
            Keys::Smem(a) => unsafe { ptx::st_shared_u64(a + 8 * i, v) },
            Keys::Global(p) => unsafe { *p.add(i as usize) = v },
        }
    }
}

/// Lower element of the t-th pair of step distance j: t with a zero bit inserted at j.
#[inline(always)]
fn pair_low(t: u32, j: u32) -> u32 {
    2 * t - (t & (j - 1))
}

/// One step (k, j) over `n` keys whose first has global index `g0`; ends with a barrier.
#[inline(always)]
unsafe fn step(keys: Keys, n: u32, g0: u32, k: u32, j: u32) {
    let mut t = ptx::tid_x();
    while t < n / 2 {
        let i = pair_low(t, j);
        let (a, b) = unsafe { (keys.get(i), keys.get(i + j)) };
        let up = (g0 + i) & k == 0;
        if (a > b) == up {
            unsafe {
                keys.set(i, b);
                keys.set(i + j, a);
            }
        }
        t += ptx::ntid_x();
    }
    ptx::sync_threads();
}

/// Steps (k, j) for j = `j_first`, `j_first / 2`, ..., 1.
#[inline(always)]
unsafe fn steps_down(keys: Keys, n: u32, g0: u32, k: u32, j_first: u32) {
    let mut j = j_first;
    while j >= 1 {
        unsafe { step(keys, n, g0, k, j) };
        j /= 2;
    }
}

/// The network's stages k = 2 .. `k_last` over `n` (power of two) keys in shared memory whose
/// first has global index `g0`. With `g0 = 0` and `k_last = n` this sorts them ascending.
#[inline(always)]
pub unsafe fn sort_smem(keys: u32, n: u32, g0: u32, k_last: u32) {
    let mut k = 2;
    while k <= k_last {
        unsafe { steps_down(Keys::Smem(keys), n, g0, k, k / 2) };
        k *= 2;
    }
}

#[inline(always)]
unsafe fn copy(from: Keys, to: Keys, from0: u32, to0: u32, n: u32) {
    let mut i = ptx::tid_x();
    while i < n {
        unsafe { to.set(to0 + i, from.get(from0 + i)) };
        i += ptx::ntid_x();
    }
    ptx::sync_threads();
}

/// Sort `n` (a power of two above `SORT_SMEM_KEYS`) keys at `keys` ascending, with
/// `SORT_SMEM_KEYS` keys of shared memory at `smem` for the short-distance steps.
#[inline(always)]
pub unsafe fn sort_global(keys: *mut u64, n: u32, smem: u32) {
    let c = SORT_SMEM_KEYS;
    let (g, s) = (Keys::Global(keys), Keys::Smem(smem));
    let mut g0 = 0;
    while g0 < n {
        unsafe {
            copy(g, s, g0, 0, c);
            sort_smem(smem, c, g0, c);
            copy(s, g, 0, g0, c);
        }
        g0 += c;
    }
    let mut k = 2 * c;
    while k <= n {
        let mut j = k / 2;
        while j >= c {
            unsafe { step(g, n, 0, k, j) };
            j /= 2;
        }
        let mut g0 = 0;
        while g0 < n {
            unsafe {
                copy(g, s, g0, 0, c);
                steps_down(s, c, g0, k, c / 2);
                copy(s, g, 0, g0, c);
            }
            g0 += c;
        }
        k *= 2;
    }
}
