//! How the fused row kernels (GAT's and AGNN's attention) spread a pattern's rows over one
//! launch, and walk a row's entries.
//!
//! A warp is `32 >> shift` slots of `1 << shift` lanes (`Lane`). Three kinds of block share the
//! rows (`rows`, `RowSplit`): rows shorter than `short_max` a slot each (the slot walks its row
//! alone: most rows of sparse graphs are a few edges, and a warp per row left most of its slots
//! idle while the row's chain of dependent loads ran), taken from a list sorted by length so
//! that a warp's slots finish together; rows up to `long_min` a warp each; longer
//! rows cut into segments of a few thousand entries, a block each, whose warps take contiguous
//! runs and meet in shared memory in warp order. A segment writes its partial state (softmax
//! state or sums) to scratch (`partial`), and a second, small launch (`long_rows`) merges each
//! long row's segments in order: deterministic, and a hub row of tens of thousands of entries
//! is no longer one block's chain. `walk` keeps `S x U` edges in flight (column ids read 32 at
//! a time, `U` edges' gathers issued before any is used).

use super::global_warp;
use crate::abi::row_split::RowSplit;
use crate::ptx;

/// This lane's place: its slot of `1 << shift` lanes and its index `h` in the slot (a head of
/// GAT, a column chunk of AGNN).
#[derive(Clone, Copy)]
pub struct Lane {
    pub slot: u32,
    pub slots: u32,
    pub h: u32,
    /// Whether `h` is below the caller's width (lanes past it idle).
    pub on: bool,
    /// This slot's lanes, the member mask of shuffles within the slot.
    pub mask: u32,
}

impl Lane {
    #[inline(always)]
    pub fn new(shift: u32, width: u32) -> Self {
        let lane = ptx::lane_id();
        let h = lane & ((1 << shift) - 1);
        let slot = lane >> shift;
        let mask = if shift >= 5 { u32::MAX } else { ((1u32 << (1 << shift)) - 1) << (slot << shift) };
        Lane { slot, slots: 32 >> shift, h, on: h < width, mask }
    }
}

/// Entries [lo, hi) of a pattern row, `cols[q]` the neighbour and `ofs[q]` the edge's index in
/// S (null: q itself): `load(neighbour, edge)` runs for this slot's next `U` entries before
/// `use_(loaded)` runs for each in order (work that needs no loaded value, such as the dropout
/// hash, belongs in `load`: it then runs while the gathers are in flight). A row of a slot
/// (`own`): the slot walks it alone, every lane reading the column ids itself (no shuffles:
/// slots may diverge). Else the row is spread over the warp's slots, column ids read 32 at a
/// time and shuffled out; uniform over the warp.
#[inline(always)]
pub unsafe fn walk<L: Copy, const U: usize>(
    ln: &Lane,
    own: bool,
    cols: *const u32,
    ofs: *const u32,
    lo: u32,
    hi: u32,
    load: impl FnMut(u32, u32) -> L,
    mut use_: impl FnMut(L),
) {
    unsafe {
        walk_steps::<L, U>(ln, own, cols, ofs, lo, hi, load, |loaded, ok| {
            // Unrolled by hand (U <= 4): a rolled loop indexes the register arrays at run time,
            // which moves them to local memory.
            crate::unroll4!(u => {
                if u < U && ok[u] {
                    use_(loaded[u]);
                }
            });
        })
    }
}

/// [`walk`] a step at a time: `use_step(loaded, ok)` gets the step's `U` loaded entries at once,
/// `ok[u]` whether entry u is one of the row's (those that are not loaded a valid row all the
/// same), so that work on different entries can overlap (no branch between them).
#[inline(always)]
pub unsafe fn walk_steps<L: Copy, const U: usize>(
    ln: &Lane,
    own: bool,
    cols: *const u32,
    ofs: *const u32,
    lo: u32,
    hi: u32,
    mut load: impl FnMut(u32, u32) -> L,
    mut use_step: impl FnMut([L; U], [bool; U]),
) {
    // One step: the entries at `pos` (those below `end` used), their ids from `id(pos)`.
    let mut step = |pos: [u32; U], end: u32, id: &dyn Fn(u32) -> (u32, u32)| {
        let mut ids = [(0u32, 0u32); U];
        crate::unroll4!(u => {
            if u < U {
                ids[u] = id(pos[u]);
            }
        });
        // (Not `from_fn`: its guard kept large entries on the stack.)
        let mut loaded = [load(ids[0].0, ids[0].1); U];
        crate::unroll4!(u => {
            if 0 < u && u < U {
                loaded[u] = load(ids[u].0, ids[u].1);
            }
        });
        let mut ok = [false; U];
        crate::unroll4!(u => {
            if u < U {
                ok[u] = pos[u] < end;
            }
        });
        use_step(loaded, ok);
    };
    if own {
        let id = |q: u32| {
            let q = if q < hi { q } else { lo };
            unsafe { (ptx::ld_nc_u32(cols.add(q as usize)), if ofs.is_null() { q } else { ptx::ld_nc_u32(ofs.add(q as usize)) }) }
        };
        let mut t = lo;
        while t < hi {
            step(core::array::from_fn(|u| t + u as u32), hi, &id);
            t += U as u32;
        }
        return;
    }
    let lane = ptx::lane_id();
    let mut base = lo;
    while base < hi {
        let n = if hi - base < 32 { hi - base } else { 32 };
        let (my_j, my_e) = if lane < n {
            let q = (base + lane) as usize;
            unsafe { (ptx::ld_nc_u32(cols.add(q)), if ofs.is_null() { base + lane } else { ptx::ld_nc_u32(ofs.add(q)) }) }
        } else {
            (0, 0)
        };
        let id = |p: u32| (ptx::shfl_idx_u32(my_j, p & 31), ptx::shfl_idx_u32(my_e, p & 31));
        let mut t = 0;
        while t < n {
            step(core::array::from_fn(|u| t + ln.slot + ln.slots * u as u32), n, &id);
            t += ln.slots * U as u32;
        }
        base += 32;
    }
}

