//! Matrix Market reader (`.mtx`, `.mtx.gz`): coordinate format, real/integer/pattern fields,
//! general/symmetric symmetry. Every problem is reported with file and line.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::graph::blocks::{numbered_lines, parse_blocks};
use crate::graph::text::{Lines, Tokens, implausible_dimension, is_blank, parse_f64, parse_u64, show};
use crate::util::atomic::AtomicFile;
use crate::util::memory::host_alloc_problem;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Real,
    Integer,
    Pattern,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Symmetry {
    General,
    Symmetric,
}

/// Open a file, transparently gunzipping `.gz`.
pub fn open_maybe_gz(path: &Path) -> Result<Box<dyn BufRead>> {
    let file = std::fs::File::open(path).map_err(|e| Error::Io { path: path.into(), source: e })?;
    let gz = path.extension().is_some_and(|e| e == "gz");
    Ok(if gz {
        Box::new(BufReader::with_capacity(1 << 20, flate2::read::MultiGzDecoder::new(file)))
    } else {
        Box::new(BufReader::with_capacity(1 << 20, file))
    })
}

/// What a file's first bytes say it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sniffed {
    /// Starts with `%%MatrixMarket` (after an optional UTF-8 byte-order mark).
    MatrixMarket,
    /// Starts with the `.tcg` magic.
    Tcg,
}

/// The format `path`'s first bytes announce (gunzipped for `.gz`), whatever its name; `None`
/// for anything else (an edge list has no signature).
pub fn sniff(path: &Path) -> Result<Option<Sniffed>> {
    // A pipe or device would lose what is read here: only regular files are looked into.
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return Ok(None);
    }
    let mut head = Vec::with_capacity(32);
    // A truncated or corrupt gzip stream is reported by the reader proper, with its line.
    let _ = open_maybe_gz(path)?.take(32).read_to_end(&mut head);
    let text = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&head);
    Ok(if text.len() >= 14 && text[..14].eq_ignore_ascii_case(b"%%MatrixMarket") {
        Some(Sniffed::MatrixMarket)
    } else if head.starts_with(b"TCGNNCSR") {
        Some(Sniffed::Tcg)
    } else {
        None
    })
}

/// Read a Matrix Market file into a canonical CSR (sorted columns, duplicates summed).
/// Symmetric files are expanded (both triangles stored); pattern entries get value 1.
pub fn read_mtx(path: impl AsRef<Path>) -> Result<Csr> {
    let path = path.as_ref();
    let reader = open_maybe_gz(path)?;
    parse_mtx(reader, path)
}

