//! Shared pieces of protospread that every stage needs.
//!
//! - Configuration: [`Config`], the `pipeline.toml` schema (unknown keys are errors naming key
//!   and line), its sections ([`FetchSection`], [`ScoreSection`]...) and its inputs
//!   ([`Input`], [`InputSource`], [`InputRole`]).
//! - Instruments: the nine JobCannon instruments ([`Instrument`], [`ALL_INSTRUMENTS`],
//!   [`study_instruments`], [`instrument_by_name`]), their columns and item counts, and the
//!   Arrow schema of their human rows ([`instrument_schema`]).
//! - Errors: [`CoreError`], and [`IoError`], the one error type of every crate for a raw OS
//!   error with the path it concerns.
//! - Hashes: sha256 of bytes and files ([`sha256_hex`], [`sha256_file`]) and
//!   `sha256sum -c` compatible manifests ([`Manifest`], [`write_manifest`]).
//! - Atomic writes: write-to-temporary-then-rename ([`write_atomic`]) and sets of files
//!   committed together ([`Staged`]), so a failed run never clobbers outputs.
//! - Limits: bounds on every number from pipeline.toml or the command line
//!   ([`check_range`] and the `*_RANGE` bounds), and on what one input may make protospread
//!   hold: a cell, a record, a Parquet footer, row-group count and page ([`MAX_CELL_BYTES`]
//!   and the other `MAX_*` bounds, enforced by [`CsvLimiter`], [`read_line_limited`],
//!   [`read_limited`], [`check_parquet_footer`] and [`check_parquet_pages`]).
//! - Output folders: ownership marker, lock and one-step switch ([`claim_out_dir`],
//!   [`RunStaging`], [`TopManifest`]).
//! - Scratch folders in the temporary folder, removed on drop, on a signal
//!   ([`clean_up_on_signals`]) or by the next process after `kill -9` ([`Scratch`]).
//! - Parquet: writing with pinned writer settings, so the same batches give the same bytes
//!   ([`write_parquet`], [`encode_parquet`], [`parquet_writer_properties`]), a streaming
//!   writer for large tables sorted by their keys that encodes their text and 32-bit integer
//!   columns as runs
//!   ([`TableWriter`]), and reading ([`read_parquet`]).
//! - Progress: what a long stage reports as it goes ([`Progress`], [`NoProgress`]); the
//!   binary draws it, the library crates never print.
//! - Provenance: each Parquet file's key-value metadata ([`FileMeta`]), made by
//!   [`Provenance`] from the table, the stage and command, and the inputs that table is
//!   computed from.
//! - Inter-stage tables: every table passed between stages declared once as a
//!   [`TableContract`] (name, columns with type and nullability, sort key), from which its
//!   schema, plan projection and input check derive ([`STORED_ANSWERS`], [`PARSED_ANSWERS`],
//!   [`SCALE_SCORES`], [`SCALE_SCORES_BY_RULE`], [`REPLY_RULE_COUNTS`], [`REPLY_RERUNS`],
//!   [`NORMS`]; the scorer-parity tables [`PARITY_SUMMARY`], [`PARITY_ROWS`],
//!   [`HUMAN_SCORES`], [`MUTATION_SWEEP`] and the norms' values [`NORM_VALUES`]; the aggregate stage's inference tables [`CELL_TESTS`],
//!   [`CELL_TESTS_BY_GROUP`], [`HEADLINE_INTERVAL`], [`ERROR_BARS`], [`RANKING`], the
//!   delimiter sweep's documents [`SWEEP_SAMPLES`] (fetch -> aggregate) and its tables
//!   [`SWEEP_ACCURACY`], [`SWEEP_SPREAD`], [`SWEEP_RANK`], [`SWEEP_LEAD`],
//!   [`SWEEP_NAMED_GAIN`], [`SWEEP_NAMED_GAIN_MEAN`], [`SWEEP_DELIMITER_GAIN`],
//!   [`SWEEP_DELIMITER_GAIN_MEAN`], [`SWEEP_SIGNIFICANCE`], [`SWEEP_RANKING`], and the aggregate stage's other
//!   tables [`CELLS`], [`CELLS_BY_RULE`], [`DROPPED_CELLS`], [`PROTOCOL_VS_SAMPLING`],
//!   [`PROTOCOL_VS_SAMPLING_BY_RULE`], [`RANGE`], [`BY_TEST`], [`RERUNS`],
//!   [`SEPARATE_ARMS`], [`REQUESTS`], [`CONSTANT_RUNS`], [`READABLE_REPLIES`], [`VERDICT`],
//!   [`VERDICT_BY_RULE`]; all in [`CONTRACTS`]).

mod atomic;
mod atomic_file;
mod config;
mod contract;
mod hash;
mod input_limits;
mod instruments;
mod limits;
mod outdir;
mod paths;
mod pq;
mod progress;
mod provenance;
mod scratch;
mod table_writer;
mod tables;

