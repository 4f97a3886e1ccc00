//! TC8 SpMM work lists on the host: which warp takes which run of which ME-BCRS window's blocks,
//! a model of what a list costs on a device (warp slots, thread blocks of `TC8_WARPS` items,
//! the order the grid is dispatched in), the statistics `tcgnn info --worklist` prints, and a
//! balanced builder ([`balanced_work_list`]) that returns the launcher's [`WorkList`].
//!
//! The kernel (`kernels-gpu/src/spmm/tc8*.rs`) runs item `i` of K slice `s` on warp `i % 4` of
//! thread block `(i / 4, s)`; a thread block holds its SM slot until its longest warp is done.
//! An item covering a whole window stores its 8 output rows; the items of a split window add
//! into rows cleared beforehand (`tc8_zero_windows`). Items may come in any order.

use std::collections::BinaryHeap;

use rayon::prelude::*;
use std::cmp::Reverse;

use crate::format::MeBcrs;
use crate::shared::config::TC8_WARPS;
use crate::shared::partition::tc8_max_blocks;

/// Work items: (window, first block, end block); windows cut into several items.
#[derive(Debug, PartialEq, Eq)]
pub struct WorkList {
    pub item_win: Vec<u32>,
    /// (first block, end block) per item, interleaved.
    pub item_blocks: Vec<u32>,
    /// Windows covered by more than one item: their rows are cleared, items add atomically.
    pub split_windows: Vec<u32>,
}

/// Cut every window into runs of at most `max_blocks` blocks; an empty window is one empty item
/// (it still writes its zero rows).
pub fn work_list(blocks_per_window: impl Iterator<Item = u32>, max_blocks: u32) -> WorkList {
    let mut wl = WorkList { item_win: Vec::new(), item_blocks: Vec::new(), split_windows: Vec::new() };
    for (w, nb) in blocks_per_window.enumerate() {
        if nb > max_blocks {
            wl.split_windows.push(w as u32);
        }
        let mut b = 0;
        loop {
            let e = (b + max_blocks).min(nb);
            wl.item_win.push(w as u32);
            wl.item_blocks.extend([b, e]);
            b = e;
            if b >= nb {
                break;
            }
        }
    }
    wl
}

/// What the cost model knows of the device and the kernel. Costs are in units of one 8x8
/// block of one K slice on one warp (a block's gathers and MMAs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeviceModel {
    pub sm_count: u32,
    /// Resident warps per SM (the TC8 f16 kernels reach ~16: `bench/NOTES.md`).
    pub warps_per_sm: u32,
    /// Warps (items) per thread block.
    pub warps_per_block: u32,
    /// Fixed cost of an item (work-list and window-pointer loads, pipeline fill, the 8-row
    /// store), in blocks.
    pub item_cost: f64,
    /// Extra cost of an item of a split window (atomic adds instead of stores), in blocks.
    pub atomic_cost: f64,
    /// Cost of the launch that clears split windows' rows (paid once when any window is split).
    pub clear_launch_cost: f64,
    /// Shortest cap the balanced builder tries (shorter runs would spend more on atomics than
    /// they balance).
    pub min_run: u32,
}

impl DeviceModel {
    /// H100 SXM: 132 SMs, ~16 resident TC8 warps each.
    pub const H100: DeviceModel = DeviceModel::new(132);

    pub const fn new(sm_count: u32) -> DeviceModel {
        DeviceModel {
            sm_count,
            warps_per_sm: 16,
            warps_per_block: TC8_WARPS,
            item_cost: 4.0,
            atomic_cost: 4.0,
            clear_launch_cost: 8.0,
            min_run: 8,
        }
    }

    /// Warps resident on the whole device at once.
    pub fn warp_slots(&self) -> u32 {
        self.sm_count.max(1) * self.warps_per_sm.max(1)
    }
}

/// Cost of one item (one K slice) under `m`.
fn item_cost(m: &DeviceModel, blocks: u32, split: bool) -> f64 {
    m.item_cost + blocks as f64 + if split { m.atomic_cost } else { 0.0 }
}

