//! Matrix Market reader (`.mtx`, `.mtx.gz`): coordinate format, real/integer/pattern fields,
//! general/symmetric symmetry. Every problem is reported with file and line.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use crate::error::{Error, Result};
use crate::graph::Csr;

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

/// Read a Matrix Market file into a canonical CSR (sorted columns, duplicates summed).
/// Symmetric files are expanded (both triangles stored); pattern entries get value 1.
pub fn read_mtx(path: impl AsRef<Path>) -> Result<Csr> {
    let path = path.as_ref();
    let reader = open_maybe_gz(path)?;
    parse_mtx(reader, path)
}

/// Parse Matrix Market text from any reader; `path` is only used in error messages.
pub fn parse_mtx(reader: impl Read, path: &Path) -> Result<Csr> {
    let mut reader = BufReader::new(reader);
    let err = |line: usize, msg: String| Error::parse(path, line, msg);
    let mut line = String::new();
    let mut lineno = 0usize;
    let mut next_line = |buf: &mut String, lineno: &mut usize| -> Result<bool> {
        buf.clear();
        *lineno += 1;
        match reader.read_line(buf) {
            Ok(0) => Ok(false),
            Ok(_) => Ok(true),
            Err(e) => Err(Error::parse(path, *lineno, format!("read failed (truncated or corrupt file?): {e}"))),
        }
    };

    // Header: %%MatrixMarket matrix coordinate <field> <symmetry>
    if !next_line(&mut line, &mut lineno)? {
        return Err(err(1, "empty file, expected a '%%MatrixMarket' header".into()));
    }
    let header: Vec<String> = line.split_whitespace().map(|s| s.to_ascii_lowercase()).collect();
    if header.len() != 5 || header[0] != "%%matrixmarket" || header[1] != "matrix" {
        return Err(err(1, format!("bad header '{}', expected '%%MatrixMarket matrix coordinate <field> <symmetry>'", line.trim())));
    }
    if header[2] != "coordinate" {
        return Err(err(1, format!("'{}' format is not supported, only 'coordinate' (sparse) files", header[2])));
    }
    let field = match header[3].as_str() {
        "real" | "double" => Field::Real,
        "integer" => Field::Integer,
        "pattern" => Field::Pattern,
        other => return Err(err(1, format!("field '{other}' is not supported (real, integer, pattern)"))),
    };
    let symmetry = match header[4].as_str() {
        "general" => Symmetry::General,
        "symmetric" => Symmetry::Symmetric,
        other => {
            return Err(err(1, format!("symmetry '{other}' is not supported (general, symmetric)")));
        }
    };

    // Size line after comments.
    let (n_rows, n_cols, n_entries) = loop {
        if !next_line(&mut line, &mut lineno)? {
            return Err(err(lineno, "missing size line 'rows cols entries'".into()));
        }
        let t = line.trim();
        if t.is_empty() || t.starts_with('%') {
            continue;
        }
        let parts: Vec<&str> = t.split_whitespace().collect();
        if parts.len() != 3 {
            return Err(err(lineno, format!("size line '{t}' must hold 3 integers: rows cols entries")));
        }
        let num = |s: &str, what: &str| -> Result<usize> {
            s.parse::<usize>().map_err(|_| err(lineno, format!("{what} '{s}' is not a non-negative integer")))
        };
        break (num(parts[0], "rows")?, num(parts[1], "cols")?, num(parts[2], "entries")?);
    };
    if n_rows >= (1 << 31) || n_cols >= (1 << 31) {
        return Err(err(lineno, format!("{n_rows} x {n_cols} exceeds 32-bit row/column ids")));
    }
    if symmetry == Symmetry::Symmetric && n_rows != n_cols {
        return Err(err(lineno, format!("symmetric matrix must be square, got {n_rows} x {n_cols}")));
    }

    // Do not trust the declared count for allocation: grow as the data backs it.
    let mut triplets: Vec<(u32, u32, f32)> = Vec::with_capacity(n_entries.min(1 << 22));
    let mut seen = 0usize;
    while next_line(&mut line, &mut lineno)? {
        let t = line.trim();
        if t.is_empty() || t.starts_with('%') {
            continue;
        }
        if seen == n_entries {
            return Err(err(lineno, format!("more entries than the {n_entries} the size line declares")));
        }
        let mut it = t.split_whitespace();
        let mut index = |what: &str, max: usize| -> Result<u32> {
            let s = it.next().ok_or_else(|| err(lineno, format!("missing {what} index")))?;
            let v: usize = s.parse().map_err(|_| err(lineno, format!("{what} index '{s}' is not a positive integer")))?;
            if v == 0 || v > max {
                return Err(err(lineno, format!("{what} index {v} is out of range 1..={max}")));
            }
            Ok((v - 1) as u32)
        };
        let r = index("row", n_rows)?;
        let c = index("column", n_cols)?;
        let v = match field {
            Field::Pattern => 1.0f32,
            Field::Real | Field::Integer => {
                let s = it.next().ok_or_else(|| err(lineno, "missing value".into()))?;
                let v: f64 = s.parse().map_err(|_| err(lineno, format!("value '{s}' is not a number")))?;
                if !v.is_finite() {
                    return Err(err(lineno, format!("value '{s}' is not finite")));
                }
                v as f32
            }
        };
        if let Some(extra) = it.next() {
            return Err(err(lineno, format!("unexpected extra token '{extra}'")));
        }
        triplets.push((r, c, v));
        if symmetry == Symmetry::Symmetric && r != c {
            triplets.push((c, r, v));
        }
        seen += 1;
    }
    if seen != n_entries {
        return Err(err(lineno, format!("file ends after {seen} entries, the size line declares {n_entries}")));
    }
    Csr::from_triplets(n_rows, n_cols, &triplets)
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
            ("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 abc\n", ":3:", "not a number"),
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
        assert!(e.to_string().contains("declares"));
    }
}
