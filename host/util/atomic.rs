//! Atomic file output: every file the program writes goes to a temporary name in the same folder
//! and is renamed over the final name only once complete, so an error or Ctrl-C part-way leaves
//! the old file (or nothing), never a truncated one under the final name.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A file being written under a temporary name beside `path`; [`AtomicFile::commit`] renames it
/// into place. Dropped without a commit (an error, a panic unwinding), the temporary is removed.
///
/// A symlink is followed (the file it names is replaced, the link stays); a device or a FIFO
/// (`-o /dev/null`, a named pipe) is written directly, since renaming over it would replace
/// the device node itself with a regular file.
pub struct AtomicFile {
    path: PathBuf,
    /// `None`: written in place (a device or FIFO).
    tmp: Option<PathBuf>,
    writer: Option<BufWriter<File>>,
}

impl AtomicFile {
    /// Opens `.NAME.tmp-PID` beside `path` (beside the file a symlink names). Fails (naming
    /// `path`) when the folder is missing or `path` is a directory, before anything is written.
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        check_output_path(&path)?;
        let io = |e: std::io::Error| Error::Io { path: path.clone(), source: e };
        let target = match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                let t = path.canonicalize().map_err(|e| {
                    io(std::io::Error::new(
                        e.kind(),
                        format!("a symlink whose target cannot be resolved ({e}); remove it or give another name"),
                    ))
                })?;
                check_output_path(&t)?;
                t
            }
            _ => path.clone(),
        };
        if std::fs::metadata(&target).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
            let file = std::fs::OpenOptions::new().write(true).open(&target).map_err(io)?;
            return Ok(AtomicFile { path, tmp: None, writer: Some(BufWriter::new(file)) });
        }
        let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = target.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
        // Reported under the name the user gave: the temporary name means nothing to them.
        let file = File::create(&tmp).map_err(|e| {
            let folder = tmp.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            io(std::io::Error::new(e.kind(), format!("cannot create a file in {}: {e}", folder.display())))
        })?;
        Ok(AtomicFile { path: target, tmp: Some(tmp), writer: Some(BufWriter::new(file)) })
    }

    /// The final path (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary file's writer.
    pub fn writer(&mut self) -> &mut BufWriter<File> {
        self.writer.as_mut().expect("writer taken only by commit")
    }

    /// Flushes, syncs and renames the temporary over the final name.
    pub fn commit(mut self) -> Result<()> {
        let io = |p: &Path, e| Error::Io { path: p.to_path_buf(), source: e };
        let writer = self.writer.take().expect("commit once");
        let file = writer.into_inner().map_err(|e| io(&self.path, e.into_error()))?;
        let Some(tmp) = self.tmp.take() else {
            return Ok(()); // a device or FIFO: written in place, nothing to sync or rename
        };
        let done = file.sync_all().map_err(|e| io(&self.path, e)).and_then(|()| {
            drop(file);
            std::fs::rename(&tmp, &self.path).map_err(|e| io(&self.path, e))
        });
        if done.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        done
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.writer().write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.writer().flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.writer.take().is_some()
            && let Some(tmp) = &self.tmp
        {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Writes `bytes` to `path` atomically.
pub fn write_atomic(path: impl AsRef<Path>, bytes: &[u8]) -> Result<()> {
    let mut f = AtomicFile::create(path)?;
    let path = f.path.clone();
    f.writer().write_all(bytes).map_err(|e| Error::Io { path, source: e })?;
    f.commit()
}

/// An output path a command can write: its folder exists and it is not a directory. Checked
/// before the work starts, so a long run does not fail at its very end.
pub fn check_output_path(path: &Path) -> Result<()> {
    let bad =
        |msg: &str| Error::Io { path: path.to_path_buf(), source: std::io::Error::new(std::io::ErrorKind::InvalidInput, msg.to_string()) };
    if path.as_os_str().is_empty() || path.file_name().is_none() {
        return Err(bad("not a file name"));
    }
    if path.is_dir() {
        return Err(bad("is a directory; give a file name"));
    }
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    match std::fs::metadata(parent) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(bad(&format!("{} is a file, not a folder", parent.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(bad(&format!("folder {} does not exist; create it first", parent.display())));
        }
        Err(e) => return Err(bad(&format!("folder {}: {e}", parent.display()))),
    }
    Ok(())
}

/// An output folder a command writes files into: it exists and is a folder.
pub fn check_output_dir(dir: &Path) -> Result<()> {
    let why = match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(_) => "is a file, not a folder; give a folder".to_string(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "output folder does not exist; create it first".to_string(),
        Err(e) => format!("output folder: {e}"),
    };
    Err(Error::Io { path: dir.to_path_buf(), source: std::io::Error::new(std::io::ErrorKind::InvalidInput, why) })
}

/// Checks every output with [`check_output_path`], and that no two outputs, and no output and
/// input, are the same file (writing over the graph being read, or `--perm-out` over `-o`).
pub fn check_outputs(inputs: &[&Path], outputs: &[&Path]) -> Result<()> {
    for (i, out) in outputs.iter().enumerate() {
        check_output_path(out)?;
        let clash = |other: &Path, role: &str| -> Result<()> {
            if same_file(out, other) {
                return Err(Error::Io {
                    path: out.to_path_buf(),
                    source: std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("is also {role}; give a different output name")),
                });
            }
            Ok(())
        };
        for inp in inputs {
            clash(inp, "an input")?;
        }
        for other in &outputs[..i] {
            clash(other, "another output")?;
        }
    }
    Ok(())
}

/// Whether two paths name the same file: compared after resolving the folder (the files
/// themselves may not exist yet).
pub fn same_file(a: &Path, b: &Path) -> bool {
    let resolve = |p: &Path| -> Option<PathBuf> {
        if let Ok(c) = p.canonicalize() {
            return Some(c);
        }
        let parent = p.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        Some(parent.canonicalize().ok()?.join(p.file_name()?))
    };
    match (resolve(a), resolve(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_replaces_and_drop_keeps_old() {
        let dir = std::env::temp_dir().join(format!("tcgnn-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("out.txt");
        write_atomic(&p, b"old").unwrap();
        {
            let mut f = AtomicFile::create(&p).unwrap();
            f.write_all(b"partial new").unwrap();
            // dropped without commit: an error part-way
        }
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "temporary removed");
        write_atomic(&p, b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert!(check_output_path(&dir).is_err());
        assert!(check_output_path(&dir.join("missing/x.txt")).is_err());
        let q = dir.join("q.txt");
        assert!(check_outputs(&[&p], &[&dir.join(".").join("out.txt")]).is_err(), "output = input");
        assert!(check_outputs(&[], &[&q, &dir.join("./q.txt")]).is_err(), "two outputs alike");
        check_outputs(&[&p], &[&q]).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
