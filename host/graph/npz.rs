//! Node data from `.npz` archives (see `datasets/SOURCES.md`): features `x` (dense float32
//! [N,F], or a sparse 0/1 matrix as `x_indptr`/`x_indices`/`x_shape`), labels `y` (int64 [N]),
//! one split `train_mask`/`val_mask`/`test_mask` (bool [N]) and optionally all standard splits
//! `*_masks_all` (bool [S,N]), `class_names`. Node order is the order of the matching `.mtx`.
//!
//! Archives are read with the `zip` crate (stored and deflated members); arrays with our own
//! `.npy` parser ([`crate::graph::npy`]).

use std::io::{Read, Seek};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::graph::npy::{NpyArray, NpyData, read_npy, write_npy};

/// Node features.
#[derive(Clone, Debug, PartialEq)]
pub enum Features {
    /// Row-major n x f.
    Dense { n: usize, f: usize, data: Vec<f32> },
    /// A 0/1 matrix in CSR form: row i's ones are at columns `indices[indptr[i]..indptr[i+1]]`.
    SparseMultiHot { n: usize, f: usize, indptr: Vec<u64>, indices: Vec<u32> },
}

impl Features {
    pub fn n(&self) -> usize {
        match self {
            Features::Dense { n, .. } | Features::SparseMultiHot { n, .. } => *n,
        }
    }
    pub fn f(&self) -> usize {
        match self {
            Features::Dense { f, .. } | Features::SparseMultiHot { f, .. } => *f,
        }
    }
    /// Dense row-major copy (refuses more than `max_bytes`: multi-hot features can be huge dense).
    pub fn to_dense(&self, max_bytes: usize) -> Result<Vec<f32>> {
        let (n, f) = (self.n(), self.f());
        let bytes = n.checked_mul(f).and_then(|x| x.checked_mul(4)).unwrap_or(usize::MAX);
        if bytes > max_bytes {
            return Err(Error::Unsupported(format!("dense features {n} x {f} need {bytes} bytes (limit {max_bytes})")));
        }
        Ok(match self {
            Features::Dense { data, .. } => data.clone(),
            Features::SparseMultiHot { indptr, indices, .. } => {
                let mut d = vec![0f32; n * f];
                for i in 0..n {
                    for &c in &indices[indptr[i] as usize..indptr[i + 1] as usize] {
                        d[i * f + c as usize] = 1.0;
                    }
                }
                d
            }
        })
    }
    /// Bytes the stored arrays occupy.
    pub fn bytes(&self) -> usize {
        match self {
            Features::Dense { data, .. } => 4 * data.len(),
            Features::SparseMultiHot { indptr, indices, .. } => 8 * indptr.len() + 4 * indices.len(),
        }
    }
}

/// Train / validation / test node masks of one split.
#[derive(Clone, Debug, PartialEq)]
pub struct Split {
    pub train: Vec<bool>,
    pub val: Vec<bool>,
    pub test: Vec<bool>,
}

/// Everything a node-classification run needs besides the graph.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeData {
    pub x: Features,
    /// Class of every node.
    pub y: Vec<i64>,
    /// The default split, if the archive has one.
    pub split: Option<Split>,
    /// All standard splits (`*_masks_all`), empty if absent.
    pub splits_all: Vec<Split>,
    pub class_names: Vec<String>,
}

impl NodeData {
    pub fn n(&self) -> usize {
        self.y.len()
    }
    /// max(y) + 1 (0 for no nodes).
    pub fn n_classes(&self) -> usize {
        self.y.iter().copied().max().map_or(0, |m| m as usize + 1)
    }
}

/// Read node data from a `.npz` file.
pub fn read_npz(path: impl AsRef<Path>) -> Result<NodeData> {
    let path = path.as_ref();
    let file = std::fs::File::open(path).map_err(|e| Error::Io { path: path.into(), source: e })?;
    parse_npz(std::io::BufReader::new(file), path)
}

