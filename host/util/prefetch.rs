//! Batches made on CPU worker threads ahead of the consumer, delivered in order.
//!
//! Worker w makes items w, w + W, w + 2W, ... and hands them over through its own bounded
//! channel; the consumer reads the channels round-robin, so items arrive in index order without
//! a reordering buffer, and each worker runs at most `ahead` items in front of the consumer
//! (double buffering at `ahead = 1`: one item waiting while the next is made). If making an
//! item is faster than consuming one, the consumer never waits; [`Prefetch::waited`] tells.
//! The items are whatever `make(i)` returns: with a sampler's pure `batch(epoch, i)` they do not
//! depend on the number of workers.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Worker threads and how far each may run ahead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrefetchConfig {
    pub workers: usize,
    /// Finished items each worker may hold before the consumer takes them (>= 1).
    pub ahead: usize,
}

impl Default for PrefetchConfig {
    fn default() -> Self {
        PrefetchConfig { workers: 2, ahead: 1 }
    }
}

/// An in-order iterator over `make(0), make(1), ..., make(n - 1)`, made on worker threads.
/// Dropping it early stops the workers after the item each is making.
pub struct Prefetch<T> {
    channels: Vec<Receiver<T>>,
    workers: Vec<Option<JoinHandle<()>>>,
    next: usize,
    n: usize,
    waited: Duration,
}

impl<T: Send + 'static> Prefetch<T> {
    /// Starts the workers at once (fails only if the OS refuses a thread).
    pub fn new<F>(n: usize, config: PrefetchConfig, make: F) -> Result<Self>
    where
        F: Fn(usize) -> T + Send + Sync + 'static,
    {
        let workers_n = config.workers.max(1).min(n.max(1));
        let make = Arc::new(make);
        let mut channels = Vec::with_capacity(workers_n);
        let mut workers = Vec::with_capacity(workers_n);
        for w in 0..workers_n {
            let (tx, rx) = sync_channel(config.ahead.max(1));
            let make = Arc::clone(&make);
            let handle = std::thread::Builder::new()
                .name(format!("tcgnn-prefetch-{w}"))
                .spawn(move || {
                    for i in (w..n).step_by(workers_n) {
                        if tx.send(make(i)).is_err() {
                            return; // the consumer is gone
                        }
                    }
                })
                .map_err(|e| Error::Unsupported(format!("could not start a prefetch thread: {e}")))?;
            channels.push(rx);
            workers.push(Some(handle));
        }
        Ok(Prefetch { channels, workers, next: 0, n, waited: Duration::ZERO })
    }

    /// Time `next` spent blocked waiting for an item not yet made.
    pub fn waited(&self) -> Duration {
        self.waited
    }
}

impl<T> Iterator for Prefetch<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        if self.next >= self.n {
            return None;
        }
        let w = self.next % self.channels.len();
        let t0 = Instant::now();
        let item = self.channels[w].try_recv().ok().or_else(|| self.channels[w].recv().ok());
        self.waited += t0.elapsed();
        match item {
            Some(item) => {
                self.next += 1;
                Some(item)
            }
            None => {
                // The worker hung up before its item: it panicked. Re-raise its panic here.
                let handle = self.workers[w].take().expect("a worker is joined once");
                match handle.join() {
                    Err(payload) => std::panic::resume_unwind(payload),
                    Ok(()) => unreachable!("a worker only returns early when the consumer is gone"),
                }
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.n - self.next;
        (left, Some(left))
    }
}

impl<T> Drop for Prefetch<T> {
    fn drop(&mut self) {
        self.channels.clear(); // blocked senders fail and their workers return
        for h in self.workers.iter_mut().filter_map(Option::take) {
            let _ = h.join();
        }
    }
}