/// Per item: (blocks, window is split).
fn items(wl: &WorkList) -> impl Iterator<Item = (u32, bool)> + '_ {
    // split_windows is sorted by construction of every builder here; search it.
    wl.item_win.iter().zip(wl.item_blocks.chunks_exact(2)).map(|(w, b)| (b[1] - b[0], wl.split_windows.binary_search(w).is_ok()))
}

/// The modelled launch of a work list: thread blocks of `warps_per_block` consecutive items,
/// dispatched x-fastest (every item of slice 0, then slice 1, ...) onto the first free of
/// `sm_count * warps_per_sm / warps_per_block` block slots; a block holds its slot for its
/// longest item.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Schedule {
    /// When the last thread block finishes (block units).
    pub makespan: f64,
    /// Total warp work / warp slots: the makespan of a perfectly balanced launch.
    pub ideal: f64,
    /// Warp-time lost to thread blocks waiting on their longest warp, as a share of all held time.
    pub idle_in_blocks: f64,
}

pub fn simulate(wl: &WorkList, k_slices: u32, m: &DeviceModel) -> Schedule {
    let costs: Vec<f64> = items(wl).map(|(b, s)| item_cost(m, b, s)).collect();
    let wpb = m.warps_per_block.max(1) as usize;
    let block_slots = (m.warp_slots() / m.warps_per_block.max(1)).max(1) as usize;
    let mut free: BinaryHeap<Reverse<u64>> = (0..block_slots).map(|_| Reverse(0u64)).collect();
    // Integer time (1/1024 block) keeps the heap ordered without float wrappers.
    let q = |c: f64| (c * 1024.0).round() as u64;
    let (mut end, mut held, mut busy) = (0u64, 0f64, 0f64);
    for _slice in 0..k_slices.max(1) {
        for tb in costs.chunks(wpb) {
            let longest = tb.iter().cloned().fold(0.0, f64::max);
            let Reverse(t) = free.pop().expect("slots");
            let done = t + q(longest);
            end = end.max(done);
            free.push(Reverse(done));
            held += longest * wpb as f64;
            busy += tb.iter().sum::<f64>();
        }
    }
    let total: f64 = costs.iter().sum::<f64>() * k_slices.max(1) as f64;
    Schedule {
        makespan: end as f64 / 1024.0,
        ideal: total / m.warp_slots() as f64,
        idle_in_blocks: if held > 0.0 { 1.0 - busy / held } else { 0.0 },
    }
}

/// Quantiles and tail of a distribution of block counts.
#[derive(Clone, Debug, PartialEq)]
pub struct Distribution {
    pub count: usize,
    pub total: u64,
    pub mean: f64,
    pub p50: u32,
    pub p90: u32,
    pub p99: u32,
    pub p999: u32,
    pub max: u32,
    /// Share of the total held by the largest 1% of entries.
    pub top1_share: f64,
}

impl Distribution {
    pub fn of(values: impl Iterator<Item = u32>) -> Distribution {
        let mut v: Vec<u32> = values.collect();
        v.sort_unstable();
        let count = v.len();
        let total: u64 = v.iter().map(|&x| x as u64).sum();
        let q = |p: f64| if count == 0 { 0 } else { v[((count - 1) as f64 * p).round() as usize] };
        let top = count.div_ceil(100);
        let top_sum: u64 = v.iter().rev().take(top).map(|&x| x as u64).sum();
        Distribution {
            count,
            total,
            mean: if count == 0 { 0.0 } else { total as f64 / count as f64 },
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            p999: q(0.999),
            max: v.last().copied().unwrap_or(0),
            top1_share: if total == 0 { 0.0 } else { top_sum as f64 / total as f64 },
        }
    }
}

