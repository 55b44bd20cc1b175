//! Test support shared by the tests of every crate and of the binary (a dev-dependency only;
//! nothing here is part of a run).
//!
//! - A small synthetic score-stage output of exactly the contracts' shape
//!   ([`write`] a whole score folder; its rows [`rows`] and batches [`scores_batch`],
//!   [`by_rule_batch`], [`reply_rules_batch`], [`norms_batch`], [`norms_batch_of`]; the
//!   fixture's human norms [`NORMS`], [`norm`], [`score_and_z`]).
//! - Stored-answer records: [`local_request`].
//! - Files: [`copy_dir`].

mod files;
mod records;
mod scores;

pub use files::copy_dir;
pub use records::local_request;
pub use scores::{
    by_rule_batch, norm, norms_batch, norms_batch_of, reply_rules_batch, rows, score_and_z,
    scores_batch, write, FxAnswer, FxScore, CONDITIONS, NORMS,
};
