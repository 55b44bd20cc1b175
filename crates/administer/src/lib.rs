//! `protospread administer`: give questionnaires to a model behind an OpenAI-compatible
//! chat-completions endpoint under the study's conditions, and record every request exactly as
//! sent, with its raw reply, in the stored-answer format (docs/administer.md).
//!
//! - `instrument`: instrument files (item texts, options, instructions P1/P2).
//! - `plan`: conditions, the exact request bodies, item-order shuffles, request seeds.
//! - `client`: the HTTP client with timeouts and retries.
//! - `record`: the stored record (JSONL) and the append-only resume store.
//! - `resume`: the resume rule and append-per-reply store for any recorder (sweep dictionary).
//! - [`Selection`], [`ClientSettings`]: what a run sends, chosen within `[administer]`, and
//!   the client settings checked against their ranges.
//! - [`administer`]: runs a plan with bounded concurrency, skipping answered requests.

mod client;
mod instrument;
mod plan;
mod record;
mod redact;
mod resume;
mod setup;

pub use client::Client;
pub use instrument::{missing_instrument, Instrument};
pub use plan::{conditions, plan, Condition, Message, Planned, RequestColumns};
pub use record::{Outcome, Record, RunLabels};
pub use resume::{run_resumable, Resumed, StoredRequest};
pub use setup::{default_output, ClientSettings, Plan, Selection};

