//! Where the setup of work on a GPU goes: wall time spent translating graph formats for it
//! (`ops::GraphHandle`'s builders) and uploading host data to it (`memory`), summed over the
//! life of the [`Gpu`](crate::gpu::Gpu), and the device memory in use, sampled. `tcgnn train`
//! prints them next to the time spent reading or generating the data; kernels are timed with
//! events elsewhere.
//!
//! Translation time excludes the uploads made inside a translation (the CSR it starts from), so
//! the two never count the same second twice.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

#[derive(Default)]
pub struct SetupClock {
    translate_ns: AtomicU64,
    upload_ns: AtomicU64,
    upload_bytes: AtomicU64,
    /// Highest `total - free` device memory seen by [`SetupClock::sample_memory`].
    peak_used: AtomicU64,
}

/// A snapshot of [`SetupClock`].
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct SetupTimes {
    pub translate_s: f64,
    pub upload_s: f64,
    pub upload_bytes: u64,
    /// Device memory in use at the highest sample (every process on the device counts).
    pub peak_device_used_bytes: u64,
}

impl SetupClock {
    /// Run a translation, adding its wall time less the uploads it made. Translations nest (one
    /// format built from another): only the outermost one on this thread is timed.
    pub fn translating<R>(&self, f: impl FnOnce() -> R) -> R {
        thread_local!(static DEPTH: Cell<u32> = const { Cell::new(0) });
        let outer = DEPTH.with(|d| d.replace(d.get() + 1)) == 0;
        let (t, up0) = (Instant::now(), self.upload_ns.load(Ordering::Relaxed));
        let r = f();
        DEPTH.with(|d| d.set(d.get() - 1));
        if !outer {
            return r;
        }
        let uploads = self.upload_ns.load(Ordering::Relaxed).saturating_sub(up0);
        self.translate_ns.fetch_add((t.elapsed().as_nanos() as u64).saturating_sub(uploads), Ordering::Relaxed);
        r
    }

    /// Run an upload of `bytes`, adding its wall time (a copy from pageable host memory returns
    /// once the data has left the host buffer, so this is the copy's time).
    pub fn uploading<R>(&self, bytes: usize, f: impl FnOnce() -> R) -> R {
        let t = Instant::now();
        let r = f();
        self.upload_ns.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        self.upload_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        r
    }

    /// Record device memory in use now (`total - free`), keeping the highest.
    pub fn sample_memory(&self, used: u64) {
        self.peak_used.fetch_max(used, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> SetupTimes {
        SetupTimes {
            translate_s: self.translate_ns.load(Ordering::Relaxed) as f64 * 1e-9,
            upload_s: self.upload_ns.load(Ordering::Relaxed) as f64 * 1e-9,
            upload_bytes: self.upload_bytes.load(Ordering::Relaxed),
            peak_device_used_bytes: self.peak_used.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translation_excludes_nested_uploads() {
        let c = SetupClock::default();
        c.translating(|| {
            c.translating(|| std::thread::sleep(std::time::Duration::from_millis(10)));
            c.uploading(1000, || std::thread::sleep(std::time::Duration::from_millis(100)));
        });
        let s = c.snapshot();
        assert!(s.upload_s >= 0.100 && s.upload_bytes == 1000, "{s:?}");
        assert!(s.translate_s >= 0.010 && s.translate_s < 0.100, "{s:?}: the nested upload or translation counted twice");
        c.sample_memory(5);
        c.sample_memory(3);
        assert_eq!(c.snapshot().peak_device_used_bytes, 5);
    }
}
