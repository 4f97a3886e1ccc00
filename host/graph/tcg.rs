//! `.tcg`: the CSR as it lies in memory, for graphs read many times. Parsing a 100M-edge
//! `.mtx.gz` takes tens of seconds; this file loads at disk speed (`tcgnn convert G --to tcg`).
//!
//! Layout, little-endian:
//! ```text
//! magic      8 bytes  "TCGNNCSR"
//! version    u32      1
//! reserved   u32      0
//! n_rows     u64
//! n_cols     u64
//! nnz        u64
//! row_ptr    u32 x (n_rows + 1)
//! col_idx    u32 x nnz
//! values     f32 x nnz
//! checksum   u64      hash of every byte before it (see `Hash64`)
//! ```
//! The reader checks magic, version and that the sizes give exactly the file's length before
//! allocating anything, then the checksum, then the CSR invariants ([`Csr::new`]).

use std::io::{Read, Write};
use std::path::Path;

use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::util::atomic::AtomicFile;

const MAGIC: &[u8; 8] = b"TCGNNCSR";
const VERSION: u32 = 1;
const HEADER: u64 = 40;
/// Read and hashed in pieces of this many bytes (a multiple of the hash's 32-byte block).
const CHUNK: usize = 8 << 20;

/// Whether `path` names a `.tcg` file.
pub fn is_tcg(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "tcg")
}

/// Write `csr` as a `.tcg` file (atomically: a temporary name renamed when complete).
pub fn write_tcg(path: impl AsRef<Path>, csr: &Csr) -> Result<()> {
    let path = path.as_ref();
    let io = |e: std::io::Error| Error::Io { path: path.into(), source: e };
    let mut file = AtomicFile::create(path)?;
    let mut h = Hash64::new();
    let mut put = |bytes: &[u8]| -> Result<()> {
        h.update(bytes);
        file.writer().write_all(bytes).map_err(io)
    };
    let mut header = Vec::with_capacity(HEADER as usize);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&VERSION.to_le_bytes());
    header.extend_from_slice(&0u32.to_le_bytes());
    for v in [csr.n_rows(), csr.n_cols(), csr.nnz()] {
        header.extend_from_slice(&(v as u64).to_le_bytes());
    }
    put(&header)?;
    let mut buf = Vec::with_capacity(CHUNK);
    for words in [csr.row_ptr(), csr.col_idx()] {
        for part in words.chunks(CHUNK / 4) {
            buf.clear();
            buf.extend(part.iter().flat_map(|w| w.to_le_bytes()));
            put(&buf)?;
        }
    }
    for part in csr.values().chunks(CHUNK / 4) {
        buf.clear();
        buf.extend(part.iter().flat_map(|v| v.to_le_bytes()));
        put(&buf)?;
    }
    let sum = h.finish();
    file.writer().write_all(&sum.to_le_bytes()).map_err(io)?;
    file.commit()
}

/// Read a `.tcg` file (see the module doc). Every problem names the file.
pub fn read_tcg(path: impl AsRef<Path>) -> Result<Csr> {
    let path = path.as_ref();
    let io = |e: std::io::Error| Error::Io { path: path.into(), source: e };
    let file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    parse_tcg(file, len, path)
}