/// Parse Matrix Market text from any reader; `path` is only used in error messages.
pub fn parse_mtx(reader: impl Read, path: &Path) -> Result<Csr> {
    let mut lines = Lines::new(reader, path);

    // Header: %%MatrixMarket matrix coordinate <field> <symmetry>
    let Some(first_line) = lines.next_line()? else {
        return Err(Error::parse(path, 1, "empty file, expected a '%%MatrixMarket' header"));
    };
    let first = first_line.text;
    let header: Vec<String> = Tokens::new(first, false).map(|t| String::from_utf8_lossy(t).to_ascii_lowercase()).collect();
    if header.len() != 5 || header[0] != "%%matrixmarket" || header[1] != "matrix" {
        return Err(first_line
            .error(format!("bad header '{}', expected '%%MatrixMarket matrix coordinate <field> <symmetry>'", show(first).trim())));
    }
    if header[2] != "coordinate" {
        return Err(first_line.error(format!("'{}' format is not supported, only 'coordinate' (sparse) files", show(header[2].as_bytes()))));
    }
    let field = match header[3].as_str() {
        "real" | "double" => Field::Real,
        "integer" => Field::Integer,
        "pattern" => Field::Pattern,
        other => return Err(first_line.error(format!("field '{}' is not supported (real, integer, pattern)", show(other.as_bytes())))),
    };
    let symmetry = match header[4].as_str() {
        "general" => Symmetry::General,
        "symmetric" => Symmetry::Symmetric,
        other => {
            return Err(first_line.error(format!("symmetry '{}' is not supported (general, symmetric)", show(other.as_bytes()))));
        }
    };

    // Size line after comments.
    let (n_rows, n_cols, n_entries, size_no) = loop {
        let line_no = lines.line_no();
        let Some(size_line) = lines.next_line()? else {
            return Err(Error::parse(path, line_no + 1, "missing size line 'rows cols entries'"));
        };
        let line = size_line.text;
        if is_blank(line) || line.first() == Some(&b'%') {
            continue;
        }
        let parts: Vec<&[u8]> = Tokens::new(line, false).collect();
        if parts.len() != 3 {
            let msg = format!("size line '{}' must hold 3 integers: rows cols entries", show(line).trim());
            return Err(size_line.error(msg));
        }
        let num = |s: &[u8], what: &str| -> Result<usize> {
            parse_u64(s)
                .and_then(|v| usize::try_from(v).ok())
                .ok_or_else(|| size_line.error(format!("{what} '{}' is not a non-negative integer", show(s))))
        };
        break (num(parts[0], "rows")?, num(parts[1], "cols")?, num(parts[2], "entries")?, size_line.no);
    };
    if n_rows >= (1 << 31) || n_cols >= (1 << 31) {
        return Err(Error::parse(path, size_no, format!("{n_rows} x {n_cols} exceeds 32-bit row/column ids")));
    }
    if symmetry == Symmetry::Symmetric && n_rows != n_cols {
        return Err(Error::parse(path, size_no, format!("symmetric matrix must be square, got {n_rows} x {n_cols}")));
    }

    // Row pointers are allocated for the declared rows whatever the data holds, and every
    // declared entry takes ~20 bytes (coordinates, then CSR; twice when mirrored): refuse a
    // size line the machine cannot hold now, not after reading millions of lines.
    // (Symmetric: 32 more for the both-triangles check's keys.)
    let per_entry = if symmetry == Symmetry::Symmetric { 76 } else { 24 };
    let need = (8 * (n_rows as u64 + 1)).saturating_add((n_entries as u64).saturating_mul(per_entry));
    if let Some(msg) = host_alloc_problem(need, &format!("{n_rows} x {n_cols} with {n_entries} entries")) {
        return Err(Error::parse(path, size_no, msg));
    }
    // The entries: parsed in blocks of lines on all cores, then joined in file order.
    let ctx = EntryFormat { field, symmetry, n_rows, n_cols };
    let (prefix, reader) = lines.into_rest();
    // Entry lines are short: far more bytes than the declared entries take are blank or
    // comment lines a compressed file can hold by the gigabyte. Bounded, not read to the end.
    let limit = (16u64 << 20).saturating_add(128u64.saturating_mul(n_entries as u64));
    let why = format!(
        "more than {limit} bytes after the size line, far more than its {n_entries} entries take (endless blank or comment lines?)"
    );
    let reader = crate::graph::text::Bounded::new(reader, limit.saturating_sub(prefix.len() as u64), why);
    let blocks = parse_blocks(reader, prefix, size_no + 1, path, |text, first| ctx.parse_block(text, first))?;
    let mut seen = 0usize;
    let mut last_no = size_no;
    for block in &blocks {
        // The first problem in file order: entries past the declared count, or a bad line.
        let before_err = block.error.as_ref().map_or(block.entries, |e| e.2);
        if seen + before_err > n_entries {
            let no = block.first + block.entry_lines[n_entries - seen] as usize;
            return Err(Error::parse(path, no, format!("more entries than the {n_entries} the size line declares")));
        }
        if let Some((no, msg, _)) = &block.error {
            return Err(Error::parse(path, *no, msg.clone()));
        }
        seen += block.entries;
        last_no = block.last_line;
    }
    if seen != n_entries {
        let msg = format!("file ends after {seen} entries, the size line declares {n_entries}");
        return Err(Error::parse(path, last_no, msg));
    }
    let total: usize = blocks.iter().map(|b| b.rows.len()).sum();
    let mut blocks = blocks;
    let blocks_keys: Vec<Vec<(u32, u32, u32, bool)>> = blocks.iter_mut().map(|b| std::mem::take(&mut b.tri)).collect();
    let (mut rows, mut cols) = (Vec::with_capacity(total), Vec::with_capacity(total));
    let mut vals: Vec<f32> = Vec::with_capacity(if field == Field::Pattern { 0 } else { total });
    for b in blocks {
        rows.extend_from_slice(&b.rows);
        cols.extend_from_slice(&b.cols);
        vals.extend_from_slice(&b.vals);
    }
    if let Some(msg) = implausible_dimension(n_rows.max(n_cols), rows.len()) {
        return Err(Error::parse(path, size_no, msg));
    }
    if symmetry == Symmetry::Symmetric {
        both_triangles(path, blocks_keys)?;
    }
    let values = (field != Field::Pattern).then_some(vals.as_slice());
    let m = Csr::from_coo(n_rows, n_cols, &rows, &cols, values)?;
    if field == Field::Pattern && m.values().iter().any(|&v| v != 1.0) {
        // A pattern lists where the nonzeros are: an entry listed twice is still one edge, not
        // an edge of weight 2 (from_coo sums repeated coordinates).
        let nnz = m.nnz();
        return m.with_values(vec![1.0; nnz]);
    }
    Ok(m)
}

