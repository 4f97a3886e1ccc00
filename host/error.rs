//! One error type for the whole library: every failure a user can cause says what and where.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Malformed input file: names the file, the 1-based line and the problem.
    #[error("{}:{line}: {msg}", path.display())]
    Parse { path: PathBuf, line: usize, msg: String },

    /// Malformed array inside a `.npz` archive: names the file, the array and the problem.
    #[error("{}: array '{array}': {msg}", path.display())]
    Npz { path: PathBuf, array: String, msg: String },

    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },

    /// A file whose content is not what it should be (a corrupt model file, a model that does
    /// not fit the graph): names the file and the problem.
    #[error("{}: {msg}", path.display())]
    BadFile { path: PathBuf, msg: String },

    /// A structurally invalid sparse matrix (built in code rather than read from a file).
    #[error("invalid sparse matrix: {0}")]
    InvalidGraph(String),

    /// Operands whose sizes do not fit together.
    #[error("shape mismatch: {0}")]
    Shape(String),

    /// A parameter outside what an implementation supports (e.g. K, precision).
    #[error("unsupported: {0}")]
    Unsupported(String),

    /// No usable GPU: the reason (no libcuda, no device, ...) so a user knows what to fix.
    #[error("no GPU: {0}")]
    NoGpu(String),

    /// A collective, a point-to-point transfer or the rendezvous between ranks failed (a peer
    /// gone, a timeout, mismatched sizes, NCCL missing or reporting an error).
    #[error("communication error in {context}: {msg}")]
    Comm { context: String, msg: String },

    /// A CUDA driver / cuSPARSE / cuBLAS call failed.
    #[error("CUDA error in {context}: {msg}")]
    Cuda { context: String, msg: String },
}

impl Error {
    pub fn parse(path: impl Into<PathBuf>, line: usize, msg: impl Into<String>) -> Self {
        Error::Parse { path: path.into(), line, msg: msg.into() }
    }
    pub fn comm(context: impl Into<String>, msg: impl std::fmt::Display) -> Self {
        Error::Comm { context: context.into(), msg: msg.to_string() }
    }
    pub fn cuda(context: impl Into<String>, err: impl std::fmt::Display) -> Self {
        let msg = err.to_string();
        let context = context.into();
        // Out-of-memory deserves an actionable message.
        if msg.contains("OUT_OF_MEMORY") {
            return Error::Cuda { context, msg: format!("{msg}: out of GPU memory; try a smaller graph or feature width K") };
        }
        Error::Cuda { context, msg }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
