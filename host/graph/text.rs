//! Byte-level line and token scanning shared by the text readers (Matrix Market, edge lists).
//!
//! Parsing millions of lines through `String` + `split_whitespace` + `str::parse` costs an
//! allocation-free but UTF-8-validating, bounds-heavy path per token; scanning bytes in a large
//! reusable buffer and parsing integers by hand is several times faster.

use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Longest line accepted (bytes).
pub const MAX_LINE: usize = 16 << 20;

/// Lines of a reader as byte slices (without `\n` / `\r\n`), counting line numbers for errors.
pub struct Lines<R> {
    reader: R,
    path: PathBuf,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    line: usize,
}

impl<R: Read> Lines<R> {
    pub fn new(reader: R, path: &Path) -> Self {
        Lines { reader, path: path.to_path_buf(), buf: vec![0; 1 << 20], start: 0, end: 0, eof: false, line: 0 }
    }

    /// The bytes read but not yet returned as lines, and the reader: for a caller that goes on
    /// with the rest of the input in another way (parallel blocks, [`crate::graph::blocks`]).
    pub fn into_rest(self) -> (Vec<u8>, R) {
        (self.buf[self.start..self.end].to_vec(), self.reader)
    }

    /// 1-based number of the line last returned (0 before the first).
    pub fn line_no(&self) -> usize {
        self.line
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// An error at the line last returned.
    pub fn error(&self, msg: impl Into<String>) -> Error {
        Error::parse(&self.path, self.line, msg)
    }

    /// The next line, or `None` at the end of the input. Read errors (a truncated or corrupt
    /// gzip stream, invalid data) become parse errors naming the line being read.
    pub fn next_line(&mut self) -> Result<Option<Line<'_>>> {
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[self.start..self.end]) {
                let s = self.start;
                self.start += i + 1;
                self.line += 1;
                return Ok(Some(Line { text: strip_bom(self.line, strip_cr(&self.buf[s..s + i])), no: self.line, path: &self.path }));
            }
            if self.eof {
                if self.start < self.end {
                    let s = self.start;
                    self.start = self.end;
                    self.line += 1;
                    return Ok(Some(Line {
                        text: strip_bom(self.line, strip_cr(&self.buf[s..self.end])),
                        no: self.line,
                        path: &self.path,
                    }));
                }
                return Ok(None);
            }
            // No complete line buffered: keep the partial one, read more behind it.
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.end == self.buf.len() {
                // No text format we read has lines anywhere near this long: a longer one is a
                // binary or hostile file (one 5 GiB line, /dev/zero), refused before it is held.
                if self.buf.len() >= MAX_LINE {
                    return Err(Error::parse(
                        &self.path,
                        self.line + 1,
                        format!("line longer than {} MiB: not a text graph file", MAX_LINE >> 20),
                    ));
                }
                self.buf.resize(self.buf.len() * 2, 0);
            }
            match self.reader.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(Error::parse(&self.path, self.line + 1, format!("read failed (truncated or corrupt file?): {e}")));
                }
            }
        }
    }
}

/// A reader that fails (with [`ErrorKind::FileTooLarge`] and `why`) once more than `limit`
/// bytes came through: bounds the work a small compressed file can ask for (gigabytes of
/// blank lines inflate from a few megabytes) by what its declared contents can take.
pub struct Bounded<R> {
    inner: R,
    left: u64,
    why: String,
}

impl<R: Read> Bounded<R> {
    pub fn new(inner: R, limit: u64, why: String) -> Self {
        Bounded { inner, left: limit, why }
    }
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n as u64 > self.left {
            return Err(std::io::Error::new(ErrorKind::FileTooLarge, self.why.clone()));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// Lines without data an edge list may hold before its data lines must outnumber them 1:64.
pub const FREE_EMPTY_LINES: u64 = 1 << 20;

/// One line of input and where it is, for error messages.
pub struct Line<'a> {
    pub text: &'a [u8],
    /// 1-based line number.
    pub no: usize,
    path: &'a Path,
}

impl Line<'_> {
    /// An error at this line.
    pub fn error(&self, msg: impl Into<String>) -> Error {
        Error::parse(self.path, self.no, msg)
    }
}

/// A UTF-8 byte-order mark before the first line (editors on Windows write one) is not part
/// of the first field: kept, it made the first edge's source id unreadable.
fn strip_bom(line_no: usize, l: &[u8]) -> &[u8] {
    if line_no == 1 { l.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(l) } else { l }
}

fn strip_cr(l: &[u8]) -> &[u8] {
    l.strip_suffix(b"\r").unwrap_or(l)
}

/// Tokens of a line separated by spaces/tabs (and commas when `commas`).
pub struct Tokens<'a> {
    rest: &'a [u8],
    commas: bool,
}

