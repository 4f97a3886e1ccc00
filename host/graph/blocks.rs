//! Parsing a text stream on all cores: the calling thread reads (and gunzips) the input into
//! blocks of whole lines, and each block is parsed by a rayon task while the next is read.
//! Decompression stays serial (gzip cannot be split), so this pays when parsing, not reading,
//! is the slower half, as for Matrix Market text (number parsing is several times the cost of
//! inflating the bytes).
//!
//! At most `2 x threads` blocks are in flight, so memory stays bounded whatever the file size.

use std::io::Read;
use std::path::Path;
use std::sync::Mutex;
use std::sync::mpsc::sync_channel;

use crate::error::{Error, Result};
use crate::graph::text::MAX_LINE;

/// Bytes per block (whole lines; a block grows past this only to finish its last line).
const BLOCK: usize = 4 << 20;

/// Runs `parse(text, first_line_no)` on consecutive blocks of whole lines of `prefix` followed by
/// `reader`, in parallel; returns the results in input order. `first_line` is the 1-based number
/// of the first line of `prefix`. A line longer than [`MAX_LINE`] or a read error is an error at
/// its line.
pub fn parse_blocks<R: Read, T: Send>(
    mut reader: R,
    prefix: Vec<u8>,
    first_line: usize,
    path: &Path,
    parse: impl Fn(&[u8], usize) -> T + Sync,
) -> Result<Vec<T>> {
    let results: Mutex<Vec<Option<T>>> = Mutex::new(Vec::new());
    let mut pending = prefix;
    let mut line = first_line;
    let mut eof = false;
    let mut read_error = None;
    // Inside a rayon task, blocking this thread on the tokens could starve the pool: parse inline.
    let inline = rayon::current_thread_index().is_some();
    let slots = 2 * rayon::current_num_threads().max(1);
    let (give, take) = sync_channel::<()>(slots);
    for _ in 0..slots {
        give.send(()).expect("receiver alive");
    }
    let parse = &parse;
    let results_ref = &results;
    rayon::in_place_scope(|s| {
        let mut idx = 0usize;
        while !(eof && pending.is_empty()) {
            let mut buf = std::mem::take(&mut pending);
            // Fill to at least BLOCK bytes holding a whole line (or to the end).
            loop {
                if eof || (buf.len() >= BLOCK && memchr::memrchr(b'\n', &buf).is_some()) {
                    break;
                }
                if buf.len() >= BLOCK + MAX_LINE {
                    read_error = Some(Error::parse(path, line, format!("line longer than {} MiB: not a text graph file", MAX_LINE >> 20)));
                    return;
                }
                // `take + read_to_end` appends into spare capacity (no zero-filling per read).
                let want = BLOCK.saturating_sub(buf.len()).max(1 << 16) as u64;
                let old = buf.len();
                match (&mut reader).take(want).read_to_end(&mut buf) {
                    Ok(0) => eof = true,
                    Ok(_) => {}
                    Err(e) => {
                        let at = line + memchr::memchr_iter(b'\n', &buf[..old]).count();
                        let msg = if e.kind() == std::io::ErrorKind::FileTooLarge {
                            e.to_string()
                        } else {
                            format!("read failed (truncated or corrupt file?): {e}")
                        };
                        read_error = Some(Error::parse(path, at, msg));
                        return;
                    }
                }
            }
            if !eof {
                let cut = memchr::memrchr(b'\n', &buf).expect("checked above") + 1;
                pending = buf[cut..].to_vec();
                buf.truncate(cut);
            }
            if buf.is_empty() {
                continue;
            }
            let lines_here = memchr::memchr_iter(b'\n', &buf).count() + usize::from(!buf.ends_with(b"\n"));
            let first = line;
            line += lines_here;
            let i = idx;
            idx += 1;
            results_ref.lock().expect("no panics while locked").push(None);
            if inline {
                let r = parse(&buf, first);
                results_ref.lock().expect("no panics while locked")[i] = Some(r);
                continue;
            }
            take.recv().expect("senders alive");
            let give = give.clone();
            s.spawn(move |_| {
                let r = parse(&buf, first);
                results_ref.lock().expect("no panics while locked")[i] = Some(r);
                let _ = give.send(());
            });
        }
    });
    if let Some(e) = read_error {
        return Err(e);
    }
    Ok(results.into_inner().expect("no panics while locked").into_iter().map(|r| r.expect("every block parsed")).collect())
}

/// Lines of a block with their 1-based numbers (`\r\n` endings stripped).
pub fn numbered_lines(text: &[u8], first: usize) -> impl Iterator<Item = (usize, &[u8])> {
    let body = text.strip_suffix(b"\n").unwrap_or(text);
    body.split(|&b| b == b'\n').enumerate().map(move |(i, l)| (first + i, l.strip_suffix(b"\r").unwrap_or(l)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cover_every_line_in_order() {
        let text: String = (1..=2_000_000).map(|i| format!("{i}\n")).collect();
        let sums = parse_blocks(text.as_bytes(), b"0\n".to_vec(), 1, Path::new("t"), |block, first| {
            numbered_lines(block, first)
                .map(|(no, l)| {
                    let v: usize = std::str::from_utf8(l).unwrap().parse().unwrap();
                    assert_eq!(v + 1, no, "line numbers follow the text");
                    v as u64
                })
                .sum::<u64>()
        })
        .unwrap();
        assert!(sums.len() > 2, "several blocks");
        assert_eq!(sums.iter().sum::<u64>(), 2_000_000 * 2_000_001 / 2);
        let e = parse_blocks(std::io::repeat(b'x'), Vec::new(), 1, Path::new("z"), |_, _| ()).unwrap_err();
        assert!(e.to_string().contains("longer than"), "{e}");
        let last: Vec<(usize, Vec<u8>)> = parse_blocks(&b"a\r\nb"[..], Vec::new(), 5, Path::new("t"), |b, f| {
            numbered_lines(b, f).map(|(n, l)| (n, l.to_vec())).collect::<Vec<_>>()
        })
        .unwrap()
        .concat();
        assert_eq!(last, vec![(5, b"a".to_vec()), (6, b"b".to_vec())]);
    }
}