/// Read node data from any seekable reader; `path` is only used in error messages.
pub fn parse_npz(reader: impl Read + Seek, path: &Path) -> Result<NodeData> {
    let mut npz = Npz::open(reader, path)?;
    let y_arr = npz.get("y")?.ok_or_else(|| npz.err("y", "missing (labels are required)"))?;
    let y = y_arr.to_i64().ok_or_else(|| npz.err("y", format!("dtype {} is not an integer", y_arr.dtype_name())))?;
    npz.check_shape("y", &y_arr, &[y.len()])?;
    if let Some(i) = y.iter().position(|&c| c < 0) {
        return Err(npz.err("y", format!("negative label {} at node {i}", y[i])));
    }
    let n = y.len();
    // Labels number classes 0..C-1 and C sizes the model's output layer: a label of 10^9 is a
    // corrupt file (or ids, not classes), not a billion-way classifier.
    let max_classes = n.max(1 << 16);
    if let Some(i) = y.iter().position(|&c| c as u64 >= max_classes as u64) {
        return Err(npz.err(
            "y",
            format!("label {} at node {i}: classes must be numbered 0..C-1 with C at most max(nodes, 65536) = {max_classes}", y[i]),
        ));
    }
    let x = npz.features(n)?;
    if let Features::Dense { f, data, .. } = &x
        && let Some(i) = data.iter().position(|v| !v.is_finite())
    {
        return Err(npz.err("x", format!("feature {} of node {} is {}", i % (*f).max(1), i / (*f).max(1), data[i])));
    }
    let split = match (npz.get("train_mask")?, npz.get("val_mask")?, npz.get("test_mask")?) {
        (Some(tr), Some(va), Some(te)) => {
            Some(Split { train: npz.mask("train_mask", &tr, n)?, val: npz.mask("val_mask", &va, n)?, test: npz.mask("test_mask", &te, n)? })
        }
        (None, None, None) => None,
        _ => return Err(npz.err("train_mask", "train/val/test masks must come together")),
    };
    let splits_all = match (npz.get("train_masks_all")?, npz.get("val_masks_all")?, npz.get("test_masks_all")?) {
        (Some(tr), Some(va), Some(te)) => {
            let (tr, va, te) = (
                npz.masks_all("train_masks_all", &tr, n)?,
                npz.masks_all("val_masks_all", &va, n)?,
                npz.masks_all("test_masks_all", &te, n)?,
            );
            if tr.len() != va.len() || tr.len() != te.len() {
                return Err(npz.err("val_masks_all", "train/val/test hold different numbers of splits"));
            }
            tr.into_iter().zip(va).zip(te).map(|((train, val), test)| Split { train, val, test }).collect()
        }
        (None, None, None) => Vec::new(),
        _ => return Err(npz.err("train_masks_all", "train/val/test masks_all must come together")),
    };
    let class_names = match npz.get("class_names")? {
        Some(NpyArray { data: NpyData::Str(s), .. }) => s,
        Some(a) => return Err(npz.err("class_names", format!("dtype {} is not a string", a.dtype_name()))),
        None => Vec::new(),
    };
    Ok(NodeData { x, y, split, splits_all, class_names })
}

/// The arrays a node-data archive may hold.
const ARRAYS: [&str; 12] = [
    "x",
    "x_indptr",
    "x_indices",
    "x_shape",
    "y",
    "train_mask",
    "val_mask",
    "test_mask",
    "train_masks_all",
    "val_masks_all",
    "test_masks_all",
    "class_names",
];

struct Npz<R: Read + Seek> {
    zip: zip::ZipArchive<R>,
    path: PathBuf,
}

impl<R: Read + Seek> Npz<R> {
    fn open(reader: R, path: &Path) -> Result<Self> {
        let zip = zip::ZipArchive::new(reader).map_err(|e| Error::parse(path, 0, format!("not a readable .npz (zip) archive: {e}")))?;
        let npz = Npz { zip, path: path.into() };
        // Every member must be one this reader takes: a member it skipped would be data
        // silently dropped (or a damaged name: 'class_nqmes' would drop the class names).
        let names: Vec<String> =
            npz.zip.file_names().map(|n| n.map(|n| n.into_owned()).unwrap_or_else(|e| format!("(unreadable name: {e})"))).collect();
        if let Some(name) = names.iter().find(|n| !n.strip_suffix(".npy").is_some_and(|a| ARRAYS.contains(&a))) {
            let name = crate::graph::text::show(name.as_bytes());
            return Err(npz.err(name.trim_end_matches(".npy"), format!("not an array tcgnn reads (it reads {})", ARRAYS.join(", "))));
        }
        Ok(npz)
    }

    fn err(&self, array: &str, msg: impl Into<String>) -> Error {
        Error::Npz { path: self.path.clone(), array: array.into(), msg: msg.into() }
    }

