//! The native delimiter sweep: the dictionary-lookup task of Su et al., generated from a seed.
//!
//! A document is [`PAIRS`] key-value pairs (keys: distinct random 4-letter lowercase words;
//! values: distinct random numbers 100..=999) and one of its keys as the query. The prompt
//! shows the pairs as `key: value` demonstrations joined by the delimiter under test, then the
//! query key followed by `:` after one more delimiter, so the model is asked to complete the
//! last entry (see [`prompt`]). Document `i` depends only on `(seed, i)`: the same documents
//! are shown under every delimiter and variant, and `--n-docs` only adds or removes documents
//! at the end.
//!
//! Scoring ([`score`]): the reply is correct when its **first maximal run of ASCII digits**
//! equals the expected value exactly (string comparison). A reply without digits is wrong; a
//! reply that first mentions any other number (another key's value, "1." of a list) is wrong.
//!
//! Records ([`Record`]) are one JSON object per line; docs/sweep.md describes every field.

use crate::delimiter::Delimiter;
use crate::ingest::SampleRecord;
use crate::lmeval::naming_line;
use crate::{SweepError, SweepSpec};
use protospread_core::{read_line_limited, sha256_hex, Line, SweepVariant, MAX_RECORD_BYTES};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::Path;

/// Pairs listed in every document.
pub(crate) const PAIRS: usize = 6;
/// Version of the record format written by `protospread sweep dictionary`.
pub(crate) const FORMAT_VERSION: u32 = 1;
/// The `benchmark` of every dictionary result in the sweep tables.
pub(crate) const BENCHMARK: &str = "dictionary";
/// Reply length limit sent with every request: a 3-digit value plus a short preamble.
pub(crate) const MAX_TOKENS: u32 = 16;
/// The instruction line that opens every prompt.
pub(crate) const INSTRUCTION: &str =
    "Each entry below is a key, a colon and its value. Complete the last entry with the value of its key.";

/// One generated document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doc {
    /// 0-based index under the seed.
    pub index: u32,
    /// (key, value) in the order shown.
    pub pairs: Vec<(String, String)>,
    /// Index into `pairs` of the queried key.
    pub query: usize,
}

impl Doc {
    /// Key of the queried word.
    pub fn query_key(&self) -> &str {
        &self.pairs[self.query].0
    }
    /// The expected answer.
    pub fn expected(&self) -> &str {
        &self.pairs[self.query].1
    }
    /// sha256 of the document's canonical text (`key=value` pairs joined by `,`, then `?key`):
    /// the identity used to check that every delimiter variant saw the same documents.
    pub fn hash(&self) -> String {
        let pairs: Vec<String> = self.pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        sha256_hex(format!("{}?{}", pairs.join(","), self.query_key()).as_bytes())
    }
}

/// Document `index` under `seed`: a ChaCha8 stream seeded with `seed` on stream `index`.
pub(crate) fn doc(seed: u64, index: u32) -> Doc {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(u64::from(index));
    let mut keys = BTreeSet::new();
    let mut values = BTreeSet::new();
    let mut pairs = Vec::with_capacity(PAIRS);
    while pairs.len() < PAIRS {
        let key: String = (0..4)
            .map(|_| char::from(b'a' + rng.gen_range(0..26u8)))
            .collect();
        let value = rng.gen_range(100..1000u32).to_string();
        // Distinct keys and values keep the answer unique; redraw both on a clash.
        if keys.contains(&key) || values.contains(&value) {
            continue;
        }
        keys.insert(key.clone());
        values.insert(value.clone());
        pairs.push((key, value));
    }
    let query = rng.gen_range(0..PAIRS);
    Doc {
        index,
        pairs,
        query,
    }
}

/// Documents `0..n` under `seed`.
pub(crate) fn docs(seed: u64, n: u32) -> Vec<Doc> {
    (0..n).map(|i| doc(seed, i)).collect()
}

