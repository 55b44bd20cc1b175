//! The binary's integration tests, one module per area, linked into one test binary (one link
//! of the whole dependency tree instead of one per file).

mod administer;
mod answers;
mod cli_json;
mod fetch;
mod reliability;
mod report;
mod score;
mod support;
mod sweep;