impl<'a> Tokens<'a> {
    pub fn new(line: &'a [u8], commas: bool) -> Self {
        Tokens { rest: line, commas }
    }
    fn is_sep(&self, b: u8) -> bool {
        b == b' ' || b == b'\t' || (self.commas && b == b',')
    }
}

impl<'a> Iterator for Tokens<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        let start = self.rest.iter().position(|&b| !self.is_sep(b))?;
        let rest = &self.rest[start..];
        let len = rest.iter().position(|&b| self.is_sep(b)).unwrap_or(rest.len());
        self.rest = &rest[len..];
        Some(&rest[..len])
    }
}

/// True for lines holding only spaces / tabs.
pub fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|&b| b == b' ' || b == b'\t')
}

/// A non-negative decimal integer (no sign, no spaces), `None` on anything else or overflow.
pub fn parse_u64(tok: &[u8]) -> Option<u64> {
    if tok.is_empty() || tok.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in tok {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(d as u64)?;
    }
    Some(v)
}

/// A finite floating-point number.
pub fn parse_f64(tok: &[u8]) -> Option<f64> {
    let v: f64 = std::str::from_utf8(tok).ok()?.parse().ok()?;
    v.is_finite().then_some(v)
}

/// Dimensions above this need at least 1/64 of an entry per row or column: a few bytes of
/// header must not make the reader allocate gigabytes of row pointers for a matrix that is
/// almost entirely empty rows. (Graphs with so many isolated nodes are not GNN inputs.)
pub const SPARSE_DIM_FREE: usize = 1 << 22;

/// `Some(message)` when `dim` rows/columns are implausible for `entries` entries.
pub fn implausible_dimension(dim: usize, entries: usize) -> Option<String> {
    (dim > SPARSE_DIM_FREE && dim / 64 > entries)
        .then(|| format!("dimension {dim} for only {entries} entries: refusing to allocate for a matrix of almost only empty rows"))
}

/// Text from a file or the command line for the terminal (a path, a graph name from a model
/// file's metadata): control characters escaped as in [`show`], nothing shortened.
pub fn escaped(s: &str) -> String {
    s.chars()
        .flat_map(|c| -> Box<dyn Iterator<Item = char>> {
            if c.is_control() { Box::new(c.escape_default()) } else { Box::new(std::iter::once(c)) }
        })
        .collect()
}

/// A token for an error message: lossy UTF-8, shortened, control characters escaped (`\u{1b}`),
/// so a hostile file cannot drive the user's terminal through our messages.
pub fn show(tok: &[u8]) -> String {
    let s: String = String::from_utf8_lossy(&tok[..tok.len().min(40)])
        .chars()
        .flat_map(|c| -> Box<dyn Iterator<Item = char>> {
            if c.is_control() { Box::new(c.escape_default()) } else { Box::new(std::iter::once(c)) }
        })
        .collect();
    if tok.len() > 40 { format!("{s}...") } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_and_count() {
        let text = b"a b\r\n\nlast";
        let mut l = Lines::new(&text[..], Path::new("x"));
        assert_eq!(l.next_line().unwrap().unwrap().text, b"a b");
        assert_eq!(l.next_line().unwrap().unwrap().text, b"");
        let last = l.next_line().unwrap().unwrap();
        assert_eq!((last.text, last.no), (&b"last"[..], 3));
        assert!(l.next_line().unwrap().is_none());
    }

    #[test]
    fn endless_lines_are_refused() {
        let e = Lines::new(std::io::repeat(0), Path::new("z")).next_line().err().unwrap().to_string();
        assert!(e.starts_with("z:1:") && e.contains("longer than"), "{e}");
        assert_eq!(show(b"a\x1b[31mb\n"), "a\\u{1b}[31mb\\n");
    }

    #[test]
    fn long_lines_grow_the_buffer() {
        let long = vec![b'7'; 3 << 20];
        let mut text = long.clone();
        text.extend_from_slice(b"\nx\n");
        let mut l = Lines::new(&text[..], Path::new("x"));
        assert_eq!(l.next_line().unwrap().unwrap().text.len(), long.len());
        assert_eq!(l.next_line().unwrap().unwrap().text, b"x");
    }

    #[test]
    fn tokens_and_numbers() {
        let t: Vec<&[u8]> = Tokens::new(b" 1,\t22 ,3", true).collect();
        assert_eq!(t, vec![&b"1"[..], b"22", b"3"]);
        let t: Vec<&[u8]> = Tokens::new(b"1,2 3", false).collect();
        assert_eq!(t, vec![&b"1,2"[..], b"3"]);
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_f64(b"1e3"), Some(1000.0));
        assert_eq!(parse_f64(b"nan"), None);
        assert!(is_blank(b" \t") && !is_blank(b" x"));
    }
}
