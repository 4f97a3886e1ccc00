//! Global → local node ids for one batch, without an O(N) clear per batch.
//!
//! A batch touches a few thousand of possibly millions of nodes. A dense array indexed by global
//! id (`u32::MAX` = not in the batch) answers "is u sampled, and as which local id?" in one load;
//! it is allocated once per worker thread, not per batch, and only the entries a batch set are
//! reset when it is done. [`LocalIdPool`] hands each concurrent batch its own array.

use std::sync::Mutex;

/// The local id of a node not in the batch.
pub const ABSENT: u32 = u32::MAX;

/// One dense global → local map; every entry `ABSENT` between uses.
pub struct LocalIds {
    map: Vec<u32>,
    set: Vec<u32>,
}

impl LocalIds {
    fn new(n: usize) -> Self {
        LocalIds { map: vec![ABSENT; n], set: Vec::new() }
    }

    /// The local id of `global`, if it was inserted since the last clear.
    #[inline]
    pub fn get(&self, global: u32) -> Option<u32> {
        let l = self.map[global as usize];
        (l != ABSENT).then_some(l)
    }

    /// The local id of `global`, or [`ABSENT`] (for branch-free loops).
    #[inline]
    pub fn get_raw(&self, global: u32) -> u32 {
        self.map[global as usize]
    }

    /// Give `global` the local id `local` (the caller keeps ids unique).
    #[inline]
    pub fn insert(&mut self, global: u32, local: u32) {
        if self.map[global as usize] == ABSENT {
            self.set.push(global);
        }
        self.map[global as usize] = local;
    }

    /// Forget every insertion (cost: the number inserted, not N).
    pub fn clear(&mut self) {
        for &g in &self.set {
            self.map[g as usize] = ABSENT;
        }
        self.set.clear();
    }
}

/// Maps for concurrent batches over a graph of `n` nodes: at most one per thread sampling at
/// once is ever allocated.
pub struct LocalIdPool {
    n: usize,
    free: Mutex<Vec<LocalIds>>,
}

impl LocalIdPool {
    pub fn new(n: usize) -> Self {
        LocalIdPool { n, free: Mutex::new(Vec::new()) }
    }

    /// Run `f` with a cleared map, then clear it and keep it for the next batch.
    pub fn with<R>(&self, f: impl FnOnce(&mut LocalIds) -> R) -> R {
        let taken = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut ids = taken.unwrap_or_else(|| LocalIds::new(self.n));
        let r = f(&mut ids);
        ids.clear();
        self.free.lock().unwrap_or_else(|e| e.into_inner()).push(ids);
        r
    }
}