    /// Array `name` (stored as `name.npy`), or `None` when the archive lacks it.
    fn get(&mut self, name: &str) -> Result<Option<NpyArray>> {
        let member = format!("{name}.npy");
        let arr = match self.zip.by_name(&member) {
            // The member's CRC-32 is checked when its reader reaches the end: read one byte past
            // the array, so a corrupt member is an error and not silently wrong numbers.
            Ok(mut f) => read_npy(&mut f).and_then(|a| {
                let mut one = [0u8; 1];
                match f.read(&mut one) {
                    Ok(0) => Ok(a),
                    Ok(_) => Err("bytes after the array's end (corrupt member?)".into()),
                    Err(e) => Err(format!("member {member} is corrupt: {e} (CRC-32 mismatch)")),
                }
            }),
            Err(zip::result::ZipError::FileNotFound) => return Ok(None),
            Err(e) => Err(format!("cannot open: {e}")),
        };
        arr.map(Some).map_err(|m| self.err(name, m))
    }

    fn check_shape(&self, name: &str, a: &NpyArray, want: &[usize]) -> Result<()> {
        if a.shape != want {
            return Err(self.err(name, format!("shape {:?}, expected {want:?}", a.shape)));
        }
        Ok(())
    }

    fn mask(&self, name: &str, a: &NpyArray, n: usize) -> Result<Vec<bool>> {
        self.check_shape(name, a, &[n])?;
        a.to_bool().ok_or_else(|| self.err(name, format!("dtype {} is not bool", a.dtype_name())))
    }

    fn masks_all(&self, name: &str, a: &NpyArray, n: usize) -> Result<Vec<Vec<bool>>> {
        if a.shape.len() != 2 || a.shape[1] != n {
            return Err(self.err(name, format!("shape {:?}, expected [splits, {n}]", a.shape)));
        }
        let flat = a.to_bool().ok_or_else(|| self.err(name, format!("dtype {} is not bool", a.dtype_name())))?;
        Ok(if n == 0 { vec![Vec::new(); a.shape[0]] } else { flat.chunks(n).map(<[bool]>::to_vec).collect() })
    }

    fn features(&mut self, n: usize) -> Result<Features> {
        if let Some(x) = self.get("x")? {
            if x.shape.len() != 2 {
                return Err(self.err("x", format!("shape {:?}, expected [{n}, features]", x.shape)));
            }
            if x.shape[0] != n {
                // Either may be the wrong one: name both (the graph's node count decides later).
                return Err(
                    self.err("y", format!("{n} labels, but 'x' has {} rows: labels and features disagree on the node count", x.shape[0]))
                );
            }
            let data = x.to_f32().ok_or_else(|| self.err("x", format!("dtype {} is not float", x.dtype_name())))?;
            return Ok(Features::Dense { n, f: x.shape[1], data });
        }
        let (Some(ip), Some(ix), Some(sh)) = (self.get("x_indptr")?, self.get("x_indices")?, self.get("x_shape")?) else {
            return Err(self.err("x", "missing: neither dense x nor x_indptr/x_indices/x_shape"));
        };
        let shape = sh.to_i64().filter(|s| s.len() == 2).ok_or_else(|| self.err("x_shape", "expected 2 integers"))?;
        if shape[0] != n as i64 && shape[1] >= 0 {
            return Err(self.err(
                "y",
                format!("{n} labels, but 'x_shape' declares {} rows: labels and features disagree on the node count", shape[0]),
            ));
        }
        if shape[0] != n as i64 || shape[1] < 0 || shape[1] >= 1 << 31 {
            return Err(self.err("x_shape", format!("{shape:?} does not fit {n} nodes")));
        }
        let f = shape[1] as usize;
        let indptr = ip.to_i64().ok_or_else(|| self.err("x_indptr", "not an integer array"))?;
        let indices = ix.to_i64().ok_or_else(|| self.err("x_indices", "not an integer array"))?;
        if indptr.len() != n + 1 || indptr[0] != 0 || indptr.windows(2).any(|w| w[0] > w[1]) {
            return Err(self.err("x_indptr", format!("not a valid row pointer for {n} rows")));
        }
        if indptr[n] as usize != indices.len() {
            return Err(self.err("x_indptr", format!("ends at {} but x_indices has {}", indptr[n], indices.len())));
        }
        if let Some(bad) = indices.iter().find(|&&c| c < 0 || c as usize >= f) {
            return Err(self.err("x_indices", format!("column {bad} is out of range for {f} features")));
        }
        Ok(Features::SparseMultiHot {
            n,
            f,
            indptr: indptr.into_iter().map(|v| v as u64).collect(),
            indices: indices.into_iter().map(|v| v as u32).collect(),
        })
    }
}

