//! The stored-answer format (v1, docs/stored-answers.md): what language models replied, as
//! the fetch, score and administer stages share it. This crate sits below all three and
//! depends on none of them.
//!
//! - The format: the stored-answer record ([`StoredRecord`]), its fixed Arrow schema
//!   ([`stored_schema`]) and the vocabularies (conditions, tests, instructions) a record may
//!   name ([`Vocabulary`]).
//! - Import: read a stored-answer file (CSV, JSONL or Parquet), validate every record and
//!   return it normalized and sorted ([`import_file`], [`import_into`]). Used by the fetch
//!   stage.
//! - Parse: the reply rules as plain functions, the study's strict rule ([`read_single`],
//!   [`read_whole`]) and a lenient one reported beside it ([`read_single_lenient`],
//!   [`read_whole_lenient`]; [`ReplyRule`] names them): which reply texts count as an
//!   answer, and the mapping of a shown option number back to the human 0..4 scale
//!   ([`option_to_value`]). The score crate wraps them as DataFusion
//!   functions.
//! - Simulate: the simulated study with planted effects ([`simulate()`], every record labelled
//!   "simulated"), and a large synthetic answer file for performance runs ([`write_bulk`]).

mod bulk;
mod format;
mod import;
mod parse;
mod simulate;
mod sorted;
mod vectorized;

pub use bulk::{write_bulk, BulkSummary};
pub use format::{
    stored_schema, to_batch, Arm, Mode, OptionOrder, StoredRecord, Vocabulary, CONDITIONS, OPTIONS,
    PROTOCOL_CONDITIONS,
};
pub use import::{already_imported, import_file, import_into, read_records, RecordSink, SORTED_BY};
pub use parse::{
    option_to_value, read_single, read_single_lenient, read_whole, read_whole_lenient,
    value_to_option, Reading, ReplyRule, Status,
};
pub use simulate::{
    item_map, simulate, write_simulation, ItemInfo, ItemKey, SimOutput, SIMULATED_ANSWERS_FILE,
    SIMULATED_LABEL, SIMULATED_TRUTH_FILE,
};

use std::path::PathBuf;

/// Errors of the stored-answer layer. Record errors name file, row and column.
#[derive(Debug, thiserror::Error)]
pub enum AnswersError {
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
    /// A file-system error from `fs_err`, whose message names the path.
    #[error(transparent)]
    Fs(#[from] std::io::Error),
    /// One record (or cell) is invalid. `row` counts data records from 1 (the CSV header is
    /// not a row); `line` is the line of the file where the record starts, when known.
    #[error("{}: row {row}{}, column {column}: {message}", file.display(), line.map(|l| format!(" (line {l})")).unwrap_or_default())]
    Record {
        /// The file.
        file: PathBuf,
        /// 1-based data row.
        row: usize,
        /// 1-based line in the file, when the format has lines.
        line: Option<usize>,
        /// The column (field) name.
        column: String,
        /// What is wrong, for the user.
        message: String,
    },
    /// The file as a whole is unusable (unknown extension, missing column, not UTF-8...).
    /// A problem with a whole file.
    #[error("{}: {message}", file.display())]
    File {
        /// The file.
        file: PathBuf,
        /// What is wrong, for the user.
        message: String,
    },
    /// Error from the shared layer (Parquet, atomic writes, manifests).
    #[error(transparent)]
    Core(#[from] protospread_core::CoreError),
    /// Scoring failed (e.g. a test without rows in the scoring key).
    /// Scoring failed.
    #[error("scoring {what}: {message}")]
    Score {
        /// What was being scored.
        what: String,
        /// What is wrong, for the user.
        message: String,
    },
    /// Arrow array construction failed (a bug, not bad input).
    #[error("arrow: {0}")]
    Arrow(String),
    /// The engine that runs the checks across records could not be set up.
    #[error(transparent)]
    Engine(#[from] protospread_engine::EngineError),
}

impl AnswersError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        AnswersError::Io {
            path: path.into(),
            source,
        }
    }
}

impl From<arrow::error::ArrowError> for AnswersError {
    fn from(e: arrow::error::ArrowError) -> Self {
        AnswersError::Arrow(e.to_string())
    }
}