/// Parse a `.tcg` of `len` bytes from any reader; `path` is only used in error messages.
pub fn parse_tcg(mut file: impl Read, len: u64, path: &Path) -> Result<Csr> {
    let bad = |msg: String| Error::Io { path: path.into(), source: std::io::Error::new(std::io::ErrorKind::InvalidData, msg) };
    let io = |e: std::io::Error| Error::Io { path: path.into(), source: e };
    let mut header = [0u8; HEADER as usize];
    if len < HEADER + 8 {
        return Err(bad(format!("{len} bytes: too short for a .tcg file (truncated?)")));
    }
    file.read_exact(&mut header).map_err(io)?;
    if &header[..8] != MAGIC {
        return Err(bad("not a .tcg file (bad magic; write one with `tcgnn convert GRAPH --to tcg`)".into()));
    }
    let word = |i: usize| u32::from_le_bytes(header[i..i + 4].try_into().expect("4 bytes"));
    let long = |i: usize| u64::from_le_bytes(header[i..i + 8].try_into().expect("8 bytes"));
    if word(8) != VERSION {
        return Err(bad(format!("format version {} (this tcgnn reads version {VERSION}); convert the graph again", word(8))));
    }
    let (n_rows, n_cols, nnz) = (long(16), long(24), long(32));
    if n_rows >= 1 << 31 || n_cols >= 1 << 31 || nnz >= 1 << 31 {
        return Err(bad(format!("header declares {n_rows} x {n_cols} with {nnz} nonzeros: over the 2^31 - 1 limit (corrupt?)")));
    }
    let want = HEADER + 4 * (n_rows + 1) + 8 * nnz + 8;
    if len != want {
        return Err(bad(format!("{len} bytes, but a {n_rows} x {n_cols} graph with {nnz} nonzeros takes {want} (truncated or corrupt)")));
    }
    crate::util::memory::check_host_alloc(want, &format!("{}", path.display()))?;
    let mut h = Hash64::new();
    h.update(&header);
    let mut reader = std::io::BufReader::with_capacity(CHUNK, file);
    let mut buf = vec![0u8; CHUNK];
    let mut words = |count: usize, h: &mut Hash64| -> Result<Vec<u32>> {
        let mut out: Vec<u32> = Vec::new();
        out.try_reserve_exact(count).map_err(|_| bad(format!("cannot allocate {count} words")))?;
        while out.len() < count {
            let take = (count - out.len()).min(CHUNK / 4) * 4;
            reader.read_exact(&mut buf[..take]).map_err(io)?;
            h.update(&buf[..take]);
            out.extend(buf[..take].chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes"))));
        }
        Ok(out)
    };
    let row_ptr = words(n_rows as usize + 1, &mut h)?;
    let col_idx = words(nnz as usize, &mut h)?;
    let values: Vec<f32> = words(nnz as usize, &mut h)?.into_iter().map(f32::from_bits).collect();
    let mut sum = [0u8; 8];
    reader.read_exact(&mut sum).map_err(io)?;
    if u64::from_le_bytes(sum) != h.finish() {
        return Err(bad("checksum mismatch: the file is corrupt; convert the graph again".into()));
    }
    // The text readers refuse NaN and infinite values; a binary file must not smuggle them in
    // (every later sort, reorder and partition compares values).
    if let Some(e) = values.iter().position(|v| !v.is_finite()) {
        let r = row_ptr.partition_point(|&p| p as usize <= e).saturating_sub(1);
        let c = col_idx.get(e).copied().unwrap_or(0);
        return Err(bad(format!("edge ({r}, {c}) has value {}: edge values must be finite numbers", values[e])));
    }
    Csr::new(n_rows as usize, n_cols as usize, row_ptr, col_idx, values).map_err(|e| bad(e.to_string()))
}

/// A fast 64-bit checksum (not cryptographic): four independent lanes, each
/// `h = rotl((h ^ word) * K, 31)` over 8-byte words, so the multiply latency overlaps and it runs
/// at several GB/s. Every step is a bijection of the lane given the word, so any change to a
/// single word always changes the result.
struct Hash64 {
    lanes: [u64; 4],
    pending: Vec<u8>,
    len: u64,
}

impl Hash64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;

    fn new() -> Self {
        Hash64 { lanes: [1, 2, 3, 4], pending: Vec::with_capacity(32), len: 0 }
    }

    fn block(lanes: &mut [u64; 4], b: &[u8]) {
        for (i, lane) in lanes.iter_mut().enumerate() {
            let w = u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().expect("8 bytes"));
            *lane = ((*lane ^ w).wrapping_mul(Self::K)).rotate_left(31);
        }
    }

    fn update(&mut self, mut data: &[u8]) {
        self.len += data.len() as u64;
        if !self.pending.is_empty() {
            let take = (32 - self.pending.len()).min(data.len());
            self.pending.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.pending.len() < 32 {
                return;
            }
            let p = std::mem::take(&mut self.pending);
            Self::block(&mut self.lanes, &p);
            self.pending = p;
            self.pending.clear();
        }
        let mut blocks = data.chunks_exact(32);
        for b in &mut blocks {
            Self::block(&mut self.lanes, b);
        }
        self.pending.extend_from_slice(blocks.remainder());
    }

    fn finish(mut self) -> u64 {
        let mut last = [0u8; 32];
        last[..self.pending.len()].copy_from_slice(&self.pending);
        Self::block(&mut self.lanes, &last);
        let mut h = self.len;
        for lane in self.lanes {
            h = ((h ^ lane).wrapping_mul(Self::K)).rotate_left(29);
        }
        h ^ (h >> 32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let dir = std::env::temp_dir().join(format!("tcgnn-tcg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let g = crate::graph::source::with_random_values(crate::graph::rmat::rmat(crate::graph::rmat::RmatParams::new(10, 4, 3)), 1);
        let p = dir.join("g.tcg");
        write_tcg(&p, &g).unwrap();
        assert_eq!(read_tcg(&p).unwrap(), g);
        let empty = Csr::from_triplets(0, 0, &[]).unwrap();
        write_tcg(dir.join("e.tcg"), &empty).unwrap();
        assert_eq!(read_tcg(dir.join("e.tcg")).unwrap(), empty);

        let bytes = std::fs::read(&p).unwrap();
        let q = dir.join("bad.tcg");
        let check = |data: &[u8], why: &str| {
            std::fs::write(&q, data).unwrap();
            let e = read_tcg(&q).unwrap_err().to_string();
            assert!(e.contains("bad.tcg") && e.contains(why), "{why}: {e}");
        };
        check(&bytes[..bytes.len() - 1], "truncated");
        check(&bytes[..20], "too short");
        let mut flip = bytes.clone();
        flip[HEADER as usize + 4 * 100 + 2] ^= 0x10;
        check(&flip, "checksum");
        let mut huge = bytes.clone();
        huge[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
        check(&huge, "2^31");
        let mut n = bytes.clone();
        n[32..40].copy_from_slice(&1_000_000_000u64.to_le_bytes());
        check(&n, "takes");
        let mut magic = bytes.clone();
        magic[0] = b'X';
        check(&magic, "magic");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn hash_is_split_independent() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut a = Hash64::new();
        a.update(&data);
        let mut b = Hash64::new();
        for part in data.chunks(13) {
            b.update(part);
        }
        assert_eq!(a.finish(), b.finish());
    }
}