/// How a row is spread: over one slot's lanes, a warp's slots, a block's warps.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Span {
    Slot,
    Warp,
    Block,
}

/// The rows this block takes (`RowSplit`: segments of long rows first, so the longest
/// work starts first; then the warp blocks, then the slot blocks on the listed short rows, all
/// in one launch so that the kinds overlap), and per row the run of entries this slot, warp or
/// block walks. `f(row, lo, hi, span, segment)` (the segment only for `Span::Block`), called
/// from one place so that it is inlined (a closure called from two was compiled as a function, its captures on the
/// stack).
#[inline(always)]
pub unsafe fn rows(a: &RowSplit, ln: &Lane, row_ptr: *const u32, mut f: impl FnMut(u32, u32, u32, Span, u32)) {
    let (c, wpb) = (ptx::ctaid_x(), ptx::ntid_x() / 32);
    // Position k in the block kind's sequence (segments, listed rows, or all rows), its stride.
    let (span, mut k, stride, n) = if c < a.n_segs {
        (Span::Block, c, 0, a.n_segs)
    } else if c - a.n_segs < a.warp_blocks {
        (Span::Warp, (c - a.n_segs) * wpb + ptx::warp_id(), a.warp_blocks * wpb, a.n_mid)
    } else {
        let (first, blocks) = (a.n_segs + a.warp_blocks, ptx::nctaid_x() - a.n_segs - a.warp_blocks);
        (Span::Slot, ((c - first) * wpb + ptx::warp_id()) * ln.slots + ln.slot, blocks * wpb * ln.slots, a.n_short)
    };
    // The kind's list of rows (a value, as `limit` below).
    let list = if span == Span::Slot { a.short } else { a.mid };
    // Rows at or past `limit` belong to the next kind (a value: selecting between the two
    // fields' addresses put them on the stack).
    let limit = if span == Span::Slot { a.short_max } else { a.long_min };
    while k < n {
        let (i, lo, hi, take) = if span == Span::Block {
            let seg = unsafe { a.segs.add(3 * k as usize) };
            let (i, start, end) = unsafe { (*seg, *seg.add(1), *seg.add(2)) };
            let w = ptx::warp_id();
            // (`div_or_zero`: no panic path in the PTX; a block has at least one warp.)
            let run = crate::translate::div_or_zero(end - start + wpb - 1, wpb);
            (i, start + (w * run).min(end - start), start + ((w + 1) * run).min(end - start), true)
        } else {
            let i = unsafe { *list.add(k as usize) };
            let (start, end) = unsafe { (*row_ptr.add(i as usize), *row_ptr.add(i as usize + 1)) };
            (i, start, end, end - start < limit)
        };
        if take {
            f(i, lo, hi, span, k);
        }
        if span == Span::Block {
            return;
        }
        k += stride;
    }
}

/// The combine launch: a warp per long row, lane h (below `width`) its head or column chunk h,
/// `f(row, h, first segment, end)`.
#[inline(always)]
pub unsafe fn long_rows(a: &RowSplit, width: u32, mut f: impl FnMut(u32, u32, u32, u32)) {
    let (mut r, warps) = global_warp();
    let h = ptx::lane_id();
    while r < a.n_long {
        let (i, s0, s1) = unsafe { (*a.long.add(r as usize), *a.seg_ptr.add(r as usize), *a.seg_ptr.add(r as usize + 1)) };
        if h < width {
            f(i, h, s0, s1);
        }
        r += warps;
    }
}

/// Segment `seg`'s partial state of head `h`: `fields` floats a head.
#[inline(always)]
pub fn partial(a: &RowSplit, seg: u32, h: u32, fields: u32) -> *mut f32 {
    unsafe { a.partials.add(seg as usize * a.pstride as usize + (h * fields) as usize) }
}

/// Adds `v` over the slots (every lane gets its head's total); a slot's own row is its own.
#[inline(always)]
pub fn slot_sum(mut v: f32, ln: &Lane, own: bool, shift: u32) -> f32 {
    let mut m = if own { 0 } else { ln.slots >> 1 };
    while m > 0 {
        v += ptx::shfl_xor_f32(v, m << shift);
        m >>= 1;
    }
    v
}

/// Shared-memory word `field` of (warp, head) for `fields` words per head.
#[inline(always)]
pub fn smem(w: u32, h: u32, field: usize, fields: usize) -> u32 {
    ptx::dyn_smem_base() + 4 * ((w * 32 + h) * fields as u32 + field as u32)
}

/// Block launch: each warp's per-head sums (slot 0's lanes) into shared memory, then every warp
/// gets their total, added in warp order.
#[inline(always)]
pub unsafe fn block_sums<const F: usize>(ln: &Lane, v: [f32; F]) -> [f32; F] {
    let w = ptx::warp_id();
    if ln.slot == 0 {
        for (f, x) in v.iter().enumerate() {
            unsafe { ptx::st_shared_f32(smem(w, ln.h, f, F), *x) };
        }
    }
    ptx::sync_threads();
    let mut out = [0f32; F];
    for src in 0..ptx::ntid_x() / 32 {
        for (f, o) in out.iter_mut().enumerate() {
            *o += unsafe { ptx::ld_shared_f32(smem(src, ln.h, f, F)) };
        }
    }
    ptx::sync_threads();
    out
}
