//! Reading lm-evaluation-harness output folders and checking them for a sweep.
//!
//! lm-eval 0.4.13 with `--output_path OUT --log_samples` writes, per model, a folder
//! `OUT/<model, sanitized>/` holding `results_<date_id>.json` and, for every leaf task,
//! `samples_<task>_<date_id>.jsonl` with the same `<date_id>` (an ISO time with `:` as `-`).
//! A results file names the model (`model_name`, else `config.model_args`), the tasks and
//! their configs (`configs.<task>.fewshot_delimiter`), and whether few-shot examples were
//! sent as separate turns (`fewshot_as_multiturn`). Each samples line is one document:
//! `doc_id`, `doc`, `target`, `arguments`, `resps`, `filtered_resps`, `filter`, `metrics`,
//! `doc_hash`, `prompt_hash`, `target_hash`, then one key per metric (e.g. `acc`).

use crate::delimiter::Delimiter;
use crate::lmeval::parse_task_name;
use crate::{SweepError, SweepSpec};
use protospread_core::config::SweepVariant;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One document's result under one delimiter and variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleRecord {
    pub model: String,
    pub benchmark: String,
    /// MMLU subject, or "".
    pub subset: String,
    pub delimiter: Delimiter,
    pub variant: SweepVariant,
    pub doc_id: u64,
    /// lm-eval's sha256 of the document JSON: the identity used to compare document sets.
    pub doc_hash: String,
    pub correct: bool,
}

/// What one ingestion found.
#[derive(Debug, Clone, Default)]
pub struct Ingested {
    pub records: Vec<SampleRecord>,
    /// Problems that make the sweep's comparison unsound (each a one-line message).
    pub problems: Vec<String>,
    /// Harmless observations (tasks that are not part of a sweep, ...).
    pub notes: Vec<String>,
    /// Samples files read, relative to the ingested folder.
    pub files_read: Vec<String>,
}

/// The fields lm-eval writes on every samples line.
pub const SAMPLE_FIELDS: [&str; 11] = [
    "doc_id",
    "doc",
    "target",
    "arguments",
    "resps",
    "filtered_resps",
    "filter",
    "metrics",
    "doc_hash",
    "prompt_hash",
    "target_hash",
];

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), SweepError> {
    let rd = std::fs::read_dir(dir).map_err(|e| SweepError::io(dir, e))?;
    let mut entries = Vec::new();
    for e in rd {
        entries.push(e.map_err(|e| SweepError::io(dir, e))?.path());
    }
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out)?;
        } else {
            out.push(p);
        }
    }
    Ok(())
}

/// The model a results file names: `model_name`, else the `pretrained=` (or `model=`, ...)
/// entry of `config.model_args` (a string or an object), the same keys lm-eval uses.
fn model_of(results: &Value, file: &Path) -> Result<String, SweepError> {
    if let Some(m) = results.get("model_name").and_then(Value::as_str) {
        if !m.is_empty() {
            return Ok(m.to_string());
        }
    }
    let args = results.get("config").and_then(|c| c.get("model_args"));
    const KEYS: [&str; 6] = ["peft", "delta", "pretrained", "model", "path", "engine"];
    match args {
        Some(Value::Object(o)) => {
            for k in KEYS {
                if let Some(v) = o.get(k).and_then(Value::as_str) {
                    return Ok(v.to_string());
                }
            }
        }
        Some(Value::String(s)) => {
            for k in KEYS {
                for part in s.split(',') {
                    if let Some(v) = part.trim().strip_prefix(&format!("{k}=")) {
                        return Ok(v.to_string());
                    }
                }
            }
        }
        _ => {}
    }
    Err(SweepError::Malformed {
        file: file.to_path_buf(),
        line: 0,
        message: "no model: neither `model_name` nor a `pretrained=`/`model=` entry in `config.model_args`".into(),
    })
}

fn malformed(file: &Path, line: usize, message: impl Into<String>) -> SweepError {
    SweepError::Malformed {
        file: file.to_path_buf(),
        line,
        message: message.into(),
    }
}

