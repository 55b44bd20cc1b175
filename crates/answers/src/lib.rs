//! The stored-answer format (v1, docs/stored-answers.md): what language models replied, as
//! the fetch, score and administer stages share it. This crate sits below all three and
//! depends on none of them.
//!
//! - [`format`]: the stored-answer record, its fixed Arrow schema and the vocabularies
//!   (conditions, tests, instructions) a record may name.
//! - [`import`]: read a stored-answer file (CSV, JSONL or Parquet), validate every record and
//!   return it normalized and sorted. Used by the fetch stage.
//! - [`parse`]: the reply rules (the strict rule of the study and a lenient one,
//!   [`parse::ReplyRule`]) as plain functions: which reply texts count as an answer, and the
//!   mapping of a shown option number back to the human 0..4 scale. The score
//!   crate wraps them as DataFusion functions.
//! - [`simulate`]: the simulated study with planted effects (every record labelled
//!   "simulated").

pub mod bulk;
pub mod format;
pub mod import;
pub mod parse;
pub mod simulate;

use std::path::PathBuf;

/// Errors of the stored-answer layer. Record errors name file, row and column.
#[derive(Debug, thiserror::Error)]
pub enum AnswersError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder concerned.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
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
