//! A partition on disk (`tcgnn partition GRAPH --parts P -o DIR`), so each rank loads only its part:
//! - `DIR/partition.json`: method, part count, offsets, per-part statistics;
//! - `DIR/partP.json`: its rows (first row, count), the original node id of each of its rows,
//!   its halo list (owner part, owner-local row) and its send lists;
//! - `DIR/partP.local.mtx.gz`, `DIR/partP.remote.mtx.gz`: its two CSR blocks (the transposes are
//!   rebuilt on load: cheaper than reading them).
//!
//! Every file is written atomically (temporary name, then rename).

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::dist::partition::{PartBlocks, Partition, PartitionStats};
use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::graph::mtx::{read_mtx, write_mtx_to};
use crate::graph::ops::transpose;
use crate::util::atomic::{AtomicFile, write_atomic};

#[derive(serde::Serialize, serde::Deserialize)]
struct PartitionHeader {
    method: String,
    parts: usize,
    offsets: Vec<usize>,
    halo_ratio: f64,
    edge_balance: f64,
    #[serde(skip_deserializing, default)]
    stats: Vec<PartitionStats>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct PartHeader {
    part: usize,
    parts: usize,
    first_row: usize,
    rows: usize,
    /// Original (input graph) id of each owned row.
    nodes: Vec<u32>,
    halo: Vec<(u32, u32)>,
    recv_ptr: Vec<usize>,
    send: Vec<Vec<u32>>,
}

/// One part read back: its blocks and the original ids of its rows.
pub struct PartOnDisk {
    pub blocks: PartBlocks,
    pub nodes: Vec<u32>,
    pub offsets: Vec<usize>,
}

fn part_path(dir: &Path, p: usize, suffix: &str) -> PathBuf {
    dir.join(format!("part{p}.{suffix}"))
}

/// Writes `partition` into the existing folder `dir`.
pub fn write_partition(dir: &Path, partition: &Partition) -> Result<()> {
    crate::util::atomic::check_output_dir(dir)?;
    let header = PartitionHeader {
        method: partition.method.to_string(),
        parts: partition.parts(),
        offsets: partition.offsets.clone(),
        halo_ratio: partition.halo_ratio(),
        edge_balance: partition.edge_balance(),
        stats: partition.stats(),
    };
    let new_to_old = partition.perm.new_to_old();
    for b in &partition.blocks {
        let h = PartHeader {
            part: b.part,
            parts: partition.parts(),
            first_row: b.first_row,
            rows: b.rows,
            nodes: new_to_old[b.first_row..b.first_row + b.rows].to_vec(),
            halo: b.halo.clone(),
            recv_ptr: b.recv_ptr.clone(),
            send: b.send.clone(),
        };
        write_json(&part_path(dir, b.part, "json"), &h)?;
        write_mtx_gz(&part_path(dir, b.part, "local.mtx.gz"), &b.local)?;
        write_mtx_gz(&part_path(dir, b.part, "remote.mtx.gz"), &b.remote)?;
    }
    // partition.json last: until it is replaced the folder describes the old partition whole.
    write_json(&dir.join("partition.json"), &header)?;
    remove_stale_parts(dir, partition.parts())
}

/// Removes the part files of an earlier partition with more parts (`partK.*` for K >= `parts`),
/// which would otherwise lie beside the new ones as if they belonged to it.
fn remove_stale_parts(dir: &Path, parts: usize) -> Result<()> {
    let io = |e| Error::Io { path: dir.to_path_buf(), source: e };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some((index, suffix)) = name.strip_prefix("part").and_then(|r| r.split_once('.')) else { continue };
        let ours = ["json", "local.mtx.gz", "remote.mtx.gz"].contains(&suffix);
        // Only names this writer makes (no leading zeros): other files in the folder stay.
        if ours && index.parse::<usize>().is_ok_and(|k| k >= parts && k.to_string() == index) {
            std::fs::remove_file(entry.path()).map_err(|e| Error::Io { path: entry.path(), source: e })?;
        }
    }
    Ok(())
}