/// The user message for `doc` under delimiter `d` and `variant`:
///
/// ```text
/// [naming line, named variant only]\n
/// INSTRUCTION\n\n
/// k1: v1<d>k2: v2<d>...<d>k6: v6<d>query:
/// ```
pub(crate) fn prompt(
    doc: &Doc,
    d: &Delimiter,
    variant: SweepVariant,
    naming_template: &str,
) -> String {
    let mut s = String::new();
    if variant == SweepVariant::Named {
        s.push_str(&naming_line(naming_template, d));
        s.push('\n');
    }
    s.push_str(INSTRUCTION);
    s.push_str("\n\n");
    for (k, v) in &doc.pairs {
        s.push_str(&format!("{k}: {v}"));
        s.push_str(&d.text);
    }
    s.push_str(doc.query_key());
    s.push(':');
    s
}

/// The exact-match rule: the first maximal run of ASCII digits in `reply` equals `expected`.
pub fn score(reply: &str, expected: &str) -> bool {
    let Some(start) = reply.find(|c: char| c.is_ascii_digit()) else {
        return false;
    };
    let run: &str = &reply[start..];
    let end = run.find(|c: char| !c.is_ascii_digit()).unwrap_or(run.len());
    &run[..end] == expected
}

/// The request key: `dictionary/<seed>/<doc, 4 digits>/<delimiter slug>/<variant>`.
pub(crate) fn request_key(seed: u64, doc: u32, d: &Delimiter, v: SweepVariant) -> String {
    format!("dictionary/{seed}/{doc:04}/{}/{}", d.slug, v.as_str())
}

/// One planned request.
#[derive(Debug, Clone)]
pub struct Planned {
    /// Request key, unique per request.
    pub key: String,
    /// The document asked about.
    pub doc: Doc,
    /// Delimiter of the few-shot examples.
    pub delimiter: Delimiter,
    /// Plain or named delimiter.
    pub variant: SweepVariant,
    /// The chat-completions body exactly as sent.
    pub body: String,
    /// sha256 of `body`.
    pub body_sha256: String,
}

/// The request body: one user message, temperature 0, [`MAX_TOKENS`], `seed` = the task seed.
pub(crate) fn request_body(model: &str, content: &str, seed: u64) -> String {
    // serde_json's map is sorted by key (no preserve_order feature): a fixed byte order.
    serde_json::json!({
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "temperature": 0,
        "max_tokens": MAX_TOKENS,
        "seed": seed,
    })
    .to_string()
}

/// Every request of a run, document-major (doc, then delimiter in the given order, then
/// variant), so an interrupted run has whole documents for the early delimiters.
pub fn plan(
    model: &str,
    seed: u64,
    n_docs: u32,
    delimiters: &[Delimiter],
    variants: &[SweepVariant],
    naming_template: &str,
) -> Vec<Planned> {
    let mut out = Vec::new();
    for doc in docs(seed, n_docs) {
        for d in delimiters {
            for &v in variants {
                let body = request_body(model, &prompt(&doc, d, v, naming_template), seed);
                out.push(Planned {
                    key: request_key(seed, doc.index, d, v),
                    doc: doc.clone(),
                    delimiter: d.clone(),
                    variant: v,
                    body_sha256: sha256_hex(body.as_bytes()),
                    body,
                });
            }
        }
    }
    out
}

/// One stored request and its reply (one JSONL line).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// Record format version.
    pub format_version: u32,
    /// Always `dictionary`.
    pub task: String,
    /// Model id as sent.
    pub model: String,
    /// Seed of the plan.
    pub seed: u64,
    /// Document index.
    pub doc: u32,
    /// Delimiter as written.
    pub delimiter: String,
    /// File-name-safe delimiter slug.
    pub delimiter_slug: String,
    /// `plain` or `named`.
    pub variant: String,
    /// Unique per request.
    pub request_key: String,
    /// Key of the queried word.
    pub query_key: String,
    /// The expected answer.
    pub expected: String,
    /// The JSON body POSTed.
    pub request_body: String,
    /// sha256 of `request_body`.
    pub request_sha256: String,
    /// `choices[0].message.content`, or null when the request failed.
    pub reply: Option<String>,
    /// Why the request failed after its retries.
    pub error: Option<String>,
    /// `choices[0].finish_reason`.
    pub finish_reason: Option<String>,
    /// `model` of the response body.
    pub response_model: Option<String>,
    /// HTTP status of the last attempt.
    pub http_status: Option<u16>,
    /// Attempts made.
    pub attempts: u32,
    /// Wall time of all attempts, in milliseconds.
    pub elapsed_ms: u64,
    /// [`score`] of the reply at recording time (null when unanswered); the tables recompute
    /// it from `reply` and `expected` and refuse a file where the two disagree.
    pub correct: Option<bool>,
}

