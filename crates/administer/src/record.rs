//! Stored records (JSONL, stored-answer format v1 plus recording columns) and the resume store.
//!
//! During a run every finished request is appended as one line and flushed, so a killed run
//! keeps every reply it received. A run that finishes rewrites the file (atomically) with one
//! record per request key, in canonical order; an interrupted run leaves it in arrival order,
//! which the next run (or the importer, which sorts by key) puts right.

use crate::plan::{Planned, RequestColumns};
use crate::AdministerError;
use fs_err::os::unix::fs::OpenOptionsExt;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// Version of the stored-answer format written.
pub(crate) const FORMAT_VERSION: u32 = 1;

/// One request and its outcome. The fields up to `label` (with those of `request`) are the
/// stored-answer format v1 (docs/stored-answers.md); the rest record the request exactly as
/// sent and what came back.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Record {
    /// Stored-answer format version (always 1).
    pub format_version: u32,
    /// Study name.
    pub study: String,
    /// Model id exactly as sent in the request body.
    pub model: String,
    /// `api`, `cli` or `local`.
    pub arm: String,
    /// Cohort the model belongs to.
    pub cohort: String,
    /// The columns the planned request decides, `condition` to `temperature`.
    #[serde(flatten)]
    pub request: RequestColumns,
    /// The reply text as received (`choices[0].message.content`); empty when the request failed.
    pub reply: String,
    /// Why the request failed after its retries; null for an answered request.
    pub error: Option<String>,
    /// Provenance label of the run (e.g. `recorded`).
    pub label: String,
    // --- recording columns: extension keys (`x_` prefix), carried but not imported ---
    /// `model|test|condition|sample|item` (`whole` for whole-test requests): unique per request.
    #[serde(rename = "x_request_key")]
    pub request_key: String,
    /// sha256 of `request_body`.
    #[serde(rename = "x_request_sha256")]
    pub request_sha256: String,
    /// The exact JSON body POSTed (messages, temperature, max_tokens, seed, model id).
    #[serde(rename = "x_request_body")]
    pub request_body: String,
    /// Seed sent in the body, if any.
    #[serde(rename = "x_seed")]
    pub seed: Option<u64>,
    /// `max_tokens` sent in the body.
    #[serde(rename = "x_max_tokens")]
    pub max_tokens: u32,
    /// The URL the request was POSTed to.
    #[serde(rename = "x_endpoint")]
    pub endpoint: String,
    /// `model` as reported in the response body.
    #[serde(rename = "x_response_model")]
    pub response_model: Option<String>,
    /// `usage` object of the response body, verbatim.
    #[serde(rename = "x_usage")]
    pub usage: Option<serde_json::Value>,
    /// `choices[0].finish_reason`.
    #[serde(rename = "x_finish_reason")]
    pub finish_reason: Option<String>,
    /// `system_fingerprint` of the response, when the endpoint sends one.
    #[serde(rename = "x_system_fingerprint")]
    pub system_fingerprint: Option<String>,
    /// HTTP status of the last attempt (null when no response arrived).
    #[serde(rename = "x_http_status")]
    pub http_status: Option<u16>,
    /// Attempts made (1 = no retry).
    #[serde(rename = "x_attempts")]
    pub attempts: u32,
    /// Wall time of the last attempt, milliseconds.
    #[serde(rename = "x_elapsed_ms")]
    pub elapsed_ms: u64,
    /// When the outcome was recorded, milliseconds since the Unix epoch (UTC).
    #[serde(rename = "x_received_unix_ms")]
    pub received_unix_ms: u64,
}

impl Record {
    /// True when the request has a reply (not an error).
    pub fn answered(&self) -> bool {
        self.error.is_none()
    }
}

/// Identity of the run written into every record.
#[derive(Debug, Clone)]
pub struct RunLabels {
    /// Study name.
    pub study: String,
    /// Model id as sent.
    pub model: String,
    /// `api`, `cli` or `local`.
    pub arm: String,
    /// Cohort the model belongs to.
    pub cohort: String,
    /// Provenance label of the run.
    pub label: String,
    /// The URL requests are POSTed to.
    pub endpoint: String,
}