/// Write node data as an `.npz` (stored members), in the layout [`read_npz`] reads.
pub fn write_npz(path: impl AsRef<Path>, d: &NodeData) -> Result<()> {
    use std::io::Write;
    let path = path.as_ref();
    let io = |e: std::io::Error| Error::Io { path: path.into(), source: e };
    let zerr = |e: zip::result::ZipError| Error::Io { path: path.into(), source: std::io::Error::other(e) };
    // Written under a temporary name and renamed when complete (see `util::atomic`).
    let mut file = crate::util::atomic::AtomicFile::create(path)?;
    let mut z = zip::ZipWriter::new(file.writer());
    let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored).large_file(true);
    let n = d.n();
    let mut arrays: Vec<(&str, NpyArray)> = vec![("y", NpyArray { shape: vec![n], data: NpyData::I64(d.y.clone()) })];
    match &d.x {
        Features::Dense { n, f, data } => arrays.push(("x", NpyArray { shape: vec![*n, *f], data: NpyData::F32(data.clone()) })),
        Features::SparseMultiHot { n, f, indptr, indices } => {
            let ip = indptr.iter().map(|&v| v as i64).collect();
            let ix = indices.iter().map(|&v| v as i32).collect();
            arrays.push(("x_indptr", NpyArray { shape: vec![n + 1], data: NpyData::I64(ip) }));
            arrays.push(("x_indices", NpyArray { shape: vec![indices.len()], data: NpyData::I32(ix) }));
            arrays.push(("x_shape", NpyArray { shape: vec![2], data: NpyData::I64(vec![*n as i64, *f as i64]) }));
        }
    }
    if let Some(s) = &d.split {
        for (name, m) in [("train_mask", &s.train), ("val_mask", &s.val), ("test_mask", &s.test)] {
            arrays.push((name, NpyArray { shape: vec![n], data: NpyData::Bool(m.clone()) }));
        }
    }
    if !d.splits_all.is_empty() {
        let k = d.splits_all.len();
        let pick = |f: fn(&Split) -> &Vec<bool>| d.splits_all.iter().flat_map(|s| f(s).iter().copied()).collect();
        arrays.push(("train_masks_all", NpyArray { shape: vec![k, n], data: NpyData::Bool(pick(|s| &s.train)) }));
        arrays.push(("val_masks_all", NpyArray { shape: vec![k, n], data: NpyData::Bool(pick(|s| &s.val)) }));
        arrays.push(("test_masks_all", NpyArray { shape: vec![k, n], data: NpyData::Bool(pick(|s| &s.test)) }));
    }
    if !d.class_names.is_empty() {
        let c = d.class_names.len();
        arrays.push(("class_names", NpyArray { shape: vec![c], data: NpyData::Str(d.class_names.clone()) }));
    }
    for (name, a) in arrays {
        z.start_file(format!("{name}.npy"), opts).map_err(zerr)?;
        z.write_all(&write_npy(&a)).map_err(io)?;
    }
    z.finish().map_err(zerr)?.flush().map_err(io)?;
    file.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tcgnn-npz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    #[test]
    fn write_read_round_trip() {
        let split = Split { train: vec![true, false, false], val: vec![false, true, false], test: vec![false, false, true] };
        let dense = NodeData {
            x: Features::Dense { n: 3, f: 2, data: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0] },
            y: vec![0, 2, 1],
            split: Some(split.clone()),
            splits_all: vec![split.clone(), split.clone()],
            class_names: vec![],
        };
        let sparse = NodeData {
            x: Features::SparseMultiHot { n: 3, f: 5, indptr: vec![0, 2, 2, 3], indices: vec![0, 4, 1] },
            y: vec![1, 1, 0],
            split: None,
            splits_all: vec![],
            class_names: vec!["a".into(), "bcd".into()],
        };
        for (d, name) in [(dense, "d.npz"), (sparse, "s.npz")] {
            let p = tmp(name);
            write_npz(&p, &d).unwrap();
            assert_eq!(read_npz(&p).unwrap(), d);
        }
    }

    #[test]
    fn errors_name_file_and_array() {
        let d = NodeData {
            x: Features::Dense { n: 2, f: 1, data: vec![1.0, 2.0] },
            y: vec![0, 1],
            split: None,
            splits_all: vec![],
            class_names: vec![],
        };
        let p = tmp("bad.npz");
        write_npz(&p, &d).unwrap();
        let mut bytes = std::fs::read(&p).unwrap();
        // Make y's shape disagree with x's first dimension: y claims 3 nodes (data too short).
        let at = bytes.windows(4).position(|w| w == b"(2,)").unwrap();
        bytes[at + 1] = b'3';
        std::fs::write(&p, &bytes).unwrap();
        let e = read_npz(&p).unwrap_err().to_string();
        assert!(e.contains("bad.npz") && e.contains("array 'y'"), "{e}");
        std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
        assert!(read_npz(&p).unwrap_err().to_string().contains("bad.npz"));
    }
}