impl Record {
    /// The record of `p` with its outcome.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        p: &Planned,
        model: &str,
        seed: u64,
        reply: Option<String>,
        error: Option<String>,
        finish_reason: Option<String>,
        response_model: Option<String>,
        http_status: Option<u16>,
        attempts: u32,
        elapsed_ms: u64,
    ) -> Self {
        let correct = reply.as_deref().map(|r| score(r, p.doc.expected()));
        Record {
            format_version: FORMAT_VERSION,
            task: BENCHMARK.to_string(),
            model: model.to_string(),
            seed,
            doc: p.doc.index,
            delimiter: p.delimiter.text.clone(),
            delimiter_slug: p.delimiter.slug.clone(),
            variant: p.variant.as_str().to_string(),
            request_key: p.key.clone(),
            query_key: p.doc.query_key().to_string(),
            expected: p.doc.expected().to_string(),
            request_body: p.body.clone(),
            request_sha256: p.body_sha256.clone(),
            reply,
            error,
            finish_reason,
            response_model,
            http_status,
            attempts,
            elapsed_ms,
            correct,
        }
    }

    /// Whether the request got a reply.
    pub fn answered(&self) -> bool {
        self.reply.is_some() && self.error.is_none()
    }

    /// One JSON line with its newline.
    pub fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self).expect("records serialize");
        s.push('\n');
        s
    }
}

impl protospread_administer::StoredRequest for Record {
    fn request_key(&self) -> &str {
        &self.request_key
    }
    fn request_sha256(&self) -> &str {
        &self.request_sha256
    }
    fn answered(&self) -> bool {
        Record::answered(self)
    }
}

/// What [`record`] did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RunSummary {
    /// Requests planned.
    pub planned: usize,
    /// Planned requests already answered in the file.
    pub already_answered: usize,
    /// Requests sent.
    pub sent: usize,
    /// Requests that failed.
    pub failed: usize,
    /// Records in the file afterwards.
    pub records_in_file: usize,
    /// Correct replies in the file.
    pub correct: usize,
}

/// Send the planned requests that `out` has not answered yet to `client`, one at a time,
/// with the administer crate's resume rule and store
/// ([`protospread_administer::run_resumable`]): each record is appended and flushed
/// as it arrives, an answered key sent with another body is an error, and when every request
/// was handled `out` is rewritten atomically in plan order. `progress(record, sent, failed)`
/// is called after each reply.
pub fn record(
    client: &protospread_administer::Client,
    planned: &[Planned],
    model: &str,
    seed: u64,
    out: &Path,
    progress: impl FnMut(&Record, usize, usize),
) -> Result<RunSummary, SweepError> {
    let loaded = load(out)?;
    let r = protospread_administer::run_resumable(
        out,
        loaded.records,
        loaded.truncated_bytes,
        planned,
        |p| (p.key.as_str(), p.body_sha256.as_str()),
        |p| {
            let o = client.send(&p.body);
            Record::new(
                p,
                model,
                seed,
                o.reply,
                o.error,
                o.finish_reason,
                o.response_model,
                o.http_status,
                o.attempts,
                o.elapsed_ms,
            )
        },
        progress,
    )?;
    Ok(RunSummary {
        planned: planned.len(),
        already_answered: r.already_answered,
        sent: r.sent,
        failed: r.failed,
        records_in_file: r.records.len(),
        correct: r.records.iter().filter(|x| x.correct == Some(true)).count(),
    })
}

/// What a records file holds.
#[derive(Debug, Clone, Default)]
pub(crate) struct Loaded {
    /// Records, in file order.
    pub(crate) records: Vec<Record>,
    /// Bytes of an incomplete last line (no newline: an interrupted append), not parsed.
    pub(crate) truncated_bytes: usize,
}

fn variant_from(s: &str) -> Option<SweepVariant> {
    match s {
        "plain" => Some(SweepVariant::Plain),
        "named" => Some(SweepVariant::Named),
        _ => None,
    }
}