use record::Appender;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// Errors of the administer layer.
#[derive(Debug, thiserror::Error)]
pub enum AdministerError {
    /// A file-system error from `fs_err`, whose message names the path. A raw OS error, whose
    /// message names none (a lock), is a [`protospread_core::CoreError::Io`] with its path.
    #[error(transparent)]
    Fs(#[from] std::io::Error),
    /// An instrument file that does not load.
    #[error("instrument file {}: {message}", path.display())]
    Instrument {
        /// The instrument file.
        path: PathBuf,
        /// What is wrong, for the user.
        message: String,
    },
    /// An instrument file that cannot be read, or is not TOML of an instrument's shape.
    // The TOML parser's message ends with a newline; the chain shows it once, trimmed.
    #[error("instrument file {}: {}", path.display(), source.to_string().trim_end())]
    InstrumentFile {
        /// The instrument file.
        path: PathBuf,
        /// The file system's or the TOML parser's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// No instrument file for a test of the plan.
    #[error("test '{test}': {message}")]
    NoInstrument {
        /// The test name.
        test: String,
        /// What is wrong, for the user.
        message: String,
    },
    /// Settings that cannot be administered.
    #[error("{0}")]
    Config(String),
    /// A number outside its bound (a command-line flag).
    #[error(transparent)]
    OutOfRange(#[from] protospread_core::OutOfRange),
    /// A base URL that is not http(s).
    #[error("base URL '{0}' must start with http:// or https:// (e.g. http://127.0.0.1:8088/v1)")]
    BaseUrl(String),
    /// The output file holds a line that is not a record, or a record that conflicts.
    #[error("{}: line {line}: {message}", path.display())]
    Store {
        /// The answers file.
        path: PathBuf,
        /// 1-based line of the record.
        line: usize,
        /// What is wrong, for the user.
        message: String,
    },
    /// Another process holds the lock on this answers file.
    #[error("{}: another `protospread administer` is writing this file; wait for it to finish (two runs on one file would lose records)", path.display())]
    Locked {
        /// The locked answers file.
        path: PathBuf,
    },
    /// An error of the shared layer.
    #[error(transparent)]
    Core(#[from] protospread_core::CoreError),
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Summary {
    /// Requests in the plan.
    pub planned: usize,
    /// Planned requests already answered in the output file (not sent again).
    pub already_answered: usize,
    /// Requests sent in this run.
    pub sent: usize,
    /// Of those, answered.
    pub answered: usize,
    /// Of those, failed after retries (recorded with `error`; a rerun sends them again).
    pub failed: usize,
    /// Bytes of an incomplete last line cut off the output file before appending.
    pub truncated_bytes: usize,
    /// Records in the output file after the run.
    pub records_in_file: usize,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Run `planned` against `client`, appending to `out`.
///
/// Resume rule: a planned request whose key already has an answered record in `out` is not
/// sent; if that record's request body differs from the planned one (the instrument, settings
/// or model changed), the run stops with an error instead of mixing two designs in one file.
/// Records with an error are sent again. When every request has been handled, `out` is
/// rewritten atomically with one record per key (answered first, else the latest failure) in
/// plan order, followed by any records of keys outside this plan in key order.
pub fn administer(
    client: &client::Client,
    labels: &RunLabels,
    planned: &[plan::Planned],
    out: &Path,
    concurrency: usize,
    progress: bool,
) -> Result<Summary, AdministerError> {
    // Before anything is sent: a link or a device would be written through, or replaced by a
    // copy at the final rewrite, after the requests were paid for.
    record::check_output_path(out)?;
    // Lock before reading: a second run on the same file refuses instead of losing records.
    let _lock = record::lock_output(out)?;
    let existing = record::load_existing(out)?;
    let mut summary = Summary {
        planned: planned.len(),
        truncated_bytes: existing.truncated_bytes,
        ..Summary::default()
    };
    let answered_before: BTreeMap<&str, &Record> = existing
        .records
        .iter()
        .filter(|r| r.answered())
        .map(|r| (r.request_key.as_str(), r))
        .collect();
    let mut keys = BTreeSet::new();
    let mut todo = Vec::new();
    for p in planned {
        if !keys.insert(p.key.as_str()) {
            return Err(AdministerError::Config(format!(
                "request key {} is planned twice",
                p.key
            )));
        }
        match answered_before.get(p.key.as_str()) {
            Some(r) if r.request_sha256 == p.body_sha256 => summary.already_answered += 1,
            Some(_) => {
                return Err(AdministerError::Store {
                    path: out.to_path_buf(),
                    line: 0,
                    message: format!(
                        "request {} was answered earlier with a different request body (instrument, settings or model changed); write to a new output file",
                        p.key
                    ),
                })
            }
            None => todo.push(p),
        }
    }
    drop(answered_before);

    let bar = if progress && !todo.is_empty() {
        let b = indicatif::ProgressBar::new(todo.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} {pos}/{len} requests [{elapsed_precise}, eta {eta}] {msg}",
            )
            .expect("valid template"),
        );
        b
    } else {
        indicatif::ProgressBar::hidden()
    };

    let mut new_records = Vec::new();
    if !todo.is_empty() {
        let mut appender = Appender::open(out)?;
        let queue = Mutex::new(todo.into_iter());
        let stop = AtomicBool::new(false);
        let (tx, rx) = mpsc::channel::<(&plan::Planned, record::Outcome)>();
        let workers = concurrency.max(1);
        let write_result = std::thread::scope(|s| {
            for _ in 0..workers {
                let tx = tx.clone();
                let queue = &queue;
                let stop = &stop;
                s.spawn(move || loop {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let next = queue.lock().expect("queue lock").next();
                    let Some(p) = next else { break };
                    let o = client.send(&p.body);
                    if tx.send((p, o)).is_err() {
                        break;
                    }
                });
            }
            drop(tx);
            // The only writer: records reach the file in arrival order, one line each.
            for (p, o) in rx {
                let r = record::make_record(p, labels, o, now_ms());
                if let Err(e) = appender.append(&r) {
                    stop.store(true, Ordering::SeqCst);
                    return Err(e);
                }
                summary.sent += 1;
                if r.answered() {
                    summary.answered += 1;
                } else {
                    summary.failed += 1;
                }
                bar.set_message(format!("{} failed", summary.failed));
                bar.inc(1);
                new_records.push(r);
            }
            Ok(())
        });
        bar.finish_and_clear();
        write_result?;
    }

    // Every request handled: put the file in canonical order, one record per key.
    let mut all = existing.records;
    all.extend(new_records);
    let mut latest = record::latest_by_key(all);
    let mut ordered: Vec<Record> = planned
        .iter()
        .filter_map(|p| latest.remove(&p.key))
        .collect();
    ordered.extend(latest.into_values());
    summary.records_in_file = ordered.len();
    record::write_all(out, &ordered)?;
    Ok(summary)
}