/// One work list described: its items and what the model makes of it.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkListStats {
    pub name: String,
    /// The longest run the builder allowed (the launcher's `tc8_max_blocks`, or the balanced bound).
    pub max_run: u32,
    pub items: Distribution,
    pub split_windows: usize,
    /// Items belonging to split windows (each adds atomically).
    pub atomic_items: usize,
    /// Warps the launch runs (items x K slices), and per SM.
    pub warps: u64,
    pub warps_per_sm: f64,
    /// Average blocks per warp slot (total blocks x K slices / warp slots).
    pub blocks_per_slot: f64,
    /// The longest item over `blocks_per_slot`: above ~0.5 the last items set the launch time.
    pub critical_ratio: f64,
    pub schedule: Schedule,
    /// [`modelled_time`]: the makespan plus the clearing launch where windows are split.
    pub modelled: f64,
}

pub fn work_list_stats(name: &str, wl: &WorkList, max_run: u32, k_slices: u32, m: &DeviceModel) -> WorkListStats {
    let items_d = Distribution::of(items(wl).map(|(b, _)| b));
    let atomic_items = items(wl).filter(|&(_, s)| s).count();
    let warps = wl.item_win.len() as u64 * k_slices as u64;
    let blocks_per_slot = items_d.total as f64 * k_slices as f64 / m.warp_slots() as f64;
    WorkListStats {
        name: name.into(),
        max_run,
        critical_ratio: if blocks_per_slot > 0.0 { items_d.max as f64 / blocks_per_slot } else { 0.0 },
        items: items_d,
        split_windows: wl.split_windows.len(),
        atomic_items,
        warps,
        warps_per_sm: warps as f64 / m.sm_count.max(1) as f64,
        blocks_per_slot,
        schedule: simulate(wl, k_slices, m),
        modelled: modelled_time(wl, k_slices, m),
    }
}

/// How the most shared columns (hubs: the X rows the most windows gather) spread over the
/// windows: in window order items are dispatched in order, so windows close together gather
/// the same X row at the same time.
#[derive(Clone, Debug, PartialEq)]
pub struct HubSpread {
    pub column: u32,
    /// Windows with a vector in this column.
    pub windows: u32,
    /// Last minus first such window, plus one.
    pub span: u32,
    /// Most of these windows among any `concurrent` consecutive windows.
    pub max_concurrent: u32,
}

/// The `top` columns gathered by the most windows; `concurrent` = windows in flight at once.
pub fn hub_spread(m: &MeBcrs, top: usize, concurrent: usize) -> Vec<HubSpread> {
    let mut count = vec![0u32; m.n_cols];
    for &c in &m.vec_col {
        count[c as usize] += 1;
    }
    let mut cols: Vec<u32> = (0..m.n_cols as u32).collect();
    cols.sort_by_key(|&c| (Reverse(count[c as usize]), c));
    cols.truncate(top);
    let mut slot = vec![u32::MAX; m.n_cols];
    for (i, &c) in cols.iter().enumerate() {
        slot[c as usize] = i as u32;
    }
    let mut wins: Vec<Vec<u32>> = vec![Vec::new(); cols.len()];
    for w in 0..m.n_windows() {
        for &c in &m.vec_col[m.win_ptr[w] as usize..m.win_ptr[w + 1] as usize] {
            if slot[c as usize] != u32::MAX {
                wins[slot[c as usize] as usize].push(w as u32);
            }
        }
    }
    cols.iter()
        .zip(wins)
        .filter(|(_, ws)| !ws.is_empty())
        .map(|(&column, ws)| {
            let mut best = 0;
            let mut lo = 0;
            for hi in 0..ws.len() {
                while ws[hi] - ws[lo] >= concurrent as u32 {
                    lo += 1;
                }
                best = best.max(hi - lo + 1);
            }
            HubSpread { column, windows: ws.len() as u32, span: ws[ws.len() - 1] - ws[0] + 1, max_concurrent: best as u32 }
        })
        .collect()
}