/// Parse one samples file. `line` numbers in errors are 1-based.
pub fn read_samples(
    file: &Path,
    metric: &str,
) -> Result<Vec<(u64, String, bool, String)>, SweepError> {
    let text = std::fs::read(file).map_err(|e| SweepError::io(file, e))?;
    let text = String::from_utf8(text).map_err(|e| {
        malformed(
            file,
            0,
            format!("not UTF-8 at byte {}", e.utf8_error().valid_up_to()),
        )
    })?;
    let mut out = Vec::new();
    let mut seen = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let ln = i + 1;
        if line.trim().is_empty() {
            return Err(malformed(file, ln, "empty line"));
        }
        let v: Value = serde_json::from_str(line)
            .map_err(|e| malformed(file, ln, format!("not JSON: {e}")))?;
        let o = v
            .as_object()
            .ok_or_else(|| malformed(file, ln, "not a JSON object"))?;
        for f in SAMPLE_FIELDS {
            if !o.contains_key(f) {
                return Err(malformed(file, ln, format!("missing field `{f}`")));
            }
        }
        let doc_id = o["doc_id"]
            .as_u64()
            .ok_or_else(|| malformed(file, ln, "`doc_id` is not a non-negative integer"))?;
        let doc_hash = o["doc_hash"]
            .as_str()
            .filter(|h| protospread_core::hash::is_sha256_hex(h))
            .ok_or_else(|| malformed(file, ln, "`doc_hash` is not a lowercase sha256"))?
            .to_string();
        let filter = o["filter"]
            .as_str()
            .ok_or_else(|| malformed(file, ln, "`filter` is not a string"))?
            .to_string();
        let metrics = o["metrics"]
            .as_array()
            .ok_or_else(|| malformed(file, ln, "`metrics` is not a list"))?;
        if !metrics.iter().any(|m| m.as_str() == Some(metric)) {
            return Err(malformed(
                file,
                ln,
                format!("metric `{metric}` is not in `metrics`"),
            ));
        }
        let correct = match o.get(metric) {
            Some(Value::Bool(b)) => *b,
            Some(Value::Number(n)) if n.as_f64() == Some(1.0) => true,
            Some(Value::Number(n)) if n.as_f64() == Some(0.0) => false,
            Some(other) => {
                return Err(malformed(
                    file,
                    ln,
                    format!("`{metric}` is {other}, expected 0 or 1"),
                ))
            }
            None => return Err(malformed(file, ln, format!("missing field `{metric}`"))),
        };
        if let Some(prev) = seen.insert((doc_id, filter.clone()), ln) {
            return Err(malformed(
                file,
                ln,
                format!("doc_id {doc_id} (filter {filter}) already on line {prev}"),
            ));
        }
        out.push((doc_id, doc_hash, correct, filter));
    }
    Ok(out)
}

/// Read every lm-eval results file below `dir` and the samples files that belong to them.
/// Malformed files are errors; everything that makes the sweep incomparable is collected
/// in [`Ingested::problems`] (see [`check`]).
pub fn ingest_lm_eval(dir: &Path, spec: &SweepSpec) -> Result<Ingested, SweepError> {
    let mut files = Vec::new();
    walk(dir, &mut files)?;
    let mut ing = Ingested::default();
    let mut claimed: BTreeSet<PathBuf> = BTreeSet::new();
    // (model, task) -> results file, to catch a task ingested twice.
    let mut origin: BTreeMap<(String, String), PathBuf> = BTreeMap::new();
    for f in &files {
        let name = f.file_name().map(|n| n.to_string_lossy().into_owned());
        let Some(date_id) = name
            .as_deref()
            .and_then(|n| n.strip_prefix("results_"))
            .and_then(|n| n.strip_suffix(".json"))
        else {
            continue;
        };
        let bytes = std::fs::read(f).map_err(|e| SweepError::io(f, e))?;
        let results: Value = serde_json::from_slice(&bytes)
            .map_err(|e| malformed(f, e.line(), format!("not JSON: {e}")))?;
        let model = model_of(&results, f)?;
        let rel = protospread_core::hash::rel_path(dir, f);
        if results.get("fewshot_as_multiturn") == Some(&Value::Bool(true)) {
            ing.problems.push(format!(
                "{rel}: run with fewshot_as_multiturn = true: the delimiter was not in the prompt (rerun with --fewshot_as_multiturn false)"
            ));
        }
        if results.get("chat_template").is_none_or(Value::is_null) {
            ing.notes.push(format!(
                "{rel}: no chat template recorded (run without --apply_chat_template?): the examples were not inside a user message"
            ));
        }
        let configs = results
            .get("configs")
            .and_then(Value::as_object)
            .ok_or_else(|| malformed(f, 0, "no `configs` object"))?;
        let folder = f.parent().unwrap_or(Path::new("."));
        for (task, cfg) in configs {
            let Some(id) = parse_task_name(task) else {
                ing.notes.push(format!(
                    "{rel}: task {task} is not a delimiter-sweep task; skipped"
                ));
                continue;
            };
            if let Some(fd) = cfg.get("fewshot_delimiter").and_then(Value::as_str) {
                if fd != id.delimiter.text {
                    ing.problems.push(format!(
                        "{rel}: task {task} ran with fewshot_delimiter {} but its name says {}",
                        crate::delimiter::quoted(fd),
                        id.delimiter.quoted()
                    ));
                }
            }
            let sfile = folder.join(format!("samples_{task}_{date_id}.jsonl"));
            if !sfile.is_file() {
                ing.problems.push(format!(
                    "{rel}: task {task} has no samples file {} (run lm_eval with --log_samples)",
                    protospread_core::hash::rel_path(dir, &sfile)
                ));
                continue;
            }
            claimed.insert(sfile.clone());
            if let Some(prev) = origin.insert((model.clone(), task.clone()), f.clone()) {
                ing.problems.push(format!(
                    "model {model}, task {task}: results in both {} and {rel}; keep one run",
                    protospread_core::hash::rel_path(dir, &prev)
                ));
                continue;
            }
            let rows = read_samples(&sfile, &spec.metric)?;
            let filters: BTreeSet<&str> = rows.iter().map(|r| r.3.as_str()).collect();
            if filters.len() > 1 {
                ing.problems.push(format!(
                    "{}: several filters ({}); a sweep needs one",
                    protospread_core::hash::rel_path(dir, &sfile),
                    filters.into_iter().collect::<Vec<_>>().join(", ")
                ));
                continue;
            }
            ing.files_read
                .push(protospread_core::hash::rel_path(dir, &sfile));
            for (doc_id, doc_hash, correct, _) in rows {
                ing.records.push(SampleRecord {
                    model: model.clone(),
                    benchmark: id.benchmark.clone(),
                    subset: id.subset.clone(),
                    delimiter: id.delimiter.clone(),
                    variant: id.variant,
                    doc_id,
                    doc_hash,
                    correct,
                });
            }
        }
    }
    for f in &files {
        let n = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if n.starts_with("samples_") && n.ends_with(".jsonl") && !claimed.contains(f) {
            ing.notes.push(format!(
                "{}: no results file of the same run names it; not read",
                protospread_core::hash::rel_path(dir, f)
            ));
        }
    }
    Ok(ing)
}