/// A symmetric file stores one triangle (the reader mirrors it): one listing both (i, j) and
/// (j, i) would have each such edge counted twice, so it is refused, naming the line of the
/// second of the pair. `keys`: per block, its off-diagonal entries as (min, max, line, listed
/// above the diagonal).
fn both_triangles(path: &Path, keys: Vec<Vec<(u32, u32, u32, bool)>>) -> Result<()> {
    let mut all: Vec<(u32, u32, u32, bool)> = keys.into_iter().flatten().collect();
    if all.is_empty() {
        return Ok(());
    }
    all.sort_unstable();
    let mut first_clash: Option<(usize, u32, u32)> = None;
    for w in all.windows(2) {
        if (w[0].0, w[0].1) == (w[1].0, w[1].1) && w[0].3 != w[1].3 {
            let line = w[0].2.max(w[1].2) as usize;
            if first_clash.is_none_or(|c| line < c.0) {
                first_clash = Some((line, w[0].0, w[0].1));
            }
        }
    }
    match first_clash {
        Some((line, a, b)) => Err(Error::parse(
            path,
            line,
            format!(
                "entries ({}, {}) and ({}, {}) both listed in a 'symmetric' file: it stores one triangle (the other is implied); write it as 'general'",
                a + 1,
                b + 1,
                b + 1,
                a + 1
            ),
        )),
        None => Ok(()),
    }
}

/// How the entry lines of one file read: what [`parse_blocks`] needs to parse any block alone.
#[derive(Clone, Copy)]
struct EntryFormat {
    field: Field,
    symmetry: Symmetry,
    n_rows: usize,
    n_cols: usize,
}

/// One block's entries (mirrored ones included), or the first error in it.
struct Block {
    rows: Vec<u32>,
    cols: Vec<u32>,
    vals: Vec<f32>,
    /// Entry lines read (before the error, if any).
    entries: usize,
    /// (line, message, entry lines before it).
    error: Option<(usize, String, usize)>,
    last_line: usize,
    /// Line of each entry, relative to the block's first (to place an excess-entries error;
    /// 4 bytes an entry, held only until the blocks are joined).
    entry_lines: Vec<u32>,
    first: usize,
    /// Symmetric files: every off-diagonal entry as (min, max, line, listed above the
    /// diagonal), to find a pair listed in both triangles.
    tri: Vec<(u32, u32, u32, bool)>,
}

impl EntryFormat {
    /// `None` for blank and comment lines, else the entry or what is wrong with the line.
    fn entry(&self, line: &[u8]) -> std::result::Result<Option<(u32, u32, f32)>, String> {
        let mut it = Tokens::new(line, false);
        let Some(first) = it.next() else { return Ok(None) };
        if first[0] == b'%' {
            return Ok(None);
        }
        let index = |tok: Option<&[u8]>, what: &str, max: usize| -> std::result::Result<u32, String> {
            let s = tok.ok_or_else(|| format!("missing {what} index"))?;
            match parse_u64(s) {
                Some(v) if v >= 1 && v <= max as u64 => Ok((v - 1) as u32),
                Some(v) => Err(format!("{what} index {v} is out of range 1..={max}")),
                None => Err(format!("{what} index '{}' is not a positive integer", show(s))),
            }
        };
        let r = index(Some(first), "row", self.n_rows)?;
        let c = index(it.next(), "column", self.n_cols)?;
        let v = if self.field == Field::Pattern {
            1.0
        } else {
            let s = it.next().ok_or("missing value")?;
            let v = parse_f64(s).ok_or_else(|| format!("value '{}' is not a finite number", show(s)))? as f32;
            if !v.is_finite() {
                return Err(format!("value '{}' overflows f32 (largest {:e})", show(s), f32::MAX));
            }
            v
        };
        if let Some(extra) = it.next() {
            return Err(format!("unexpected extra token '{}'", show(extra)));
        }
        Ok(Some((r, c, v)))
    }