/// In which order the items of a list are dispatched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ItemOrder {
    /// Window order (the launcher's): neighbouring windows run together, which keeps their
    /// shared X rows in L2 on reordered graphs, but heavy windows run whenever their turn comes.
    Window,
    /// Items of at least half the longest item first, longest first (ties in window order);
    /// the rest in window order. The long items start at once instead of forming the tail.
    HeavyFirst,
}

/// Items of `blocks_per_window` with every window longer than `cap` cut into
/// `ceil(blocks / cap)` runs of equal length (within one block), in `order`.
pub fn cut_work_list(blocks_per_window: &[u32], cap: u32, order: ItemOrder) -> WorkList {
    let cap = cap.max(1);
    let mut wl = WorkList { item_win: Vec::new(), item_blocks: Vec::new(), split_windows: Vec::new() };
    for (w, &nb) in blocks_per_window.iter().enumerate() {
        let parts = nb.div_ceil(cap).max(1);
        if parts > 1 {
            wl.split_windows.push(w as u32);
        }
        // Part i covers blocks [i * nb / parts, (i + 1) * nb / parts).
        for i in 0..parts {
            let (b, e) = ((i as u64 * nb as u64 / parts as u64) as u32, ((i as u64 + 1) * nb as u64 / parts as u64) as u32);
            wl.item_win.push(w as u32);
            wl.item_blocks.extend([b, e]);
        }
    }
    if order == ItemOrder::HeavyFirst {
        let lens: Vec<u32> = wl.item_blocks.chunks_exact(2).map(|b| b[1] - b[0]).collect();
        let longest = lens.iter().copied().max().unwrap_or(0);
        // The heavy items by decreasing length (stable: ties in window order), then the rest.
        let (mut heavy, light): (Vec<usize>, Vec<usize>) = (0..lens.len()).partition(|&i| longest > 0 && 2 * lens[i] >= longest);
        heavy.sort_by_key(|&i| Reverse(lens[i]));
        let idx = heavy.into_iter().chain(light);
        let (mut item_win, mut item_blocks) = (Vec::with_capacity(lens.len()), Vec::with_capacity(2 * lens.len()));
        for i in idx {
            item_win.push(wl.item_win[i]);
            item_blocks.extend([wl.item_blocks[2 * i], wl.item_blocks[2 * i + 1]]);
        }
        wl.item_win = item_win;
        wl.item_blocks = item_blocks;
    }
    wl
}

/// The modelled time of a list: its schedule's makespan plus, when it splits any window, the
/// launch that clears the split windows' rows.
pub fn modelled_time(wl: &WorkList, k_slices: u32, m: &DeviceModel) -> f64 {
    simulate(wl, k_slices, m).makespan + if wl.split_windows.is_empty() { 0.0 } else { m.clear_launch_cost }
}

/// The balanced TC8 work list: long items first ([`ItemOrder::HeavyFirst`]), windows cut into
/// equal runs of at most a cap chosen by the cost model ([`simulate`] plus the clearing launch):
/// every cap from `min_run` blocks up to the longest window (no split at all) in steps of
/// ~1.25x is tried, the cheapest kept (ties: the larger cap, fewer atomics). Returns the list
/// and its cap. `blocks_per_window` is the launcher's `Tc8Shape::blocks_per_window`.
pub fn balanced_work_list(blocks_per_window: &[u32], k_slices: u32, m: &DeviceModel) -> (WorkList, u32) {
    let longest = blocks_per_window.iter().copied().max().unwrap_or(0).max(1);
    let total: u32 = blocks_per_window.iter().sum();
    // The launcher's cap (in heavy-first order) is a candidate too.
    let mut caps = vec![longest, tc8_max_blocks(total, blocks_per_window.len() as u32, k_slices, m.sm_count).min(longest)];
    let mut c = m.min_run.max(1) as f64;
    while (c as u32) < longest {
        caps.push(c as u32);
        c = (c * 1.25).ceil();
    }
    // Largest cap first, so that on a tie the list with the fewest atomic items wins.
    caps.sort_unstable_by(|a, b| b.cmp(a));
    caps.dedup();
    let times: Vec<f64> =
        caps.par_iter().map(|&cap| modelled_time(&cut_work_list(blocks_per_window, cap, ItemOrder::HeavyFirst), k_slices, m)).collect();
    let mut best = 0;
    for (i, &t) in times.iter().enumerate() {
        if t < times[best] * (1.0 - 1e-9) {
            best = i;
        }
    }
    let cap = caps[best];
    (cut_work_list(blocks_per_window, cap, ItemOrder::HeavyFirst), cap)
}

