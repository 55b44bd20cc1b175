//! The resume rule and append-per-reply store for any recorder of requests and replies
//! (JSON Lines, one record per request), sequential: used by `protospread sweep dictionary`.
//! The rule is the one [`crate::administer`] applies to stored answers.

use crate::AdministerError;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// A record the resume store can hold: one request, its body's sha256, and whether it was
/// answered.
pub trait StoredRequest: serde::Serialize {
    /// The request's key, unique in a plan.
    fn request_key(&self) -> &str;
    /// sha256 of the request body exactly as sent.
    fn request_sha256(&self) -> &str;
    /// Whether the request got a reply (a failed one is sent again).
    fn answered(&self) -> bool;
}

/// What [`run_resumable`] did.
#[derive(Debug)]
pub struct Resumed<R> {
    /// Planned requests already answered with the same body (not sent again).
    pub already_answered: usize,
    /// Requests sent in this run.
    pub sent: usize,
    /// Of those, failed.
    pub failed: usize,
    /// The file's records after the run, in its canonical order.
    pub records: Vec<R>,
}

/// Send every planned request that `existing` (the records already in `out`) has not
/// answered with the same body, appending each new record to `out` as one flushed and synced
/// line as it arrives; then rewrite `out` atomically with one record per key (the answered
/// one, else the latest failure) in plan order, followed by records of keys outside the plan
/// in key order.
///
/// `key` gives a planned request's key and body sha256; `send` sends it and makes its record;
/// `progress(record, sent, failed)` sees each new record.
/// A planned key answered earlier with another body is an error before anything is sent (the
/// model or the template changed: write to a new file), as is a key planned twice.
/// `truncated_bytes` (an incomplete last line left by a killed run) are cut off `out` before
/// the first append.
pub fn run_resumable<P, R: StoredRequest>(
    out: &Path,
    existing: Vec<R>,
    truncated_bytes: usize,
    planned: &[P],
    key: impl Fn(&P) -> (&str, &str),
    mut send: impl FnMut(&P) -> R,
    mut progress: impl FnMut(&R, usize, usize),
) -> Result<Resumed<R>, AdministerError> {
    let answered: BTreeMap<&str, &str> = existing
        .iter()
        .filter(|r| r.answered())
        .map(|r| (r.request_key(), r.request_sha256()))
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    let mut todo = Vec::new();
    let mut already_answered = 0usize;
    for p in planned {
        let (k, sha) = key(p);
        if !seen.insert(k) {
            return Err(AdministerError::Config(format!(
                "request key {k} is planned twice"
            )));
        }
        match answered.get(k) {
            Some(s) if *s == sha => already_answered += 1,
            Some(_) => {
                return Err(AdministerError::Store {
                    path: out.to_path_buf(),
                    line: 0,
                    message: format!(
                        "request {k} was answered earlier with a different request body (model or template changed); write to a new file"
                    ),
                })
            }
            None => todo.push(p),
        }
    }
    drop(answered);
    let (mut sent, mut failed) = (0usize, 0usize);
    let mut new_records = Vec::new();
    if !todo.is_empty() {
        if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs_err::create_dir_all(dir)?;
        }
        let mut f = fs_err::OpenOptions::new()
            .create(true)
            .append(true)
            .open(out)?;
        if truncated_bytes > 0 {
            // Cut an interrupted last line so the next record starts on its own line.
            let len = f.metadata()?.len();
            f.set_len(len - truncated_bytes as u64)?;
        }
        for p in todo {
            let r = send(p);
            let mut line = serde_json::to_string(&r).expect("record serializes");
            line.push('\n');
            f.write_all(line.as_bytes())?;
            f.flush()?;
            f.sync_data()?;
            sent += 1;
            if !r.answered() {
                failed += 1;
            }
            progress(&r, sent, failed);
            new_records.push(r);
        }
    }
    // One record per key: the first answered one, else the latest failure.
    let mut latest: BTreeMap<String, R> = BTreeMap::new();
    for r in existing.into_iter().chain(new_records) {
        match latest.get(r.request_key()) {
            Some(prev) if prev.answered() => {}
            _ => {
                latest.insert(r.request_key().to_string(), r);
            }
        }
    }
    let mut records: Vec<R> = planned
        .iter()
        .filter_map(|p| latest.remove(key(p).0))
        .collect();
    records.extend(latest.into_values());
    let mut text = String::new();
    for r in &records {
        text.push_str(&serde_json::to_string(r).expect("record serializes"));
        text.push('\n');
    }
    protospread_core::write_atomic(out, text.as_bytes())?;
    Ok(Resumed {
        already_answered,
        sent,
        failed,
        records,
    })
}