/// What came back for one request.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The reply text, when the request was answered.
    pub reply: Option<String>,
    /// Why the request failed after its retries.
    pub error: Option<String>,
    /// `model` of the response body.
    pub response_model: Option<String>,
    /// `usage` of the response body, as received.
    pub usage: Option<serde_json::Value>,
    /// `choices[0].finish_reason`.
    pub finish_reason: Option<String>,
    /// `system_fingerprint` of the response body.
    pub system_fingerprint: Option<String>,
    /// HTTP status of the last attempt.
    pub http_status: Option<u16>,
    /// Attempts made (1 + retries).
    pub attempts: u32,
    /// Wall time of all attempts, in milliseconds.
    pub elapsed_ms: u64,
}

/// Build the record of `p` with outcome `o`.
pub(crate) fn make_record(p: &Planned, labels: &RunLabels, o: Outcome, now_ms: u64) -> Record {
    Record {
        format_version: FORMAT_VERSION,
        study: labels.study.clone(),
        model: labels.model.clone(),
        arm: labels.arm.clone(),
        cohort: labels.cohort.clone(),
        request: p.columns.clone(),
        reply: o.reply.unwrap_or_default(),
        error: o.error,
        label: labels.label.clone(),
        request_key: p.key.clone(),
        request_sha256: p.body_sha256.clone(),
        request_body: p.body.clone(),
        seed: p.seed,
        max_tokens: p.max_tokens,
        endpoint: labels.endpoint.clone(),
        response_model: o.response_model,
        usage: o.usage,
        finish_reason: o.finish_reason,
        system_fingerprint: o.system_fingerprint,
        http_status: o.http_status,
        attempts: o.attempts,
        elapsed_ms: o.elapsed_ms,
        received_unix_ms: now_ms,
    }
}

/// The records already in an output file.
#[derive(Debug, Default)]
pub(crate) struct Existing {
    /// All records in file order.
    pub(crate) records: Vec<Record>,
    /// Bytes of an incomplete last line (a run killed mid-write) that were cut off.
    pub(crate) truncated_bytes: usize,
}

/// Read an output file for resuming. A missing or empty file is empty.
///
/// The file must be one this command can resume: every complete line a record, and an
/// incomplete last line (no newline, as a kill mid-write leaves it) only after at least one
/// record or when it is the start of a record. Anything else is refused before the file is
/// touched. Only then is an incomplete last line cut off, so appends start on a fresh line.
pub(crate) fn load_existing(path: &Path) -> Result<Existing, AdministerError> {
    let bytes = match fs_err::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Existing::default()),
        Err(e) => return Err(e.into()),
    };
    let complete = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(p) => p + 1,
        None => 0,
    };
    let truncated_bytes = bytes.len() - complete;
    let not_ours = |line: usize, why: String| {
        AdministerError::Store {
        path: path.to_path_buf(),
        line,
        message: format!(
            "{why}; this is not a stored-answer file written by `protospread administer`, so it is left untouched: give another --to"
        ),
    }
    };
    let text = std::str::from_utf8(&bytes[..complete]).map_err(|e| {
        let line = bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        not_ours(line, format!("not UTF-8: {e}"))
    })?;
    let mut records = Vec::new();
    for (k, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let r: Record = serde_json::from_str(line)
            .map_err(|e| not_ours(k + 1, format!("not a record: {e}")))?;
        records.push(r);
    }
    if truncated_bytes > 0 {
        let tail = &bytes[complete..];
        // A record is serialized with `format_version` first; a cut first record starts so.
        let starts_a_record = tail.starts_with(b"{\"format_version\":");
        if records.is_empty() && !starts_a_record {
            let line = text.lines().count() + 1;
            return Err(not_ours(
                line,
                "the last line is incomplete and no complete record precedes it".into(),
            ));
        }
        let f = fs_err::OpenOptions::new().write(true).open(path)?;
        f.set_len(complete as u64)?;
        f.sync_all()?;
    }
    Ok(Existing {
        records,
        truncated_bytes,
    })
}