/// How the TC8 work list is built (a tuning value of `ops::spmm::tc8::Tc8Config`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum WorkListBuilder {
    /// Windows cut at `tc8_max_blocks`, in window order ([`launcher_work_list`]).
    Launcher,
    /// Equal cuts, heavy items first, the cap chosen by the schedule model ([`balanced_work_list`]).
    /// The default: H100, K = 128, 7 graphs, f16 1.15x -> 1.36x cuSPARSE f32 (bench/NOTES.md).
    #[default]
    Balanced,
    /// Windows cut into equal runs of at most `cap` blocks, in `order` ([`cut_work_list`]; for
    /// experiments such as `examples/tc8_worklist.rs`).
    Cut { cap: u32, order: ItemOrder },
}

/// The TC8 work list from `builder`.
pub fn tc8_work_list(blocks_per_window: &[u32], k_slices: u32, sm_count: u32, builder: WorkListBuilder) -> WorkList {
    match builder {
        WorkListBuilder::Launcher => launcher_work_list(blocks_per_window, k_slices, sm_count).0,
        WorkListBuilder::Balanced => balanced_work_list(blocks_per_window, k_slices, &DeviceModel::new(sm_count)).0,
        WorkListBuilder::Cut { cap, order } => cut_work_list(blocks_per_window, cap, order),
    }
}

/// Check that `wl` is a valid list for windows of `blocks_per_window` blocks: every block of
/// every window in exactly one item (an empty window in one empty item), items within their
/// window, `split_windows` sorted and exactly the windows of more than one item.
pub fn check_work_list(wl: &WorkList, blocks_per_window: &[u32]) -> Result<(), String> {
    if wl.item_blocks.len() != 2 * wl.item_win.len() {
        return Err("item_blocks is not two entries per item".into());
    }
    let mut runs: Vec<Vec<(u32, u32)>> = vec![Vec::new(); blocks_per_window.len()];
    for (i, &w) in wl.item_win.iter().enumerate() {
        let (b, e) = (wl.item_blocks[2 * i], wl.item_blocks[2 * i + 1]);
        let nb = *blocks_per_window.get(w as usize).ok_or(format!("item {i}: window {w} out of range"))?;
        if b > e || e > nb {
            return Err(format!("item {i}: blocks {b}..{e} of window {w} ({nb} blocks)"));
        }
        runs[w as usize].push((b, e));
    }
    let mut split = Vec::new();
    for (w, r) in runs.iter_mut().enumerate() {
        r.sort_unstable();
        let nb = blocks_per_window[w];
        if r.is_empty() {
            return Err(format!("window {w} has no item"));
        }
        if r.len() > 1 {
            split.push(w as u32);
        }
        let mut at = 0;
        for &(b, e) in r.iter() {
            if b != at || (e == b && nb > 0) {
                return Err(format!("window {w}: runs {r:?} do not tile 0..{nb}"));
            }
            at = e;
        }
        if at != nb {
            return Err(format!("window {w}: runs {r:?} do not tile 0..{nb}"));
        }
    }
    if split != wl.split_windows {
        return Err(format!("split_windows {:?}, expected {split:?}", wl.split_windows));
    }
    Ok(())
}

/// The current launcher's list: `tc8_max_blocks` then [`work_list`].
pub fn launcher_work_list(blocks_per_window: &[u32], k_slices: u32, sm_count: u32) -> (WorkList, u32) {
    let total: u32 = blocks_per_window.iter().sum();
    let mb = tc8_max_blocks(total, blocks_per_window.len() as u32, k_slices, sm_count);
    (work_list(blocks_per_window.iter().copied(), mb), mb)
}

