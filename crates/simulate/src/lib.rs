//! Generators of stored answers (a generator is not a stage: nothing in the pipeline calls
//! this crate; `protospread simulate` does).
//!
//! - The simulated study with planted effects ([`simulate()`], every record labelled
//!   "simulated", docs/simulation.md), its item map from the scoring key ([`item_map`]) and
//!   its files ([`write_simulation`]).
//! - A large answer file of the study's design for performance runs ([`write_bulk`]).

mod bulk;
mod simulate;

pub use bulk::{write_bulk, BulkSummary};
pub use simulate::{
    item_map, simulate, write_simulation, ItemInfo, SimOutput, SIMULATED_ANSWERS_FILE,
    SIMULATED_LABEL, SIMULATED_TRUTH_FILE,
};

use std::path::PathBuf;

/// Errors of the generators; each names the file or test it concerns.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    /// A file-system error from `fs_err`, whose message names the path.
    #[error(transparent)]
    Fs(#[from] std::io::Error),
    /// A request the generator cannot carry out for this file.
    #[error("{}: {message}", file.display())]
    File {
        /// The file.
        file: PathBuf,
        /// What is wrong, for the user.
        message: String,
    },
    /// Writing Parquet failed.
    #[error("{}: parquet", file.display())]
    Parquet {
        /// The file.
        file: PathBuf,
        /// The Parquet library's error.
        #[source]
        source: parquet::errors::ParquetError,
    },
    /// The scoring key lacks what the simulation needs for a test.
    #[error("simulation item map, test {test}: {message}")]
    Key {
        /// The test.
        test: String,
        /// What is wrong, for the user.
        message: String,
    },
    /// Serializing a record or the truth to JSON failed.
    #[error("{what} serialization")]
    Json {
        /// What was serialized.
        what: &'static str,
        /// serde_json's error.
        #[source]
        source: serde_json::Error,
    },
    /// Writing the files (atomic writes of the shared layer).
    #[error(transparent)]
    Core(#[from] protospread_core::CoreError),
    /// Arrow array construction failed (a bug, not bad input).
    #[error("arrow")]
    Arrow(#[from] arrow::error::ArrowError),
}
