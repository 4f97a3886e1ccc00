//! How much host memory this process may still allocate, so that a size read from a file or the
//! command line is refused with a clear message before an allocation the allocator would answer
//! with an abort.
//!
//! The bound is the smallest of: the cgroup limit minus the cgroup's usage (containers), the
//! address-space limit (`ulimit -v`) minus the process's current virtual size, and the kernel's
//! `MemAvailable`. Each is read from `/proc` or `/sys` at the call (cheap: a few small files), and
//! a source that cannot be read is skipped; on a system with none of them nothing is refused.

use crate::error::{Error, Result};

/// Bytes the process may still allocate and which limit decides it (for the message).
pub fn available_host_bytes() -> Option<(u64, &'static str)> {
    let mut best: Option<(u64, &'static str)> = None;
    let mut take = |v: Option<u64>, what: &'static str| {
        if let Some(v) = v
            && best.is_none_or(|(b, _)| v < b)
        {
            best = Some((v, what));
        }
    };
    take(cgroup_room(), "the cgroup memory limit");
    take(address_space_room(), "the address-space limit (ulimit -v)");
    take(mem_available(), "MemAvailable");
    best
}

/// `Ok` when `bytes` more can be allocated; else an error naming `what` and both sizes.
pub fn check_host_alloc(bytes: u64, what: &str) -> Result<()> {
    match host_alloc_problem(bytes, what) {
        Some(msg) => Err(Error::Unsupported(msg)),
        None => Ok(()),
    }
}

/// The message [`check_host_alloc`] would fail with, for callers that report it at a file line.
pub fn host_alloc_problem(bytes: u64, what: &str) -> Option<String> {
    match available_host_bytes() {
        Some((room, source)) if bytes > room => {
            Some(format!("{what} needs {} of host memory, but only {} is available ({source})", human_bytes(bytes), human_bytes(room)))
        }
        _ => None,
    }
}

/// `count * size` bytes, saturating (an overflowing product can never be allocated anyway).
pub fn bytes_of(count: u64, size: u64) -> u64 {
    count.saturating_mul(size)
}

/// `1.5 GiB`-style sizes for messages.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{b} B") } else { format!("{v:.1} {}", UNITS[u]) }
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// cgroup v2 `memory.max - memory.current`, or v1 `limit_in_bytes - usage_in_bytes`.
fn cgroup_room() -> Option<u64> {
    let pair = |lim: &str, cur: &str| -> Option<u64> {
        let limit: u64 = read(lim)?.trim().parse().ok()?; // "max" (no limit) does not parse
        let used: u64 = read(cur).and_then(|s| s.trim().parse().ok()).unwrap_or(0);
        // v1 reports "no limit" as a number near 2^63.
        (limit < 1 << 60).then(|| limit.saturating_sub(used))
    };
    pair("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current")
        .or_else(|| pair("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"))
}

/// `RLIMIT_AS` (soft) minus the current virtual size, from `/proc/self/{limits,status}`.
fn address_space_room() -> Option<u64> {
    let limits = read("/proc/self/limits")?;
    let line = limits.lines().find(|l| l.starts_with("Max address space"))?;
    let soft: u64 = line["Max address space".len()..].split_whitespace().next()?.parse().ok()?;
    let status = read("/proc/self/status")?;
    let vm_kb: u64 = kib_field(&status, "VmSize:")?;
    Some(soft.saturating_sub(vm_kb * 1024))
}

/// This process's peak resident memory so far: `VmHWM` of `/proc/self/status`, the kernel's
/// high-water mark of the resident set (what getrusage reports as `ru_maxrss`); `None` off
/// Linux.
pub fn peak_rss_bytes() -> Option<u64> {
    kib_field(&read("/proc/self/status")?, "VmHWM:").map(|kb| kb * 1024)
}

fn mem_available() -> Option<u64> {
    kib_field(&read("/proc/meminfo")?, "MemAvailable:").map(|kb| kb * 1024)
}

/// A `Name:   1234 kB` field.
fn kib_field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.split_whitespace().next()?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impossible_sizes_are_refused_and_small_ones_pass() {
        if available_host_bytes().is_none() {
            return; // not Linux: nothing to read, nothing refused
        }
        let e = check_host_alloc(u64::MAX / 2, "a test array").unwrap_err().to_string();
        assert!(e.contains("a test array needs") && e.contains("available"), "{e}");
        check_host_alloc(1 << 20, "a megabyte").unwrap();
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(bytes_of(u64::MAX, 4), u64::MAX);
    }

    #[test]
    fn peak_rss_follows_a_touched_allocation() {
        let Some(before) = peak_rss_bytes() else { return }; // not Linux
        // written, so resident; black_box keeps a release build from eliding the allocation
        // (it did on the H200: the peak stayed at 63.9 MB)
        let v = std::hint::black_box(vec![1u8; 64 << 20]);
        let after = peak_rss_bytes().unwrap();
        std::hint::black_box(&v);
        assert!(after >= before && after >= v.len() as u64, "peak {before} -> {after} with 64 MiB resident");
    }
}
