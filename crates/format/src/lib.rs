//! The stored-answer format (v1, docs/stored-answers.md): what language models replied, as
//! the fetch (import), score (reply rules) and administer (recording) code share it. This
//! crate only defines the format; reading files of it is the fetch stage's import.
//!
//! - The record ([`StoredRecord`]) with its fields' types ([`Arm`], [`Mode`], [`OptionOrder`]),
//!   the vocabularies a record may name ([`Vocabulary`], [`CONDITIONS`], [`TESTS`],
//!   [`INSTRUCTIONS`]) and the columns in file order ([`COLUMNS`], from the table contract
//!   [`protospread_core::STORED_ANSWERS`]).
//! - Records to and from Arrow batches: a record at a time ([`RecordBuilder`] of
//!   [`RecordValues`]), from and to [`StoredRecord`]s ([`to_batch`], [`from_batches`],
//!   [`column`]).
//! - Options: the mapping of a shown option number to the human 0..4 scale and back
//!   ([`option_to_value`], [`value_to_option`], [`OPTIONS`]).

mod builder;
mod options;
mod record;

pub use builder::{RecordBuilder, RecordValues};
pub use options::{option_to_value, value_to_option, OPTIONS};
pub use record::{
    column, from_batches, to_batch, Arm, Mode, OptionOrder, StoredRecord, Vocabulary, COLUMNS,
    CONDITIONS, FORMAT_VERSION, INSTRUCTIONS, PROTOCOL_CONDITIONS, TESTS,
};

use std::path::PathBuf;

/// Errors of records and batches of the format. Record errors name file, row and column.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
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
        /// The parser's or limit's error behind `message`, when one found the problem.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// The file as a whole is unusable (unknown extension, missing column, not UTF-8...).
    #[error("{}: {message}", file.display())]
    File {
        /// The file.
        file: PathBuf,
        /// What is wrong, for the user.
        message: String,
    },
    /// Arrow array construction failed (a bug, not bad input).
    #[error("arrow: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
}