/// Read a records file (missing file: empty). Every complete line must be a [`Record`] of at
/// most `protospread_core::MAX_RECORD_BYTES`; the file is read a line at a time.
pub(crate) fn load(path: &Path) -> Result<Loaded, SweepError> {
    let file = match fs_err::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Loaded::default()),
        Err(e) => return Err(SweepError::Fs(e)),
    };
    let mut reader = std::io::BufReader::new(file);
    let mut buf = Vec::new();
    let mut records = Vec::new();
    for line in 1.. {
        match read_line_limited(&mut reader, &mut buf, MAX_RECORD_BYTES).map_err(SweepError::Fs)? {
            Line::End => break,
            Line::TooLong => return Err(crate::ingest::too_long(path, line)),
            Line::Read => {}
        }
        let Some(complete) = buf.strip_suffix(b"\n") else {
            return Ok(Loaded {
                records,
                truncated_bytes: buf.len(),
            });
        };
        let complete = complete.strip_suffix(b"\r").unwrap_or(complete);
        let text = std::str::from_utf8(complete).map_err(|e| SweepError::Malformed {
            file: path.to_path_buf(),
            line,
            message: format!("not UTF-8: {e}"),
        })?;
        let r: Record = serde_json::from_str(text).map_err(|e| SweepError::Malformed {
            file: path.to_path_buf(),
            line,
            message: format!("not a dictionary record: {e}"),
        })?;
        if r.format_version != FORMAT_VERSION || r.task != BENCHMARK {
            return Err(SweepError::Malformed {
                file: path.to_path_buf(),
                line,
                message: format!(
                    "format_version {} task {:?}: expected {FORMAT_VERSION} and {BENCHMARK:?}",
                    r.format_version, r.task
                ),
            });
        }
        records.push(r);
    }
    Ok(Loaded {
        records,
        truncated_bytes: 0,
    })
}