/// Reads part `p` of the partition in `dir`, checking that its files agree with each other.
pub fn read_part(dir: &Path, p: usize) -> Result<PartOnDisk> {
    let head: PartitionHeader = read_json(&dir.join("partition.json"))?;
    let path = part_path(dir, p, "json");
    let h: PartHeader = read_json(&path)?;
    let bad = |msg: String| Error::parse(&path, 1, msg);
    if p >= head.parts {
        return Err(bad(format!("part {p} of a partition of {} parts (partition.json)", head.parts)));
    }
    if h.part != p || h.parts != head.parts || head.offsets.len() != head.parts + 1 {
        return Err(bad(format!("part {} of {} does not match partition.json ({} parts)", h.part, h.parts, head.parts)));
    }
    if head.offsets[p] != h.first_row || head.offsets[p + 1] - head.offsets[p] != h.rows || h.nodes.len() != h.rows {
        return Err(bad(format!(
            "rows {}..+{} ({} node ids) disagree with the offsets in partition.json",
            h.first_row,
            h.rows,
            h.nodes.len()
        )));
    }
    if h.recv_ptr.len() != h.parts + 1 || h.send.len() != h.parts || h.recv_ptr.last() != Some(&h.halo.len()) {
        return Err(bad("halo list, receive offsets and send lists disagree".into()));
    }
    let local = read_mtx(part_path(dir, p, "local.mtx.gz"))?;
    let remote = read_mtx(part_path(dir, p, "remote.mtx.gz"))?;
    if local.n_rows() != h.rows || local.n_cols() != h.rows || remote.n_rows() != h.rows || remote.n_cols() != h.halo.len() {
        return Err(bad(format!(
            "blocks {}x{} and {}x{} do not fit {} rows and {} halo rows",
            local.n_rows(),
            local.n_cols(),
            remote.n_rows(),
            remote.n_cols(),
            h.rows,
            h.halo.len()
        )));
    }
    let blocks = PartBlocks {
        part: p,
        first_row: h.first_row,
        rows: h.rows,
        local_t: transpose(&local),
        remote_t: transpose(&remote),
        local,
        remote,
        halo: h.halo,
        recv_ptr: h.recv_ptr,
        send: h.send,
    };
    Ok(PartOnDisk { blocks, nodes: h.nodes, offsets: head.offsets })
}

fn write_json<S: serde::Serialize>(path: &Path, v: &S) -> Result<()> {
    let bytes = serde_json::to_vec(v).map_err(|e| Error::Io { path: path.to_path_buf(), source: e.into() })?;
    write_atomic(path, &bytes)
}

fn read_json<D: serde::de::DeserializeOwned>(path: &Path) -> Result<D> {
    let bytes = std::fs::read(path).map_err(|e| Error::Io { path: path.to_path_buf(), source: e })?;
    serde_json::from_slice(&bytes).map_err(|e| Error::parse(path, e.line(), e.to_string()))
}

fn write_mtx_gz(path: &Path, csr: &Csr) -> Result<()> {
    let io = |e: std::io::Error| Error::Io { path: path.to_path_buf(), source: e };
    let file = AtomicFile::create(path)?;
    let enc = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    let mut enc = write_mtx_to(std::io::BufWriter::with_capacity(1 << 20, enc), csr).map_err(io)?;
    enc.flush().map_err(io)?;
    let file = enc.into_inner().map_err(|e| io(e.into_error()))?.finish().map_err(io)?;
    file.commit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::partition::PartitionMethod;

    #[test]
    fn parts_round_trip() {
        let n = 30u32;
        let t: Vec<(u32, u32, f32)> = (0..n).flat_map(|i| [(i, (i * 7 + 1) % n, 0.5), (i, (i + 1) % n, 1.5)]).collect();
        let g = Csr::from_triplets(n as usize, n as usize, &t).unwrap();
        let p = Partition::new(&g, 3, PartitionMethod::Community).unwrap();
        let dir = std::env::temp_dir().join(format!("tcgnn-parts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        write_partition(&dir, &p).unwrap();
        for q in 0..3 {
            let back = read_part(&dir, q).unwrap();
            assert_eq!(back.blocks, p.blocks[q]);
            assert_eq!(back.offsets, p.offsets);
            assert_eq!(back.nodes, p.perm.new_to_old()[p.offsets[q]..p.offsets[q + 1]]);
        }
        assert!(read_part(&dir, 3).is_err());
        // A part file that disagrees with partition.json: an error naming the file.
        std::fs::copy(part_path(&dir, 1, "json"), part_path(&dir, 0, "json")).unwrap();
        let e = read_part(&dir, 0).err().unwrap().to_string();
        assert!(e.contains("part0.json"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(write_partition(&dir, &p).is_err());
    }
}
