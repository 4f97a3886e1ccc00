//! An account of live device memory by the source line that allocated it (`bench train
//! --memory-ledger`): which buffers make a step's footprint. Off unless switched on; while on,
//! every [`DeviceVec`](crate::gpu::DeviceVec) made records its bytes against its caller's
//! location (`#[track_caller]` through the buffer constructors) and takes them back when
//! dropped. Library workspaces (cuBLAS, cuSPARSE) are not device vectors and are not counted.

use std::collections::HashMap;
use std::panic::Location;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

static ON: AtomicBool = AtomicBool::new(false);
static LIVE: Mutex<Option<HashMap<Site, Live>>> = Mutex::new(None);

/// Where a buffer was allocated.
pub type Site = &'static Location<'static>;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Live {
    pub bytes: u64,
    pub buffers: u64,
}

/// Start (or stop) recording allocations. Buffers made while off are never counted, also not
/// when they are dropped later.
pub fn set_enabled(on: bool) {
    ON.store(on, Ordering::SeqCst);
}

/// A buffer of `bytes` made at `site`: the site to hand back to [`released`] on drop, or `None`
/// while the ledger is off.
pub(crate) fn allocated(site: Site, bytes: usize) -> Option<Site> {
    if !ON.load(Ordering::Relaxed) {
        return None;
    }
    let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let e = live.get_or_insert_with(HashMap::new).entry(site).or_default();
    e.bytes += bytes as u64;
    e.buffers += 1;
    Some(site)
}

pub(crate) fn released(site: Site, bytes: usize) {
    let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(e) = live.as_mut().and_then(|m| m.get_mut(site)) {
        e.bytes = e.bytes.saturating_sub(bytes as u64);
        e.buffers = e.buffers.saturating_sub(1);
    }
}

/// The live buffers by site, largest first ("file:line", bytes, buffers); sites with nothing
/// live left out.
pub fn live() -> Vec<(String, Live)> {
    let live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let mut v: Vec<(String, Live)> =
        live.iter().flatten().filter(|(_, l)| l.buffers > 0).map(|(s, l)| (format!("{}:{}", s.file(), s.line()), *l)).collect();
    v.sort_by(|a, b| b.1.bytes.cmp(&a.1.bytes).then_with(|| a.0.cmp(&b.0)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_what_is_live_while_on() {
        // Sites of this test only (other tests may allocate through the ledger concurrently).
        #[track_caller]
        fn here() -> Site {
            Location::caller()
        }
        let a = here();
        let b = here();
        set_enabled(false);
        assert_eq!(allocated(a, 10), None);
        set_enabled(true);
        let ta = allocated(a, 100).unwrap();
        allocated(a, 50).unwrap();
        let tb = allocated(b, 7).unwrap();
        released(ta, 100);
        released(tb, 7);
        let mine: Vec<_> = live().into_iter().filter(|(s, _)| s == &format!("{}:{}", a.file(), a.line())).collect();
        assert_eq!(mine, vec![(format!("{}:{}", a.file(), a.line()), Live { bytes: 50, buffers: 1 })]);
        assert!(!live().iter().any(|(s, _)| s == &format!("{}:{}", b.file(), b.line())));
    }
}
