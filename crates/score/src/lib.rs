//! protospread-score: the scoring key, the scorer and scorer parity on the human data.
//!
//! - The key: [`ScoringKey`] loads `data/scoring_key.csv` (168 rows) and older key versions
//!   (`data/scoring_key_legacy.csv`, [`ScoringKey::load_versions`]) strictly; [`Mutation`]
//!   changes one item.
//! - The scorer: [`score`], the ~50-line scorer that reproduces the product's stored scores.
//! - Human rows ([`HumanRow`]) from the fetch stage's Parquet, streamed in chunks of
//!   [`HUMAN_CHUNK_ROWS`], or from the original CSV ([`read_human_csv`]); [`HumanSource`] and
//!   [`HumanInput`] say where an instrument's rows come from.
//! - Parity: classification of every human row ([`classify`], [`RowClass`], [`Category`]:
//!   reproduced / set aside / unexplained), the reviewed [`Allowlist`], and the mutation check
//!   ([`MutationSweep`] over every item; [`mutate_item`] for one item, `score --mutate`).
//!   [`run_parity`] does all of it for every instrument and builds the norms ([`ParityRun`]);
//!   [`parity_tables`] and [`ParityRowTables`] are the Arrow tables it writes, each of its
//!   contract's schema (`protospread_core::PARITY_SUMMARY` .. `NORM_VALUES`).
//! - Norms: human norms ([`Norms`]: mean, SD with n-1, mid-rank percentiles).
//! - Evidence: alternative scoring rules the data rejects, counted row by row
//!   ([`evidence_table`], [`ScoringRule`], [`alternative_rules`]; `score --evidence`).
//! - Reply rules: which reply texts count as an answer, the study's strict rule
//!   ([`read_single`], [`read_whole`]) and a lenient one reported beside it
//!   ([`read_single_lenient`], [`read_whole_lenient`]); [`ReplyRule`] names them, [`Reading`]
//!   and [`Status`] are what a rule makes of a reply (docs/stored-answers.md).
//! - Stored answers: fetched stored answers to `parsed_answers.parquet` and
//!   `scale_scores.parquet` by DataFusion plans with the reply rule, the scorer's value and
//!   the norms registered as functions ([`score_in_memory`] runs the same plans on records in
//!   memory), and whether temperature-0 reruns (S0 vs S0r, B0 vs B0r) gave identical replies
//!   (`reply_reruns.parquet`, [`rerun_rows`]).
//! - The stage: [`run_stage`] computes all of it and replaces `out/score/` only when every
//!   check passed ([`StageRun`]).
//!
//! How the key was recovered and the evidence for each part: `docs/scoring-key.md`.

mod answers;
mod evidence;
mod functions;
mod human;
mod kernels;
mod key;
mod norms;
mod parity;
mod parity_run;
mod reruns;
mod rules;
mod scorer;
mod stage;
mod tables;

pub use answers::{score_in_memory, AnswerSourceSummary, AnswersSummary, ScoredInMemory};
pub use evidence::{
    alternative_rules, count_reproduced_under, evidence_table, score_with_rule, Evidence,
    EvidenceCount, EvidenceRow, OutOfRange, Rounding, ScoringRule, TieOrder,
};
pub use human::{read_human_csv, HumanRow, HumanSource, HUMAN_CHUNK_ROWS};
pub use key::{DimRule, KeyItem, Mutation, ScoringKey, TestKey, Unit};
pub use norms::{Norm, Norms, ValueCounts};
pub use parity::{
    classify, Allowlist, Category, MutationResult, MutationSweep, ParitySummary, RowClass,
    MUTATION_WEIGHT_FACTOR, REASON_CURRENT, REASON_INCONSISTENT, REASON_UNKNOWN,
};
pub use parity_run::{not_allowlisted, NormRows, ParityRun};
pub use reruns::{rerun_rows, RerunRow, RERUNS_FILE};
pub use rules::{
    read_single, read_single_lenient, read_whole, read_whole_lenient, Reading, ReplyRule, Status,
};
pub use scorer::{score, DimScore, ScaleScores};
pub use stage::{mutate_item, run_parity, run_parity_streaming, run_stage, HumanInput, StageRun};
pub use tables::{parity_tables, ParityRowTables, ParityTable};

use std::path::PathBuf;

/// Errors of the score layer. Errors about a file name the file and, where there is one, the
/// line and column.
#[derive(Debug, thiserror::Error)]
pub enum ScoreError {
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
    Arrow(#[from] arrow::error::ArrowError),
    /// A Parquet file that does not read.
    #[error("{}: {source}", path.display())]
    Parquet {
        /// The file.
        path: PathBuf,
        /// The Parquet library's error.
        #[source]
        source: parquet::errors::ParquetError,
    },
    /// The engine could not be set up or failed (memory limit, spilling).
    #[error(transparent)]
    Engine(#[from] protospread_engine::EngineError),
    /// A stored-answer record is invalid (names file, row and column).
    #[error(transparent)]
    Format(#[from] protospread_format::FormatError),
    /// A file the score stage reads back breaks its table's contract.
    #[error("{}: {source}", path.display())]
    Contract {
        /// The file.
        path: PathBuf,
        /// The column missing or of another type.
        #[source]
        source: protospread_core::ContractError,
    },
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
