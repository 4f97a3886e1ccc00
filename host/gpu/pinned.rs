//! Large uploads through a small ring of page-locked (pinned) staging buffers.
//!
//! A copy from pageable memory makes the driver stage it through its own pinned bounce buffer,
//! one piece at a time and without overlap: 6.3 GB/s measured for the 4.45 GB a 100M-edge
//! setup uploads. Here the host fills chunk i + 1 of a pinned slot (on all cores) while the DMA
//! engine copies chunk i, and each copy is queued on the GPU's stream like every other
//! operation. Two slots of [`STAGING_CHUNK_BYTES`] are allocated on the first large upload and
//! kept by the [`Gpu`]; a slot is refilled only after the copy that read it has finished (an
//! event per slot). Uploads under [`STAGED_MIN_BYTES`] keep the plain copy: pinning pays only
//! when the transfer is long.

use std::sync::{Arc, Mutex};

use cudarc::driver::sys::{CUdeviceptr, CUevent_flags};
use cudarc::driver::{CudaEvent, CudaStream, DeviceRepr, PinnedHostSlice, result};

use crate::error::{Error, Result};
use crate::gpu::Gpu;

/// Bytes of one staging slot: large enough that a copy's fixed cost (~10 µs) is noise, small
/// enough that two of them are a negligible amount of locked memory.
pub const STAGING_CHUNK_BYTES: usize = 32 << 20;

/// Uploads at least this large go through the pinned ring.
pub const STAGED_MIN_BYTES: usize = 8 << 20;

/// Slots in the ring: one being filled while the other is copied.
const SLOTS: usize = 2;

/// The pinned slots and the event recorded after the last copy out of each.
pub struct PinnedRing {
    slots: Vec<(PinnedHostSlice<u8>, CudaEvent)>,
}

impl Drop for PinnedRing {
    fn drop(&mut self) {
        // A copy still reading a slot must finish before its memory is freed.
        for (_, done) in &self.slots {
            done.synchronize().ok();
        }
    }
}

/// The ring a [`Gpu`] owns, made on first use.
#[derive(Default)]
pub struct Staging(Mutex<Option<PinnedRing>>);

/// Elements of `T` one slot holds.
pub const fn chunk_elems<T>() -> usize {
    STAGING_CHUNK_BYTES / std::mem::size_of::<T>()
}

/// The chunks `(first element, elements)` an upload of `len` elements in pieces of at most
/// `chunk` elements is cut into.
pub fn chunks(len: usize, chunk: usize) -> impl Iterator<Item = (usize, usize)> {
    let chunk = chunk.max(1);
    (0..len.div_ceil(chunk)).map(move |i| (i * chunk, chunk.min(len - i * chunk)))
}

impl Gpu {
    /// Copy `len` elements to device address `dst` (which must hold them) through the pinned
    /// ring, `chunk` elements at a time (at most [`chunk_elems`]): `fill(first, host)` writes
    /// elements `first .. first + host.len()` into the slot while the previous chunk is copied.
    /// Returns when the last copy has finished (the setup clock times the transfer).
    pub(crate) fn upload_staged<T: DeviceRepr>(
        &self,
        dst: CUdeviceptr,
        len: usize,
        chunk: usize,
        mut fill: impl FnMut(usize, &mut [T]) -> Result<()>,
    ) -> Result<()> {
        self.refuse_in_capture(|| format!("a staged upload of {len} elements"))?;
        let chunk = chunk.clamp(1, chunk_elems::<T>().max(1));
        let mut ring = self.staging.0.lock().expect("staging ring poisoned");
        if ring.is_none() {
            *ring = Some(PinnedRing { slots: self.pinned_slots(STAGING_CHUNK_BYTES, "staging")? });
        }
        let ring = ring.as_mut().expect("made above");
        let size = std::mem::size_of::<T>();
        for (i, (first, n)) in chunks(len, chunk).enumerate() {
            let (buf, done) = &mut ring.slots[i % SLOTS];
            // The copy that last read this slot has finished (never recorded: returns at once).
            done.synchronize().map_err(|e| Error::cuda("waiting for a staging slot", e))?;
            let base = buf.as_mut_ptr().map_err(|e| Error::cuda("staging slot", e))?;
            // SAFETY: the slot holds STAGING_CHUNK_BYTES >= n * size bytes, is page-aligned (so
            // aligned for T) and no copy reads it now (waited above).
            let host = unsafe { std::slice::from_raw_parts_mut(base as *mut T, n) };
            fill(first, host)?;
            // SAFETY: `dst` holds `len` elements (the caller's contract), `host` stays alive and
            // untouched until `done` (recorded next) has passed.
            unsafe { result::memcpy_htod_async(dst + (first * size) as u64, &*host, self.stream.cu_stream()) }
                .map_err(|e| Error::cuda("staged upload", e))?;
            done.record(&self.stream).map_err(|e| Error::cuda("staging event", e))?;
        }
        // Return when the data has reached the device, as a copy from pageable memory does: the
        // setup clock times the copy, not its queueing (the wait is the last chunk's tail).
        for (_, done) in &ring.slots {
            done.synchronize().map_err(|e| Error::cuda("waiting for the staged upload", e))?;
        }
        Ok(())
    }