    fn parse_block(&self, text: &[u8], first: usize) -> Block {
        let mut b = Block {
            rows: Vec::new(),
            cols: Vec::new(),
            vals: Vec::new(),
            entries: 0,
            error: None,
            last_line: first,
            entry_lines: Vec::new(),
            first,
            tri: Vec::new(),
        };
        let pattern = self.field == Field::Pattern;
        for (no, line) in numbered_lines(text, first) {
            b.last_line = no;
            match self.entry(line) {
                Ok(None) => {}
                Ok(Some((r, c, v))) => {
                    b.rows.push(r);
                    b.cols.push(c);
                    if !pattern {
                        b.vals.push(v);
                    }
                    if self.symmetry == Symmetry::Symmetric && r != c {
                        b.tri.push((r.min(c), r.max(c), no.min(u32::MAX as usize) as u32, r < c));
                        b.rows.push(c);
                        b.cols.push(r);
                        if !pattern {
                            b.vals.push(v);
                        }
                    }
                    b.entries += 1;
                    b.entry_lines.push((no - first) as u32);
                }
                Err(msg) => {
                    b.error = Some((no, msg, b.entries));
                    break;
                }
            }
        }
        b
    }
}

/// Write a CSR as Matrix Market `coordinate general` (gzip-compressed when `path` ends in
/// `.gz`): `pattern` when every value is 1, else `real` with the shortest exact decimal of each
/// f32, so reading the file back gives the same matrix.
pub fn write_mtx(path: impl AsRef<Path>, csr: &Csr) -> Result<()> {
    let path = path.as_ref();
    let io = |e: std::io::Error| Error::Io { path: path.into(), source: e };
    // Written under a temporary name and renamed when complete (see `util::atomic`).
    let mut file = AtomicFile::create(path)?;
    let gz = path.extension().is_some_and(|e| e == "gz");
    if gz {
        let enc = flate2::write::GzEncoder::new(file.writer(), flate2::Compression::fast());
        let enc = write_mtx_to(std::io::BufWriter::with_capacity(1 << 20, enc), csr).map_err(io)?;
        enc.into_inner().map_err(|e| io(e.into_error()))?.finish().map_err(io)?;
    } else {
        write_mtx_to(file.writer(), csr).map_err(io)?;
    }
    file.commit()
}

/// Write Matrix Market text to any writer (returned so the caller can finish it).
pub fn write_mtx_to<W: Write>(mut w: W, csr: &Csr) -> std::io::Result<W> {
    let pattern = csr.values().iter().all(|&v| v == 1.0);
    let field = if pattern { "pattern" } else { "real" };
    writeln!(w, "%%MatrixMarket matrix coordinate {field} general")?;
    writeln!(w, "% written by tcgnn")?;
    writeln!(w, "{} {} {}", csr.n_rows(), csr.n_cols(), csr.nnz())?;
    let mut line = Vec::with_capacity(64);
    for r in 0..csr.n_rows() {
        for (c, v) in csr.row(r) {
            line.clear();
            push_u64(&mut line, r as u64 + 1);
            line.push(b' ');
            push_u64(&mut line, c as u64 + 1);
            if !pattern {
                // f32's Display is the shortest decimal that reads back to the same f32.
                write!(line, " {v}")?;
            }
            line.push(b'\n');
            w.write_all(&line)?;
        }
    }
    Ok(w)
}

fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Csr> {
        parse_mtx(s.as_bytes(), Path::new("t.mtx"))
    }

    #[test]
    fn reads_general_real() {
        let m = parse("%%MatrixMarket matrix coordinate real general\n% c\n2 3 3\n1 1 1.5\n2 3 -2\n1 2 3e0\n").unwrap();
        assert_eq!((m.n_rows(), m.n_cols(), m.nnz()), (2, 3, 3));
        assert_eq!(m.col_idx(), &[0, 1, 2]);
        assert_eq!(m.values(), &[1.5, 3.0, -2.0]);
    }

    #[test]
    fn expands_symmetric_pattern() {
        let m = parse("%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n2 1\n3 3\n").unwrap();
        assert_eq!(m.nnz(), 3);
        assert_eq!(m.row_ptr(), &[0, 1, 2, 3]);
        assert_eq!(m.col_idx(), &[1, 0, 2]);
    }

    #[test]
    fn errors_name_line_and_cause() {
        let cases = [
            ("", "1:", "empty"),
            ("%%MatrixMarket matrix array real general\n", ":1:", "coordinate"),
            ("%%MatrixMarket matrix coordinate real skew-symmetric\n1 1 0\n", ":1:", "skew"),
            ("%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1.0\n", ":3:", "out of range"),
            ("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 abc\n", ":3:", "not a finite number"),
            ("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n", "", "declares 2"),
            ("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1\n2 2 2\n", ":4:", "more entries"),
            ("%%MatrixMarket matrix coordinate real general\n2 x 1\n", ":2:", "cols"),
        ];
        for (text, loc, cause) in cases {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(loc) && e.contains(cause), "{text:?} gave '{e}'");
        }
    }

    #[test]
    fn huge_declared_size_does_not_allocate() {
        let e = parse("%%MatrixMarket matrix coordinate pattern general\n1000 1000 999999999999\n1 1\n").unwrap_err();
        // Refused at the size line for memory, or else when the data ends short.
        let e = e.to_string();
        assert!(e.contains("declares") || (e.contains("t.mtx:2:") && e.contains("host memory")), "{e}");
    }

    #[test]
    fn huge_empty_dimensions_are_refused() {
        let e = parse("%%MatrixMarket matrix coordinate pattern general\n2000000000 1 1\n5 1\n").unwrap_err();
        assert!(e.to_string().contains("t.mtx:2:") && e.to_string().contains("refusing"), "{e}");
        assert_eq!(parse("%%MatrixMarket matrix coordinate pattern general\n100000 1 1\n5 1\n").unwrap().n_rows(), 100000);
    }

    #[test]
    fn refuses_complex_and_hermitian() {
        for h in ["complex general", "real hermitian", "pattern skew-symmetric"] {
            let e = parse(&format!("%%MatrixMarket matrix coordinate {h}\n1 1 0\n")).unwrap_err().to_string();
            assert!(e.contains("t.mtx:1:") && e.contains("not supported"), "{e}");
        }
    }

    #[test]
    fn write_then_read_round_trips() {
        let dir = std::env::temp_dir().join(format!("tcgnn-mtx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let real = Csr::from_triplets(3, 4, &[(0, 3, 0.1), (2, 0, -1e-7), (2, 2, 3.0)]).unwrap();
        let pat = Csr::from_triplets(3, 3, &[(0, 1, 1.0), (1, 0, 1.0)]).unwrap();
        for (m, name) in [(&real, "a.mtx.gz"), (&pat, "b.mtx"), (&Csr::from_triplets(0, 0, &[]).unwrap(), "c.mtx.gz")] {
            let p = dir.join(name);
            write_mtx(&p, m).unwrap();
            assert_eq!(&read_mtx(&p).unwrap(), m);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn truncated_gzip_is_an_error() {
        let dir = std::env::temp_dir().join(format!("tcgnn-trunc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let trip: Vec<_> = (0..5000u32).map(|i| (i % 100, (i * 7) % 100, 1.0)).collect();
        let m = Csr::from_triplets(100, 100, &trip).unwrap();
        let p = dir.join("t.mtx.gz");
        write_mtx(&p, &m).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        for cut in [10, bytes.len() / 2, bytes.len() - 4] {
            let q = dir.join("cut.mtx.gz");
            std::fs::write(&q, &bytes[..cut]).unwrap();
            let e = read_mtx(&q).unwrap_err().to_string();
            assert!(e.contains("cut.mtx.gz:"), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