/// The exclusive lock of an output file, held while a run appends to it and rewrites it.
#[derive(Debug)]
pub(crate) struct OutputLock {
    _file: fs_err::File,
}

/// Refuse an output path that is not a regular file or a new path (a symlink, a folder, a
/// device such as `/dev/null`, a FIFO): records are appended to it and it is rewritten by a
/// rename at the end, which would write through a link or replace it with a diverging copy.
pub(crate) fn check_output_path(path: &Path) -> Result<(), AdministerError> {
    match fs_err::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() => Ok(()),
        Ok(m) => Err(AdministerError::Config(format!(
            "--to {}: not a regular file ({}); give a regular file or a new path, nothing was sent",
            path.display(),
            if m.file_type().is_symlink() {
                "a symlink"
            } else if m.is_dir() {
                "a folder"
            } else {
                "a device, FIFO or socket"
            }
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Lock `path` (created empty if missing) for this process; a second run on the same file is
/// refused instead of interleaving records.
pub(crate) fn lock_output(path: &Path) -> Result<OutputLock, AdministerError> {
    // Not through a link that appears after the check.
    let file = open_append(path)?;
    check_output_path(path)?;
    match file.try_lock() {
        Ok(()) => Ok(OutputLock { _file: file }),
        Err(std::fs::TryLockError::WouldBlock) => Err(AdministerError::Locked {
            path: path.to_path_buf(),
        }),
        // std's lock error does not name the file.
        Err(std::fs::TryLockError::Error(e)) => {
            Err(protospread_core::CoreError::io(path, e).into())
        }
    }
}

/// `path` opened to read and append, created (with its folder) when missing; never through a
/// symbolic link.
fn open_append(path: &Path) -> Result<fs_err::File, AdministerError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs_err::create_dir_all(dir)?;
    }
    Ok(fs_err::OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?)
}

/// One record per request key: the first answered record, else the last failure.
pub(crate) fn latest_by_key(records: Vec<Record>) -> BTreeMap<String, Record> {
    let mut out: BTreeMap<String, Record> = BTreeMap::new();
    for r in records {
        match out.get(&r.request_key) {
            Some(prev) if prev.answered() => {}
            _ => {
                out.insert(r.request_key.clone(), r);
            }
        }
    }
    out
}

/// Appends records one line at a time, flushed and synced, so a kill loses nothing written.
pub(crate) struct Appender {
    file: fs_err::File,
}

impl Appender {
    /// Open (create) `path` for appending.
    pub(crate) fn open(path: &Path) -> Result<Self, AdministerError> {
        Ok(Appender {
            file: open_append(path)?,
        })
    }

    /// Append one record as one line (a single write call) and sync it to disk.
    pub(crate) fn append(&mut self, r: &Record) -> Result<(), AdministerError> {
        let mut line = serde_json::to_string(r).expect("record serializes");
        line.push('\n');
        self.file.write_all(line.as_bytes())?;
        self.file.flush()?;
        Ok(self.file.sync_data()?)
    }
}

/// Rewrite `path` atomically with `records` one per line, in the given order.
pub(crate) fn write_all(path: &Path, records: &[Record]) -> Result<(), AdministerError> {
    let mut text = String::new();
    for r in records {
        text.push_str(&serde_json::to_string(r).expect("record serializes"));
        text.push('\n');
    }
    protospread_core::write_atomic(path, text.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(key: &str, error: Option<&str>) -> Record {
        let p = crate::plan::Planned {
            key: key.to_string(),
            columns: RequestColumns {
                condition: "S0".into(),
                sample: 1,
                test: "big_five".into(),
                mode: "single".into(),
                item: Some(1),
                item_order: None,
                order_seed: None,
                option_order: "human".into(),
                instruction: "P1".into(),
                temperature: 0.0,
            },
            max_tokens: 8,
            seed: None,
            body: "{}".into(),
            body_sha256: "x".into(),
            rank: 0,
        };
        let labels = RunLabels {
            study: "s".into(),
            model: "m".into(),
            arm: "api".into(),
            cohort: "c".into(),
            label: "recorded".into(),
            endpoint: "http://127.0.0.1:1/v1/chat/completions".into(),
        };
        let o = Outcome {
            reply: error.is_none().then(|| "3".to_string()),
            error: error.map(String::from),
            ..Outcome::default()
        };
        make_record(&p, &labels, o, 0)
    }

    #[test]
    fn request_columns_are_written_in_the_records_order_and_read_back() {
        let mut r = rec("a", None);
        r.request.item = None;
        r.request.item_order = Some(vec![3, 1, 2]);
        let line = serde_json::to_string(&r).unwrap();
        assert!(
            line.starts_with(
                "{\"format_version\":1,\"study\":\"s\",\"model\":\"m\",\"arm\":\"api\",\
                 \"cohort\":\"c\",\"condition\":\"S0\",\"sample\":1,\"test\":\"big_five\",\
                 \"mode\":\"single\",\"item\":null,\"item_order\":\"3;1;2\",\"order_seed\":null,\
                 \"option_order\":\"human\",\"instruction\":\"P1\",\"temperature\":0.0,\
                 \"reply\":\"3\",\"error\":null,\"label\":\"recorded\",\"x_request_key\":\"a\","
            ),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<Record>(&line).unwrap(), r);
        // An item order that is not numbers joined by `;` is not a record.
        let bad = line.replace("3;1;2", "3;x");
        let e = serde_json::from_str::<Record>(&bad)
            .unwrap_err()
            .to_string();
        assert!(e.contains("item_order `3;x`"), "{e}");
    }

    #[test]
    fn answered_record_wins_over_failures_in_any_order() {
        let recs = vec![rec("a", Some("e1")), rec("a", None), rec("a", Some("e2"))];
        assert!(latest_by_key(recs)["a"].answered());
        let recs = vec![rec("b", Some("e1")), rec("b", Some("e2"))];
        assert_eq!(latest_by_key(recs)["b"].error.as_deref(), Some("e2"));
    }

    #[test]
    fn partial_last_line_is_cut_and_a_bad_middle_line_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.jsonl");
        let line = serde_json::to_string(&rec("a", None)).unwrap();
        fs_err::write(&p, format!("{line}\n{{\"format_ver")).unwrap();
        let e = load_existing(&p).unwrap();
        assert_eq!((e.records.len(), e.truncated_bytes), (1, 12));
        assert_eq!(fs_err::read_to_string(&p).unwrap(), format!("{line}\n"));

        fs_err::write(&p, format!("{line}\nnot json\n{line}\n")).unwrap();
        let err = load_existing(&p).unwrap_err().to_string();
        assert!(err.contains("a.jsonl") && err.contains("line 2"), "{err}");
    }

    #[test]
    fn a_file_that_is_not_ours_is_refused_untouched() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("one.jsonl");
        for content in ["{\"a\":1}", "{\"a\":1}\n{\"b\":2}", "hello"] {
            fs_err::write(&p, content).unwrap();
            let err = load_existing(&p).unwrap_err().to_string();
            assert!(err.contains("not a stored-answer file"), "{err}");
            assert_eq!(fs_err::read_to_string(&p).unwrap(), content);
        }
        fs_err::write(&p, "{\"format_version\":1,\"mod").unwrap();
        assert_eq!(load_existing(&p).unwrap().truncated_bytes, 24);
    }

    #[test]
    fn second_lock_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.jsonl");
        let _l = lock_output(&p).unwrap();
        let e = lock_output(&p).unwrap_err().to_string();
        assert!(e.contains("another"), "{e}");
    }
}
