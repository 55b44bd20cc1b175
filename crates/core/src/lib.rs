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
    /// An I/O error whose message does not name its path (a raw OS error: a lock, a rename
    /// system call); file-system calls go through `fs_err` and become [`Self::Fs`].
    #[error("{path}: {source}")]
    Io {
        /// The file or folder concerned.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A configuration file that does not parse or check.
    #[error("{path}: {message}")]
    Config {
        /// The configuration file.
        path: PathBuf,
        /// What is wrong, for the user.
        message: String,
    },
    /// A Parquet file that cannot be read or written.
    #[error("{path}: parquet: {message}")]
    Parquet {
        /// The Parquet file.
        path: PathBuf,
        /// The Parquet library's message.
        message: String,
    },
    /// A file-system error from `fs_err`, whose message names the path.
    #[error(transparent)]
    Fs(#[from] std::io::Error),
    /// protospread will not write here (a folder it did not create, a locked folder...).
    #[error("{path}: {message}")]
    Refused {
        /// The file or folder concerned.
        path: PathBuf,
        /// Why protospread refuses.
        message: String,
    },
    /// A manifest line that does not parse.
    #[error("{path}: line {line}: {message}")]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong, for the user.
        message: String,
    },
}

impl CoreError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        CoreError::Io {
            path: path.into(),
            source,
        }
    }
}

/// Result with [`CoreError`] by default.
pub type Result<T, E = CoreError> = std::result::Result<T, E>;
