//! protospread-score: the scoring key, the scorer and scorer parity on the human data.
//!
//! - [`key`]: the scoring key (`data/scoring_key.csv`, 168 rows) and older key versions
//!   (`data/scoring_key_legacy.csv`), loaded strictly.
//! - [`scorer`]: the ~50-line scorer that reproduces the product's stored scores.
//! - [`human`]: human rows from the fetch stage's Parquet (or the original CSV).
//! - [`parity`]: classification of every human row (reproduced / set aside / unexplained),
//!   the allow-list and the mutation check.
//! - [`norms`]: human norms (mean, SD with n-1, mid-rank percentiles).
//! - [`evidence`]: alternative rules the data rejects, counted row by row.
//! - [`tables`]: the Arrow tables the parity part of the score stage writes.
//! - [`answers`]: the stored-answer part: fetched stored answers to `parsed_answers.parquet`
//!   and `scale_scores.parquet`.
//! - [`kernels`]: the reply rule, the scorer's value and the norms as DataFusion functions.
//! - [`reruns`]: whether temperature-0 reruns (S0 vs S0r, B0 vs B0r) gave identical replies
//!   (`reply_reruns.parquet`).
//!
//! How the key was recovered and the evidence for each part: `docs/scoring-key.md`.

pub mod answers;
pub mod evidence;
pub mod human;
pub mod kernels;
pub mod key;
pub mod norms;
pub mod parity;
pub mod reruns;
pub mod scorer;
pub mod stage;
pub mod tables;

pub use key::ScoringKey;
pub use scorer::{score, DimScore, ScaleScores};

use std::path::PathBuf;

/// Errors of the score layer. Errors about a file name the file and, where there is one, the
/// line and column.
#[derive(Debug, thiserror::Error)]
pub enum ScoreError {
    /// An I/O error whose message does not name its path (a raw OS error: a lock, a rename
    /// system call); file-system calls go through `fs_err` and become [`Self::Fs`].
    #[error("{}: {source}", path.display())]
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
    /// A cell or row of an input file is invalid. `line` is the line of the file (the header
    /// is line 1).
    #[error("{}: line {line}, column {column}: {message}", path.display())]
    Cell {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// The column name.
        column: String,
        /// What is wrong, for the user.
        message: String,
    },
    /// A file is unusable as a whole (missing column, wrong row count, incomplete test...).
    /// A problem with a whole file.
    #[error("{}: {message}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong, for the user.
        message: String,
    },
    /// Scoring was asked for something the key does not hold (unknown test, wrong length).
    /// Scoring a test failed.
    #[error("scoring {test}: {message}")]
    Score {
        /// The test name.
        test: String,
        /// What is wrong, for the user.
        message: String,
    },
    /// Error of the shared layer (Parquet reading).
    #[error(transparent)]
    Core(#[from] protospread_core::CoreError),
    /// Arrow array construction failed (a bug, not bad input).
    #[error("arrow: {0}")]
    Arrow(String),
    /// The engine could not be set up or failed (memory limit, spilling).
    #[error(transparent)]
    Engine(#[from] protospread_engine::EngineError),
    /// A stored-answer file or record is invalid (names file, row and column).
    #[error(transparent)]
    Answers(#[from] protospread_answers::AnswersError),
}

impl From<arrow::error::ArrowError> for ScoreError {
    fn from(e: arrow::error::ArrowError) -> Self {
        ScoreError::Arrow(e.to_string())
    }
}

impl ScoreError {
    pub(crate) fn cell(
        path: impl Into<PathBuf>,
        line: usize,
        column: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        ScoreError::Cell {
            path: path.into(),
            line,
            column: column.into(),
            message: message.into(),
        }
    }

    pub(crate) fn file(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        ScoreError::File {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// The one text rendering of a float used in printed summaries and text cells: six decimals.
pub fn fmt_f64(x: f64) -> String {
    format!("{x:.6}")
}
