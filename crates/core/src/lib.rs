//! Shared pieces of protospread that every stage needs.
//!
//! - [`config`]: the `pipeline.toml` schema (unknown keys are errors naming key and line).
//! - [`instruments`]: the nine JobCannon instruments, their columns and item counts.
//! - [`hash`]: sha256 of files and `sha256sum -c` compatible manifests.
//! - [`atomic`]: write-to-temporary-then-rename, so a failed run never clobbers outputs.
//! - [`limits`]: bounds on every number from pipeline.toml or the command line.
//! - [`outdir`]: ownership marker, lock and one-step switch of output folders.
//! - [`pq`]: Parquet writing with pinned writer settings (same batches -> same bytes).
//! - [`tables`]: schemas of the Parquet tables passed between stages, defined once.

pub mod atomic;
pub mod config;
pub mod hash;
pub mod instruments;
pub mod limits;
pub mod outdir;
pub mod pq;
pub mod tables;

use std::path::PathBuf;

/// Errors of the shared layer. Each names the file it concerns.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Config { path: PathBuf, message: String },
    #[error("{path}: parquet: {message}")]
    Parquet { path: PathBuf, message: String },
    /// A file-system error from `fs_err`, whose message names the path.
    #[error(transparent)]
    Fs(#[from] std::io::Error),
    /// protospread will not write here (a folder it did not create, a locked folder...).
    #[error("{path}: {message}")]
    Refused { path: PathBuf, message: String },
    #[error("{path}: line {line}: {message}")]
    Manifest {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

impl CoreError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        CoreError::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = CoreError> = std::result::Result<T, E>;