/// Check that the records form a complete sweep: every (model, benchmark) has every
/// configured delimiter x variant, no delimiter outside the configuration, and every
/// variant saw the same documents (the same set of (subject, doc_hash)). Returns one
/// message per problem, sorted.
pub fn check(records: &[SampleRecord], spec: &SweepSpec) -> Vec<String> {
    type Cell = (String, SweepVariant);
    type DocSet = BTreeSet<(String, String)>;
    let mut docs: BTreeMap<(String, String), BTreeMap<Cell, DocSet>> = BTreeMap::new();
    let mut problems = Vec::new();
    let mut twice: BTreeSet<(&str, &str, &str, SweepVariant, &str, &str)> = BTreeSet::new();
    let mut dup_cells: BTreeMap<(String, String, String, SweepVariant), usize> = BTreeMap::new();
    for r in records {
        let key = (
            r.model.as_str(),
            r.benchmark.as_str(),
            r.delimiter.slug.as_str(),
            r.variant,
            r.subset.as_str(),
            r.doc_hash.as_str(),
        );
        if !twice.insert(key) {
            *dup_cells
                .entry((
                    r.model.clone(),
                    r.benchmark.clone(),
                    r.delimiter.slug.clone(),
                    r.variant,
                ))
                .or_insert(0usize) += 1;
        }
        docs.entry((r.model.clone(), r.benchmark.clone()))
            .or_default()
            .entry((r.delimiter.slug.clone(), r.variant))
            .or_default()
            .insert((r.subset.clone(), r.doc_hash.clone()));
    }
    for ((model, bench, slug, v), n) in &dup_cells {
        problems.push(format!(
            "model {model}, {bench}: delimiter {slug} variant {}: {n} document(s) ingested twice (two runs of the same task?)",
            v.as_str()
        ));
    }
    let configured: BTreeSet<Cell> = spec
        .delimiters
        .iter()
        .flat_map(|d| spec.variants.iter().map(|v| (d.slug.clone(), *v)))
        .collect();
    for ((model, bench), cells) in &docs {
        for d in &spec.delimiters {
            for v in &spec.variants {
                if !cells.contains_key(&(d.slug.clone(), *v)) {
                    problems.push(format!(
                        "model {model}, {bench}: delimiter {} ({}) variant {} is missing",
                        d.quoted(),
                        d.slug,
                        v.as_str()
                    ));
                }
            }
        }
        for (slug, v) in cells.keys() {
            if !configured.contains(&(slug.clone(), *v)) {
                problems.push(format!(
                    "model {model}, {bench}: delimiter {slug} variant {} is not in [sweep] delimiters x variants",
                    v.as_str()
                ));
            }
        }
        let union: BTreeSet<&(String, String)> = cells.values().flatten().collect();
        for ((slug, v), set) in cells {
            if set.len() != union.len() {
                let missing: Vec<String> = union
                    .iter()
                    .filter(|k| !set.contains(**k))
                    .take(3)
                    .map(|(s, h)| {
                        if s.is_empty() {
                            h[..12].to_string()
                        } else {
                            format!("{s}/{}", &h[..12])
                        }
                    })
                    .collect();
                problems.push(format!(
                    "model {model}, {bench}: delimiter {slug} variant {} saw {} of the {} documents seen by any variant (missing e.g. doc_hash {})",
                    v.as_str(),
                    set.len(),
                    union.len(),
                    missing.join(", ")
                ));
            }
        }
    }
    problems.sort();
    problems
}