    /// [`SLOTS`] pinned buffers of `bytes` each, with the event each records after its last
    /// copy. The bytes are uninitialised: every user writes a region before queueing its copy.
    fn pinned_slots(&self, bytes: usize, what: &str) -> Result<Vec<(PinnedHostSlice<u8>, CudaEvent)>> {
        (0..SLOTS)
            .map(|_| {
                // SAFETY: a region of the buffer is written before any copy reads it (above and
                // in `copy_htod_pinned`).
                let buf = unsafe { self.ctx.alloc_pinned::<u8>(bytes) }
                    .map_err(|e| Error::cuda(format!("pinning {bytes} bytes of {what} memory"), e))?;
                let done = self
                    .ctx
                    .new_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
                    .map_err(|e| Error::cuda(format!("{what} event"), e))?;
                Ok((buf, done))
            })
            .collect()
    }
}

/// Bytes of one slot of the small-copy arena: a whole sampled batch's largest array (dense
/// features of a few thousand rows) fits one.
pub const ARENA_SLOT_BYTES: usize = 16 << 20;

/// Copies of a few bytes to a few MB (a sampled batch's arrays, rebound into a model between
/// two replays of its step) queued from pinned memory, so the host returns at once instead of
/// waiting for the driver to stage pageable memory: two pinned slots filled front to back; when
/// one is full an event is recorded after its last copy and the other is taken, once the copies
/// out of it (recorded the same way) have finished.
pub struct CopyArena {
    slots: Vec<(PinnedHostSlice<u8>, CudaEvent)>,
    current: usize,
    used: usize,
    stream: Arc<CudaStream>,
}

impl Drop for CopyArena {
    fn drop(&mut self) {
        // Copies still reading the slots must finish before their memory is freed.
        self.stream.synchronize().ok();
    }
}

/// The arena a [`Gpu`] owns, made on first use.
#[derive(Default)]
pub struct Arena(Mutex<Option<CopyArena>>);

impl Gpu {
    /// Queue a copy of `len` elements to device address `dst` (which must hold them), written
    /// by `fill` into pinned memory: returns without waiting for the copy. Larger than an arena
    /// slot: the staged upload (which waits).
    pub fn copy_htod_pinned<T: DeviceRepr + Default + Clone>(
        &self,
        dst: CUdeviceptr,
        len: usize,
        fill: impl FnOnce(&mut [T]),
    ) -> Result<()> {
        let bytes = len * std::mem::size_of::<T>();
        if bytes == 0 {
            return Ok(());
        }
        self.refuse_in_capture(|| format!("a host-to-device copy of {bytes} bytes"))?;
        if bytes > ARENA_SLOT_BYTES {
            // Written whole on the host first (`fill` writes one slice), then staged.
            let mut whole = vec![T::default(); len];
            fill(&mut whole);
            return self.upload_staged(dst, len, chunk_elems::<T>(), |first, slot: &mut [T]| {
                slot.clone_from_slice(&whole[first..first + slot.len()]);
                Ok(())
            });
        }
        let mut arena = self.arena.0.lock().expect("copy arena poisoned");
        if arena.is_none() {
            *arena = Some(CopyArena {
                slots: self.pinned_slots(ARENA_SLOT_BYTES, "copy arena")?,
                current: 0,
                used: 0,
                stream: self.stream.clone(),
            });
        }
        let a = arena.as_mut().expect("made above");
        // 256-byte aligned pieces: aligned for any T, and whole DMA bursts.
        let mut at = a.used.div_ceil(256) * 256;
        if at + bytes > ARENA_SLOT_BYTES {
            a.slots[a.current].1.record(&self.stream).map_err(|e| Error::cuda("arena event", e))?;
            a.current = (a.current + 1) % SLOTS;
            a.slots[a.current].1.synchronize().map_err(|e| Error::cuda("waiting for an arena slot", e))?;
            at = 0;
        }
        let base = a.slots[a.current].0.as_mut_ptr().map_err(|e| Error::cuda("arena slot", e))?;
        // SAFETY: [at, at + bytes) lies in the slot, is aligned for T, and no queued copy reads
        // it (the slot's earlier copies read below `at`; older ones finished: waited above).
        let host = unsafe { std::slice::from_raw_parts_mut(base.add(at) as *mut T, len) };
        fill(host);
        // SAFETY: `dst` holds `len` elements; `host` stays untouched until the slot's event.
        unsafe { result::memcpy_htod_async(dst, &*host, self.stream.cu_stream()) }.map_err(|e| Error::cuda("pinned copy", e))?;
        a.used = at + bytes;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::chunks;

    #[test]
    fn chunks_cover_the_upload_once() {
        assert_eq!(chunks(0, 4).count(), 0);
        assert_eq!(chunks(1, 4).collect::<Vec<_>>(), [(0, 1)]);
        assert_eq!(chunks(4, 4).collect::<Vec<_>>(), [(0, 4)]);
        assert_eq!(chunks(9, 4).collect::<Vec<_>>(), [(0, 4), (4, 4), (8, 1)]);
        // A zero chunk is taken as one element, never a loop without progress.
        assert_eq!(chunks(2, 0).collect::<Vec<_>>(), [(0, 1), (1, 1)]);
    }
}
