//! Test support shared by the tests of every crate and of the binary (a dev-dependency only;
//! nothing here is part of a run).
//!
//! - A small synthetic score-stage output of exactly the contracts' shape
//!   ([`write`] a whole score folder, [`write_rows`] one of edited rows; its rows [`rows`] and batches [`scores_batch`],
//!   [`by_rule_batch`], [`reply_rules_batch`], [`norms_batch`], [`norms_batch_of`]; the
//!   fixture's human norms [`NORMS`], [`norm`], [`score_and_z`]).
//! - Typed rows of the contract tables ([`ParsedRow`], [`ScaleRow`], [`ReplyRuleRow`]; any
//!   [`ContractRow`]): read from batches or Parquet files checked against the contract
//!   ([`rows_of`], [`read_rows`]) and built into batches by it ([`batch_of`], [`by_rule_batch`]);
//!   stored answers scored in memory and read back as rows ([`parse_and_score`]).
//! - Stored-answer records: [`local_request`], [`keyed_request`].
//! - Reading outputs back: [`read_table`], [`table`], column values ([`floats`], [`ints`],
//!   [`strs`], [`bools`]) and a table's CSV text for snapshots ([`csv_text`]).
//! - Files and runs: [`copy_dir`], [`repo_root`], [`output_text`].

mod columns;
mod files;
mod process;
mod records;
mod rows;
mod scores;

pub use columns::{bools, csv_text, floats, ints, read_table, strs, table};
pub use files::copy_dir;
pub use process::{output_text, repo_root};
pub use records::{keyed_request, local_request};
pub use rows::{
    batch_of, by_rule_batch, field_array, parse_and_score, read_column, read_rows, rows_of, Cell,
    ContractRow, Field, ParsedRow, ReplyRuleRow, ScaleRow,
};
pub use scores::{
    norm, norms_batch, norms_batch_of, reply_rules_batch, rows, score_and_z, scores_batch, write,
    write_rows, CONDITIONS, NORMS,
};