pub use atomic::Staged;
pub use atomic_file::write_atomic;
pub use config::{
    default_sweep_delimiters, is_commit_id, AdministerSection, AggregateSection, AnswersExtraTest,
    AnswersSection, ByteSize, Config, EngineSection, FetchSection, HfSource, Input, InputRole,
    InputSource, ReportSection, ScoreSection, Study, SweepConfig, SweepSection, SweepVariant,
    REPLY_RULES,
};
pub use contract::{Column, ColumnType, ContractError, TableContract};
pub use hash::{
    is_sha256_hex, rel_path, sha256_file, sha256_hex, write_manifest, Manifest, ManifestDiff,
    MANIFEST_NAME,
};
pub use input_limits::{
    check_parquet_footer, check_parquet_pages, read_limited, read_line_limited, CsvLimiter,
    Limited, Line, Place, TooLarge, MAX_CELL_BYTES, MAX_PARQUET_FOOTER_BYTES,
    MAX_PARQUET_PAGE_BYTES, MAX_PARQUET_ROW_GROUPS, MAX_RECORD_BYTES,
};
pub use instruments::{
    instrument_by_name, instrument_schema, study_instruments, Instrument, ItemKind,
    ALL_INSTRUMENTS, DARK_TRIAD,
};
pub use limits::{
    check_range, OutOfRange, CONCURRENCY_RANGE, RETRIES_RANGE, TIMEOUT_SECONDS_RANGE,
};
pub use outdir::{
    cache_top, check_out_location, claim_out_dir, remove_dead_temporaries, OutLock, RunStaging,
    TopManifest, STAGE_DIRS,
};
pub use pq::{
    copy_parquet_chunks, encode_parquet, parquet_writer_properties,
    parquet_writer_properties_with_statistics, read_parquet, write_parquet,
};
pub use progress::{NoProgress, Progress};
pub use provenance::{FileMeta, InputHash, Provenance, UNDECLARED_VERSION};
pub use scratch::{clean_up_on_signals, remove_dead_scratch, Scratch};
pub use table_writer::TableWriter;
pub use tables::{
    BY_TEST, CELLS, CELLS_BY_RULE, CELL_TESTS, CELL_TESTS_BY_GROUP, CONSTANT_RUNS, CONTRACTS,
    DROPPED_CELLS, ERROR_BARS, HEADLINE_INTERVAL, HUMAN_SCORES, MUTATION_SWEEP, NORMS, NORM_VALUES,
    PARITY_ROWS, PARITY_SUMMARY, PARSED_ANSWERS, PROTOCOL_VS_SAMPLING,
    PROTOCOL_VS_SAMPLING_BY_RULE, RANGE, RANKING, READABLE_REPLIES, REPLY_RERUNS,
    REPLY_RULE_COUNTS, REQUESTS, RERUNS, SCALE_SCORES, SCALE_SCORES_BY_RULE, SEPARATE_ARMS,
    STORED_ANSWERS, SWEEP_ACCURACY, SWEEP_DELIMITER_GAIN, SWEEP_DELIMITER_GAIN_MEAN, SWEEP_LEAD,
    SWEEP_NAMED_GAIN, SWEEP_NAMED_GAIN_MEAN, SWEEP_RANK, SWEEP_RANKING, SWEEP_SAMPLES,
    SWEEP_SIGNIFICANCE, SWEEP_SPREAD, VERDICT, VERDICT_BY_RULE,
};

use std::path::PathBuf;

/// Errors of the shared layer. Each names the file it concerns.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// An I/O error whose message does not name its path (a raw OS error: a lock, a rename
    /// system call); file-system calls go through `fs_err` and become [`Self::Fs`].
    #[error(transparent)]
    Io(#[from] IoError),
    /// A configuration file that does not parse or check.
    #[error("{path}: {message}")]
    Config {
        /// The configuration file.
        path: PathBuf,
        /// What is wrong, for the user.
        message: String,
        /// The parser's or check's error, when one found the problem.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A Parquet file that cannot be read or written.
    #[error("{path}: parquet: {source}")]
    Parquet {
        /// The Parquet file.
        path: PathBuf,
        /// The Parquet or Arrow library's error (or the file system's, when the encoded bytes
        /// are flushed).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
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
        CoreError::Io(IoError::new(path, source))
    }

    /// A Parquet (or Arrow) error on the table `path`.
    pub fn parquet(
        path: impl Into<PathBuf>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        CoreError::Parquet {
            path: path.into(),
            source: source.into(),
        }
    }
}

/// An I/O error with the path it concerns, for the raw OS errors whose message names no path
/// (a lock, a rename system call, a temporary file); every other file-system call goes through
/// `fs_err`, whose errors name their path. The one such type of every crate.
#[derive(Debug, thiserror::Error)]
#[error("{}", path.display())]
pub struct IoError {
    /// The file or folder concerned.
    pub path: PathBuf,
    /// The underlying I/O error.
    #[source]
    pub source: std::io::Error,
}

impl IoError {
    /// The error `source` on `path`.
    pub fn new(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        IoError {
            path: path.into(),
            source,
        }
    }
}

/// Result with [`CoreError`] by default.
pub type Result<T, E = CoreError> = std::result::Result<T, E>;
