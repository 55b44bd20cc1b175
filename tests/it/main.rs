//! The binary's integration tests, one module per area, linked into one test binary (one link
//! of the whole dependency tree instead of one per file).

// A few tests print the figure they measured (recovery error, share of cells) next to their
// assertion, so a failing run shows how far off it was.
#![allow(clippy::print_stderr)]

mod administer;
mod answers;
mod cli_json;
mod cli_out;
mod contracts;
mod doc_rules;
mod fetch;
mod inference;
mod limits;
mod progress;
mod provenance;
mod reliability;
mod report;
mod rules;
mod run_tables;
mod score;
mod sensitivity;
mod sweep;