/// The `tcgnn info --worklist` section: windows, vectors, blocks per window, then each
/// builder's list and its modelled schedule, then the hub columns' spread.
pub fn render_worklist(m: &MeBcrs, k_slices: u32, model: &DeviceModel) -> String {
    use std::fmt::Write;
    let bpw: Vec<u32> = (0..m.n_windows()).map(|w| m.blocks_of(w) as u32).collect();
    let d = Distribution::of(bpw.iter().copied());
    let mut s = String::new();
    let _ = writeln!(
        s,
        "TC8 work list ({} SMs x {} warps, {k_slices} K slices; costs in blocks: item {}, atomic {}, clearing launch {})",
        model.sm_count, model.warps_per_sm, model.item_cost, model.atomic_cost, model.clear_launch_cost
    );
    let _ = writeln!(s, "windows {}  vectors {}  blocks {}", m.n_windows(), m.n_vectors(), d.total);
    let _ = writeln!(
        s,
        "blocks per window: mean {:.2}  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  top 1% of windows hold {:.1}%",
        d.mean,
        d.p50,
        d.p90,
        d.p99,
        d.p999,
        d.max,
        100.0 * d.top1_share
    );
    let mut lists = Vec::new();
    let (wl, mb) = launcher_work_list(&bpw, k_slices, model.sm_count);
    lists.push(work_list_stats("launcher", &wl, mb, k_slices, model));
    let wl = cut_work_list(&bpw, mb, ItemOrder::HeavyFirst);
    lists.push(work_list_stats("heavy1st", &wl, mb, k_slices, model));
    let (wl, cap) = balanced_work_list(&bpw, k_slices, model);
    lists.push(work_list_stats("balanced", &wl, cap, k_slices, model));
    let _ = writeln!(
        s,
        "{:<10} {:>8} {:>8} {:>8} {:>7} {:>8} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>6}",
        "list", "max run", "items", "largest", "split", "atomic", "warps/SM", "blk/slot", "crit", "ideal", "makespan", "time", "idle"
    );
    for l in &lists {
        let _ = writeln!(
            s,
            "{:<10} {:>8} {:>8} {:>8} {:>7} {:>8} {:>9.1} {:>8.1} {:>9.2} {:>9.0} {:>9.0} {:>9.0} {:>5.0}%",
            l.name,
            l.max_run,
            l.items.count,
            l.items.max,
            l.split_windows,
            l.atomic_items,
            l.warps_per_sm,
            l.blocks_per_slot,
            l.critical_ratio,
            l.schedule.ideal,
            l.schedule.makespan,
            l.modelled,
            100.0 * l.schedule.idle_in_blocks
        );
    }
    let concurrent = (model.warp_slots() / k_slices.max(1)) as usize;
    let _ = writeln!(s, "hub columns (windows gathering them; span in windows; most in any {concurrent} consecutive windows):");
    for h in hub_spread(m, 5, concurrent) {
        let _ = writeln!(s, "  column {:>8}  windows {:>7}  span {:>7}  concurrent {:>7}", h.column, h.windows, h.span, h.max_concurrent);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A power-law-like window profile: `n` windows of a few blocks and `hubs` heavy ones, the
    /// heavy ones either spread out or all at the end (what RCM does to musae_github's hubs).
    fn profile(n: usize, hubs: usize, hub_blocks: u32, at_end: bool, seed: u64) -> Vec<u32> {
        let mut rng = crate::util::rng::SplitMix64::new(seed);
        let mut v: Vec<u32> = (0..n).map(|_| 1 + rng.below(12) as u32).collect();
        for h in 0..hubs {
            let w = if at_end { n - 1 - h } else { (h * 7919 + 13) % n };
            v[w] = hub_blocks / (h as u32 + 1);
        }
        v
    }

    #[test]
    fn cut_lists_are_valid_and_even() {
        let bpw = [0u32, 3, 10, 4, 0, 9];
        for order in [ItemOrder::Window, ItemOrder::HeavyFirst] {
            let wl = cut_work_list(&bpw, 4, order);
            check_work_list(&wl, &bpw).unwrap();
            assert_eq!(wl.split_windows, vec![2, 5]);
            // 10 blocks in 3 runs of 3-4, 9 in 3 runs of 3.
            let mut lens: Vec<u32> = wl.item_blocks.chunks(2).map(|b| b[1] - b[0]).collect();
            lens.sort_unstable();
            assert_eq!(lens, vec![0, 0, 3, 3, 3, 3, 3, 3, 4, 4]);
        }
        let wl = cut_work_list(&bpw, 4, ItemOrder::Window);
        assert_eq!(wl.item_win, vec![0, 1, 2, 2, 2, 3, 4, 5, 5, 5]);
        // A cap above every window: the launcher's list with a large max_blocks.
        assert_eq!(cut_work_list(&bpw, 100, ItemOrder::Window), work_list(bpw.iter().copied(), 100));
        // Degenerate cap 0 is taken as 1.
        check_work_list(&cut_work_list(&bpw, 0, ItemOrder::Window), &bpw).unwrap();
        check_work_list(&cut_work_list(&[], 4, ItemOrder::HeavyFirst), &[]).unwrap();
    }

    #[test]
    fn heavy_first_puts_long_items_first_and_keeps_the_rest_in_window_order() {
        let bpw = [2u32, 9, 1, 10, 3, 5, 8];
        let wl = cut_work_list(&bpw, 100, ItemOrder::HeavyFirst);
        check_work_list(&wl, &bpw).unwrap();
        // Heavy: at least half the longest (10): windows 3 (10), 1 (9), 6 (8), 5 (5); then 0, 2, 4.
        assert_eq!(wl.item_win, vec![3, 1, 6, 5, 0, 2, 4]);
    }

    #[test]
    fn launcher_lists_check() {
        for seed in 0..4 {
            let bpw = profile(3000, 20, 1500, seed % 2 == 0, seed);
            let (wl, mb) = launcher_work_list(&bpw, 2, 132);
            check_work_list(&wl, &bpw).unwrap();
            assert!(wl.item_blocks.chunks(2).all(|b| b[1] - b[0] <= mb));
        }
        let bad = WorkList { item_win: vec![0, 0], item_blocks: vec![0, 2, 1, 3], split_windows: vec![0] };
        assert!(check_work_list(&bad, &[3]).is_err());
        let missing = WorkList { item_win: vec![0], item_blocks: vec![0, 3], split_windows: vec![] };
        assert!(check_work_list(&missing, &[3, 1]).is_err());
    }

    #[test]
    fn simulate_counts_slots_blocks_and_slices() {
        let m = DeviceModel {
            sm_count: 1,
            warps_per_sm: 4,
            warps_per_block: 4,
            item_cost: 0.0,
            atomic_cost: 0.0,
            clear_launch_cost: 0.0,
            min_run: 1,
        };
        // One block slot: thread blocks run one after another, each as long as its longest item.
        let wl = cut_work_list(&[4, 1, 1, 1, 2, 2, 2, 2], 100, ItemOrder::Window);
        let s = simulate(&wl, 1, &m);
        assert_eq!(s.makespan, 6.0);
        assert_eq!(s.ideal, 15.0 / 4.0);
        assert!((s.idle_in_blocks - (1.0 - 15.0 / 24.0)).abs() < 1e-9);
        assert_eq!(simulate(&wl, 3, &m).makespan, 18.0);
        // Two slots: in parallel.
        let m2 = DeviceModel { sm_count: 2, ..m };
        assert_eq!(simulate(&wl, 1, &m2).makespan, 4.0);
    }

    #[test]
    fn balanced_lists_are_valid_and_never_worse_in_the_model() {
        let m = DeviceModel::H100;
        for (seed, at_end) in [(1, false), (2, true), (3, true)] {
            for hub_blocks in [50, 1400, 20_000] {
                let bpw = profile(4700, 30, hub_blocks, at_end, seed);
                let (wl, cap) = balanced_work_list(&bpw, 2, &m);
                check_work_list(&wl, &bpw).unwrap();
                assert!(wl.item_blocks.chunks(2).all(|b| b[1] - b[0] <= cap));
                let (launcher, _) = launcher_work_list(&bpw, 2, 132);
                let (tb, tl) = (modelled_time(&wl, 2, &m), modelled_time(&launcher, 2, &m));
                assert!(tb <= tl, "seed {seed} hubs {hub_blocks}: balanced {tb} > launcher {tl}");
            }
        }
        // Hubs at the end of the order (RCM): the launcher's list leaves them for last.
        let bpw = profile(4700, 30, 1400, true, 7);
        let (launcher, _) = launcher_work_list(&bpw, 2, 132);
        let (wl, _) = balanced_work_list(&bpw, 2, &m);
        assert!(modelled_time(&wl, 2, &m) * 1.2 < modelled_time(&launcher, 2, &m));
        // Few short windows that cannot fill the device: nothing is split (no clearing launch).
        let small = vec![3u32; 500];
        let (wl, _) = balanced_work_list(&small, 2, &m);
        assert!(wl.split_windows.is_empty());
        assert_eq!(balanced_work_list(&[], 2, &m).0.item_win.len(), 0);
    }

    #[test]
    fn distribution_quantiles() {
        let d = Distribution::of((1..=100u32).rev());
        assert_eq!((d.count, d.total, d.p50, d.p99, d.max), (100, 5050, 51, 99, 100));
        assert!((d.top1_share - 100.0 / 5050.0).abs() < 1e-12);
        assert_eq!(Distribution::of(std::iter::empty()).max, 0);
    }

    #[test]
    fn hub_spread_finds_shared_columns() {
        // 4 windows (32 rows); column 0 in every row, column 5 in the rows of windows 2 and 3.
        let mut t = Vec::new();
        for r in 0..32u32 {
            t.push((r, 0, 1.0));
            if r >= 16 {
                t.push((r, 5, 1.0));
            }
        }
        let g = crate::graph::Csr::from_triplets(32, 32, &t).unwrap();
        let m = MeBcrs::from_csr(&g, 8).unwrap();
        let h = hub_spread(&m, 2, 2);
        assert_eq!(h[0], HubSpread { column: 0, windows: 4, span: 4, max_concurrent: 2 });
        assert_eq!(h[1], HubSpread { column: 5, windows: 2, span: 2, max_concurrent: 2 });
        assert!(render_worklist(&m, 2, &DeviceModel::H100).contains("launcher"));
    }

    #[test]
    fn long_windows_are_split_and_empty_windows_kept() {
        let wl = work_list([0u32, 3, 10, 4].into_iter(), 4);
        assert_eq!(wl.item_win, vec![0, 1, 2, 2, 2, 3]);
        assert_eq!(wl.item_blocks, vec![0, 0, 0, 3, 0, 4, 4, 8, 8, 10, 0, 4]);
        assert_eq!(wl.split_windows, vec![2]);
    }

    #[test]
    fn split_size_keeps_ordinary_windows_whole_and_fills_the_device() {
        // Few, dense windows (ogbl-ddi-like): cut so that 132 SMs get >= 16 warps each.
        let mb = tc8_max_blocks(167_000, 534, 2, 132);
        assert!(167_000u32.div_ceil(mb) * 2 >= 132 * 16);
        // Many long windows already fill the device: kept whole (tolokers-like, 75 per window).
        assert!(tc8_max_blocks(110_000, 1470, 2, 132) > 75);
        // Skewed graphs: heavy windows cut near 4x the mean, never below 32.
        assert_eq!(tc8_max_blocks(130_000, 32_768, 2, 132), 32);
    }
}