/// Turn a records file into per-document results, checking each record against the
/// generator: the document regenerated from `(seed, doc)` must give the stored query key and
/// expected value, the stored request's user message must be the prompt rebuilt with
/// `spec.naming_template`, and the stored `correct` must equal [`score`] of the reply.
/// A mismatch, an unanswered request, a key stored twice, or a delimiter outside the
/// configuration is an error naming the file and line.
pub(crate) fn ingest(path: &Path, spec: &SweepSpec) -> Result<Vec<SampleRecord>, SweepError> {
    let loaded = load(path)?;
    let bad = |line: usize, message: String| SweepError::Malformed {
        file: path.to_path_buf(),
        line,
        message,
    };
    if loaded.truncated_bytes > 0 {
        return Err(bad(
            loaded.records.len() + 1,
            "incomplete last line (an interrupted recording; rerun it to complete the file)".into(),
        ));
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (i, r) in loaded.records.iter().enumerate() {
        let line = i + 1;
        if !seen.insert(r.request_key.clone()) {
            return Err(bad(line, format!("request {} stored twice", r.request_key)));
        }
        if !r.answered() {
            return Err(bad(
                line,
                format!(
                    "request {} has no reply ({}); rerun the recording to complete it",
                    r.request_key,
                    r.error.as_deref().unwrap_or("no error given")
                ),
            ));
        }
        let d = spec
            .delimiters
            .iter()
            .find(|d| d.text == r.delimiter)
            .ok_or_else(|| {
                bad(
                    line,
                    format!(
                        "delimiter {} is not in [sweep] delimiters",
                        crate::delimiter::quoted(&r.delimiter)
                    ),
                )
            })?;
        let v = variant_from(&r.variant).ok_or_else(|| {
            bad(
                line,
                format!("variant {:?} is not plain or named", r.variant),
            )
        })?;
        let doc = doc(r.seed, r.doc);
        let want_key = request_key(r.seed, r.doc, d, v);
        if r.delimiter_slug != d.slug || r.request_key != want_key {
            return Err(bad(
                line,
                format!("request_key {} should be {want_key}", r.request_key),
            ));
        }
        if r.query_key != doc.query_key() || r.expected != doc.expected() {
            return Err(bad(
                line,
                format!(
                    "query {}={} differs from the generated document ({}={})",
                    r.query_key,
                    r.expected,
                    doc.query_key(),
                    doc.expected()
                ),
            ));
        }
        let body: serde_json::Value = serde_json::from_str(&r.request_body)
            .map_err(|e| bad(line, format!("request_body is not JSON: {e}")))?;
        let content = body["messages"][0]["content"].as_str().unwrap_or_default();
        if content != prompt(&doc, d, v, &spec.naming_template) {
            return Err(bad(
                line,
                "the stored prompt differs from the one generated now (another naming_template or generator?)".into(),
            ));
        }
        if sha256_hex(r.request_body.as_bytes()) != r.request_sha256 {
            return Err(bad(
                line,
                "request_sha256 does not match request_body".into(),
            ));
        }
        let reply = r.reply.as_deref().unwrap_or_default();
        let correct = score(reply, &r.expected);
        if r.correct != Some(correct) {
            return Err(bad(
                line,
                format!(
                    "stored correct = {:?} but the reply scores {correct}",
                    r.correct
                ),
            ));
        }
        out.push(SampleRecord {
            model: r.model.clone(),
            benchmark: BENCHMARK.to_string(),
            subset: String::new(),
            delimiter: d.clone(),
            variant: v,
            doc_id: u64::from(r.doc),
            doc_hash: doc.hash(),
            correct,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_line_over_the_record_limit_is_refused_naming_it() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("records.jsonl");
        let mut text = "x".repeat(protospread_core::MAX_RECORD_BYTES + 1);
        text.push('\n');
        fs_err::write(&p, text).unwrap();
        let Err(e) = load(&p) else {
            panic!("a line over the limit was read")
        };
        let e = e.to_string();
        assert!(
            e.contains("records.jsonl: line 1: record over the limit of 64 MiB"),
            "{e}"
        );
        // An incomplete last line is counted, not parsed, as before.
        fs_err::write(&p, "{\"format_version\"").unwrap();
        assert_eq!(load(&p).unwrap().truncated_bytes, 17);
    }

    #[test]
    fn score_rule_table() {
        for (reply, want) in [
            ("417", true),
            (" 417\n", true),
            ("The value is 417.", true),
            ("417 or 902", true),
            ("4170", false),
            ("0417", false),
            ("902, not 417", false),
            ("41 7", false),
            ("four hundred seventeen", false),
            ("", false),
            ("key3: 417", false),
            ("１２３", false),
        ] {
            assert_eq!(score(reply, "417"), want, "{reply:?}");
        }
    }

    #[test]
    fn docs_are_well_formed_and_prefix_stable() {
        let a = docs(7, 50);
        let b = docs(7, 10);
        assert_eq!(&a[..10], &b[..]);
        assert_ne!(docs(8, 10), b);
        for d in &a {
            let keys: BTreeSet<_> = d.pairs.iter().map(|p| &p.0).collect();
            let vals: BTreeSet<_> = d.pairs.iter().map(|p| &p.1).collect();
            assert_eq!((keys.len(), vals.len()), (PAIRS, PAIRS));
            for (k, v) in &d.pairs {
                assert!(k.len() == 4 && k.bytes().all(|c| c.is_ascii_lowercase()));
                assert!(v.len() == 3 && (100..1000).contains(&v.parse::<u32>().unwrap()));
            }
            assert!(d.query < PAIRS);
        }
    }

    #[test]
    fn prompt_layout() {
        let d = Doc {
            index: 0,
            pairs: vec![("abcd".into(), "123".into()), ("wxyz".into(), "456".into())],
            query: 1,
        };
        let semi = Delimiter::new(";").unwrap();
        assert_eq!(
            prompt(&d, &semi, SweepVariant::Plain, "Sep {delimiter}."),
            format!("{INSTRUCTION}\n\nabcd: 123;wxyz: 456;wxyz:")
        );
        let nl = Delimiter::new("\n").unwrap();
        assert_eq!(
            prompt(&d, &nl, SweepVariant::Named, "Sep {delimiter_name}."),
            format!("Sep newline.\n{INSTRUCTION}\n\nabcd: 123\nwxyz: 456\nwxyz:")
        );
    }
}
