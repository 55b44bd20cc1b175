//! Reading lm-evaluation-harness output folders and checking them for a sweep.
//!
//! lm-eval 0.4.13 with `--output_path OUT --log_samples` writes, per model, a folder
//! `OUT/<model, sanitized>/` holding `results_<date_id>.json` and, for every leaf task,
//! `samples_<task>_<date_id>.jsonl` with the same `<date_id>` (an ISO time with `:` as `-`).
//! A results file names the model (`model_name`, else `config.model_args`), and records every
//! task's configuration under `configs.<task>`: `fewshot_delimiter`, `description`,
//! `metric_list`, `filter_list`, the data set. That configuration, not the task's name, tells
//! which delimiter and variant a task ran, so any task naming works. Each samples line is one
//! document under one filter: `doc_id`, `doc`, `target`, `arguments`, `resps`,
//! `filtered_resps`, `filter`, `metrics`, `doc_hash`, `prompt_hash`, `target_hash`, then one
//! key per metric (e.g. `exact_match`).
//!
//! Samples are read line by line into Arrow column builders (one record batch per task), so
//! a million-sample sweep never becomes a million structs.

use crate::delimiter::Delimiter;
use crate::lmeval::{naming_line, parse_task_name, MMLU_SUBJECTS};
use crate::{SweepError, SweepSpec};
use arrow::array::{
    Array, BooleanArray, BooleanBuilder, StringBuilder, UInt64Array, UInt64Builder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use protospread_core::{rel_path, SweepVariant};
use protospread_core::{Line, MAX_RECORD_BYTES};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One document's result under one delimiter and variant (the native dictionary sweep's
/// records; lm-eval samples go straight to [`TaskSamples`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleRecord {
    /// Model id.
    pub model: String,
    /// Benchmark name.
    pub benchmark: String,
    /// MMLU subject, or "".
    pub subset: String,
    /// Delimiter of the task.
    pub delimiter: Delimiter,
    /// Plain or named delimiter.
    pub variant: SweepVariant,
    /// Document id within the benchmark.
    pub doc_id: u64,
    /// sha256 of the document: the identity used to compare document sets.
    pub doc_hash: String,
    /// Whether the model's answer was right.
    pub correct: bool,
}

/// The per-document columns of one task of one run: `doc_id` (UInt64), `doc_hash` (Utf8),
/// `correct` (Boolean), none nullable.
pub(crate) fn docs_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("doc_id", DataType::UInt64, false),
        Field::new("doc_hash", DataType::Utf8, false),
        Field::new("correct", DataType::Boolean, false),
    ]))
}

/// Every document of one task of one run, as columns, with what the run's configuration
/// says about it.
#[derive(Debug, Clone)]
pub struct TaskSamples {
    /// Where the run came from: the configured folder or record file (or input name).
    pub source: String,
    /// `recorded` for a real run, or the `[[inputs]]` label of a record file.
    pub label: String,
    /// The run's identity: the results (or record) file, canonical path.
    pub run: PathBuf,
    /// The task as the run named it.
    pub task: String,
    /// Model id.
    pub model: String,
    /// Benchmark name.
    pub benchmark: String,
    /// MMLU subject (pooled into benchmark `mmlu`), or "".
    pub subset: String,
    /// Delimiter of the task.
    pub delimiter: Delimiter,
    /// Plain or named delimiter.
    pub variant: SweepVariant,
    /// `metric,filter` as lm-eval keys it in the results (`exact_match,first_number`).
    pub metric: String,
    /// Columns of [`docs_schema`].
    pub docs: RecordBatch,
}

impl TaskSamples {
    /// Documents.
    pub fn n(&self) -> u64 {
        self.docs.num_rows() as u64
    }

    /// Correct documents.
    pub fn correct(&self) -> u64 {
        self.correct_column().true_count() as u64
    }

    fn doc_ids(&self) -> &UInt64Array {
        self.docs
            .column(0)
            .as_any()
            .downcast_ref()
            .expect("docs_schema column 0 is UInt64")
    }

    fn doc_hashes(&self) -> &arrow::array::StringArray {
        self.docs
            .column(1)
            .as_any()
            .downcast_ref()
            .expect("docs_schema column 1 is Utf8")
    }

    fn correct_column(&self) -> &BooleanArray {
        self.docs
            .column(2)
            .as_any()
            .downcast_ref()
            .expect("docs_schema column 2 is Boolean")
    }

    /// Group per-document records (the dictionary sweep's) into one entry per model,
    /// benchmark, subset, delimiter and variant, in record order.
    pub fn from_records(
        records: &[SampleRecord],
        source: &str,
        label: &str,
        run: &Path,
    ) -> Vec<TaskSamples> {
        type Key = (String, String, String, String, SweepVariant);
        let mut groups: BTreeMap<Key, (Delimiter, DocColumns)> = BTreeMap::new();
        for r in records {
            let e = groups
                .entry((
                    r.model.clone(),
                    r.benchmark.clone(),
                    r.subset.clone(),
                    r.delimiter.slug.clone(),
                    r.variant,
                ))
                .or_insert_with(|| (r.delimiter.clone(), DocColumns::default()));
            e.1.push(r.doc_id, &r.doc_hash, r.correct);
        }
        groups
            .into_iter()
            .map(
                |((model, benchmark, subset, slug, variant), (delimiter, cols))| TaskSamples {
                    source: source.to_string(),
                    label: label.to_string(),
                    run: run.to_path_buf(),
                    task: format!("{benchmark}/{slug}/{}", variant.as_str()),
                    model,
                    benchmark,
                    subset,
                    delimiter,
                    variant,
                    metric: "correct".into(),
                    docs: cols.finish(),
                },
            )
            .collect()
    }
}

#[derive(Default)]
struct DocColumns {
    doc_id: UInt64Builder,
    doc_hash: StringBuilder,
    correct: BooleanBuilder,
}

impl DocColumns {
    fn push(&mut self, doc_id: u64, doc_hash: &str, correct: bool) {
        self.doc_id.append_value(doc_id);
        self.doc_hash.append_value(doc_hash);
        self.correct.append_value(correct);
    }

    fn finish(mut self) -> RecordBatch {
        RecordBatch::try_new(
            docs_schema(),
            vec![
                Arc::new(self.doc_id.finish()),
                Arc::new(self.doc_hash.finish()),
                Arc::new(self.correct.finish()),
            ],
        )
        .expect("three non-null columns of equal length")
    }
}

/// What one ingestion found.
#[derive(Debug, Clone, Default)]
pub struct Ingested {
    /// Samples, per task.
    pub samples: Vec<TaskSamples>,
    /// Problems that make the sweep's comparison unsound (each a one-line message).
    pub problems: Vec<String>,
    /// Harmless observations.
    pub notes: Vec<String>,
    /// Cells of the sweep's grid that no run holds, and cells of a run outside a declared
    /// grid (each a one-line message). The cells present still form tables.
    pub missing: Vec<String>,
    /// Samples files read, relative to the ingested folder.
    pub files_read: Vec<String>,
}

impl Ingested {
    /// Documents read, over every task.
    pub fn documents(&self) -> u64 {
        self.samples.iter().map(TaskSamples::n).sum()
    }
}

/// The fields lm-eval writes on every samples line.
pub(crate) const SAMPLE_FIELDS: [&str; 11] = [
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
    let mut entries = Vec::new();
    for e in fs_err::read_dir(dir).map_err(SweepError::Fs)? {
        entries.push(e.map_err(SweepError::Fs)?.path());
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
    Err(malformed(
        file,
        0,
        "no model: neither `model_name` nor a `pretrained=`/`model=` entry in `config.model_args`",
    ))
}

/// A line (or, for line 0, a whole JSON document) over the record size limit.
pub(crate) fn too_long(file: &Path, line: usize) -> SweepError {
    let t = protospread_core::TooLarge {
        what: protospread_core::Limited::Record,
        size: MAX_RECORD_BYTES as u64 + 1,
        exact: false,
        place: protospread_core::Place::File,
    };
    malformed(file, line, t.to_string())
}

fn malformed(file: &Path, line: usize, message: impl Into<String>) -> SweepError {
    SweepError::Malformed {
        file: file.to_path_buf(),
        line,
        message: message.into(),
    }
}

/// Read one samples file into [`docs_schema`] columns, keeping the lines of `filter` and
/// scoring each document by `metric` (0/1 or a boolean). Line numbers in errors are 1-based.
/// A `doc_id` twice under the filter is an error: one run scores each document once.
pub(crate) fn read_samples(
    file: &Path,
    metric: &str,
    filter: &str,
) -> Result<RecordBatch, SweepError> {
    let mut reader = std::io::BufReader::new(fs_err::File::open(file).map_err(SweepError::Fs)?);
    let mut cols = DocColumns::default();
    let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
    let mut filters_seen: BTreeSet<String> = BTreeSet::new();
    let mut buf = Vec::new();
    for ln in 1.. {
        match protospread_core::read_line_limited(&mut reader, &mut buf, MAX_RECORD_BYTES)
            .map_err(SweepError::Fs)?
        {
            Line::End => break,
            Line::TooLong => return Err(too_long(file, ln)),
            Line::Read => {}
        }
        let bytes = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        let line = std::str::from_utf8(bytes).map_err(|_| malformed(file, ln, "not UTF-8"))?;
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
        let line_filter = o["filter"]
            .as_str()
            .ok_or_else(|| malformed(file, ln, "`filter` is not a string"))?;
        if line_filter != filter {
            filters_seen.insert(line_filter.to_string());
            continue;
        }
        let doc_id = o["doc_id"]
            .as_u64()
            .ok_or_else(|| malformed(file, ln, "`doc_id` is not a non-negative integer"))?;
        let doc_hash = o["doc_hash"]
            .as_str()
            .filter(|h| protospread_core::is_sha256_hex(h))
            .ok_or_else(|| malformed(file, ln, "`doc_hash` is not a lowercase sha256"))?;
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
        if let Some(prev) = seen.insert(doc_id, ln) {
            return Err(malformed(
                file,
                ln,
                format!("doc_id {doc_id} (filter {filter}) already on line {prev}"),
            ));
        }
        cols.push(doc_id, doc_hash, correct);
    }
    if seen.is_empty() {
        let other = if filters_seen.is_empty() {
            "the file is empty".to_string()
        } else {
            format!(
                "its lines have filter {}",
                filters_seen.into_iter().collect::<Vec<_>>().join(", ")
            )
        };
        return Err(malformed(
            file,
            0,
            format!("no document under filter `{filter}`: {other}"),
        ));
    }
    Ok(cols.finish())
}

/// What a task's configuration says: delimiter, variant, benchmark, metric and filter.
#[derive(Debug, Clone)]
struct TaskConfig {
    delimiter: Delimiter,
    variant: SweepVariant,
    benchmark: String,
    subset: String,
    metric: String,
    filter: String,
}

/// Builders that load local files: their `dataset_path` says nothing about the data.
const FILE_BUILDERS: [&str; 6] = ["json", "csv", "parquet", "text", "arrow", "pandas"];

/// The benchmark a task ran, from its data set, so that renaming a task never changes it:
/// `dataset_path`, then `/dataset_name` if set; for a local-file builder (`json`, `csv`, ...)
/// the stem of its test split's data file instead of the builder. An MMLU subject
/// (`dataset_name` one of the 57, `dataset_path` ending in `mmlu...`) is pooled into its
/// `dataset_path` with the subject as subset. Only a task without `dataset_path` falls back
/// to a protospread task name (`<base>_delim_<slug>_<variant>`).
fn benchmark_of(task: &str, cfg: &Value) -> Option<(String, String)> {
    let Some(path) = cfg.get("dataset_path").and_then(Value::as_str) else {
        return parse_task_name(task).map(|id| (id.benchmark, id.subset));
    };
    let dataset_name = cfg.get("dataset_name").and_then(Value::as_str);
    let last = path.rsplit('/').next().unwrap_or(path);
    if let Some(subject) = dataset_name.filter(|d| MMLU_SUBJECTS.contains(d)) {
        if last.starts_with("mmlu") {
            return Some((path.to_string(), subject.to_string()));
        }
    }
    let mut name = path.to_string();
    if FILE_BUILDERS.contains(&path) {
        let split = cfg
            .get("test_split")
            .and_then(Value::as_str)
            .unwrap_or("test");
        let file = cfg
            .get("dataset_kwargs")
            .and_then(|k| k.get("data_files"))
            .and_then(|f| match f {
                Value::String(s) => Some(s.as_str()),
                Value::Object(o) => o.get(split).and_then(|v| match v {
                    Value::String(s) => Some(s.as_str()),
                    Value::Array(a) => a.first().and_then(Value::as_str),
                    _ => None,
                }),
                _ => None,
            })?;
        let stem = Path::new(file).file_stem()?.to_string_lossy();
        let stem = stem.strip_suffix(".jsonl").unwrap_or(&stem);
        name = stem.to_string();
    }
    if let Some(dn) = dataset_name {
        name = format!("{name}/{dn}");
    }
    Some((name, String::new()))
}

/// Why `configs.<task>` of a results file does not say what the sweep needs of the task.
#[derive(Debug, thiserror::Error)]
pub enum TaskConfigError {
    /// No `fewshot_delimiter`.
    #[error(
        "task {task}: its delimiter cannot be determined: configs.{task} has no fewshot_delimiter"
    )]
    NoDelimiter {
        /// The task.
        task: String,
    },
    /// A `fewshot_delimiter` that is empty or not a string.
    #[error("task {task}: its delimiter cannot be determined: configs.{task}.fewshot_delimiter is {value}")]
    DelimiterValue {
        /// The task.
        task: String,
        /// Its value, as in the file.
        value: Value,
    },
    /// The delimiter is not one the sweep can use.
    #[error("task {task}: {source}")]
    Delimiter {
        /// The task.
        task: String,
        /// Why the delimiter is refused.
        #[source]
        source: Box<SweepError>,
    },
    /// Neither a protospread task name nor `dataset_path` names the benchmark.
    #[error(
        "task {task}: no benchmark: neither a protospread task name nor configs.{task}.dataset_path"
    )]
    NoBenchmark {
        /// The task.
        task: String,
    },
    /// The task reports several metrics and none is `[sweep] metric`.
    #[error("task {task}: reports metrics {metrics} and [sweep] metric is {metric}: set [sweep] metric to one of them")]
    Metric {
        /// The task.
        task: String,
        /// The metrics it reports, comma-separated.
        metrics: String,
        /// `[sweep] metric`.
        metric: String,
    },
    /// The task has several filters.
    #[error("task {task}: several filters ({filters}); a sweep needs one")]
    Filters {
        /// The task.
        task: String,
        /// Its filters, comma-separated.
        filters: String,
    },
}

/// Read delimiter, variant, benchmark and metric of one task from `configs.<task>` of its
/// results file. `system_instruction` is the run's `--system_instruction`, if any.
fn task_config(
    task: &str,
    cfg: &Value,
    system_instruction: &str,
    spec: &SweepSpec,
    rel: &str,
    problems: &mut Vec<String>,
) -> Result<TaskConfig, TaskConfigError> {
    let fd = match cfg.get("fewshot_delimiter") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(value) => {
            return Err(TaskConfigError::DelimiterValue {
                task: task.to_string(),
                value: value.clone(),
            })
        }
        None => {
            return Err(TaskConfigError::NoDelimiter {
                task: task.to_string(),
            })
        }
    };
    let delimiter = Delimiter::new(&fd).map_err(|e| TaskConfigError::Delimiter {
        task: task.to_string(),
        source: Box::new(e),
    })?;
    if cfg.get("num_fewshot").and_then(Value::as_u64) == Some(0) {
        problems.push(format!(
            "{rel}: task {task} ran with num_fewshot 0: no delimiter was in its prompts"
        ));
    }
    // The variant: named when the description or the run's system instruction carries the
    // naming sentence of this delimiter; a naming sentence of another delimiter is a problem.
    let description = cfg
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let said = |d: &Delimiter| {
        let line = naming_line(&spec.naming_template, d);
        description.contains(&line) || system_instruction.contains(&line)
    };
    let variant = if said(&delimiter) {
        SweepVariant::Named
    } else {
        SweepVariant::Plain
    };
    for other in &spec.delimiters {
        if other.text != delimiter.text && said(other) {
            problems.push(format!(
                "{rel}: task {task} ran with delimiter {} but its prompt names {}",
                delimiter.quoted(),
                other.quoted()
            ));
        }
    }
    if let Some(id) = parse_task_name(task) {
        if id.delimiter.text != delimiter.text {
            problems.push(format!(
                "{rel}: task {task} ran with fewshot_delimiter {} but its name says {}",
                delimiter.quoted(),
                id.delimiter.quoted()
            ));
        }
        if id.variant != variant {
            problems.push(format!(
                "{rel}: task {task} is named {} but its description {} the naming sentence",
                id.variant.as_str(),
                if variant == SweepVariant::Named {
                    "has"
                } else {
                    "lacks"
                }
            ));
        }
    }
    let (benchmark, subset) =
        benchmark_of(task, cfg).ok_or_else(|| TaskConfigError::NoBenchmark {
            task: task.to_string(),
        })?;
    let names = |key: &str, field: &str| -> Vec<String> {
        cfg.get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|m| m.get(field).and_then(Value::as_str))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let metrics = names("metric_list", "metric");
    let metric = if metrics.is_empty() || metrics.contains(&spec.metric) {
        spec.metric.clone()
    } else if metrics.len() == 1 {
        metrics[0].clone()
    } else {
        return Err(TaskConfigError::Metric {
            task: task.to_string(),
            metrics: metrics.join(", "),
            metric: spec.metric.clone(),
        });
    };
    let filters = names("filter_list", "name");
    let filter = match filters.as_slice() {
        [] => "none".to_string(),
        [one] => one.clone(),
        many => {
            return Err(TaskConfigError::Filters {
                task: task.to_string(),
                filters: many.join(", "),
            })
        }
    };
    Ok(TaskConfig {
        delimiter,
        variant,
        benchmark,
        subset,
        metric,
        filter,
    })
}

/// Read every lm-eval results file below `dir` and the samples files that belong to them.
/// `source` and `label` are carried into every row. Malformed files, a task whose delimiter
/// cannot be determined, and a folder with no samples at all are errors; everything that
/// makes the sweep incomparable is collected in [`Ingested::problems`] (see [`check`]).
pub(crate) fn ingest_lm_eval(
    dir: &Path,
    spec: &SweepSpec,
    source: &str,
    label: &str,
) -> Result<Ingested, SweepError> {
    let mut files = Vec::new();
    walk(dir, &mut files)?;
    let mut ing = Ingested::default();
    let mut claimed: BTreeSet<PathBuf> = BTreeSet::new();
    let mut results_files = 0usize;
    let mut tasks_seen = 0usize;
    for f in &files {
        let name = f.file_name().map(|n| n.to_string_lossy().into_owned());
        let Some(date_id) = name
            .as_deref()
            .and_then(|n| n.strip_prefix("results_"))
            .and_then(|n| n.strip_suffix(".json"))
        else {
            continue;
        };
        results_files += 1;
        let bytes = protospread_core::read_limited(f, MAX_RECORD_BYTES)
            .map_err(SweepError::Fs)?
            .map_err(|_| too_long(f, 0))?;
        let results: Value = serde_json::from_slice(&bytes)
            .map_err(|e| malformed(f, e.line(), format!("not JSON: {e}")))?;
        let model = model_of(&results, f)?;
        let rel = rel_path(dir, f);
        let run = fs_err::canonicalize(f).map_err(SweepError::Fs)?;
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
        let system_instruction = results
            .get("system_instruction")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let configs = results
            .get("configs")
            .and_then(Value::as_object)
            .ok_or_else(|| malformed(f, 0, "no `configs` object"))?;
        let folder = f.parent().unwrap_or(Path::new("."));
        for (task, cfg) in configs {
            tasks_seen += 1;
            let tc = task_config(task, cfg, system_instruction, spec, &rel, &mut ing.problems)
                .map_err(|source| SweepError::Task {
                    file: f.clone(),
                    source,
                })?;
            let sfile = folder.join(format!("samples_{task}_{date_id}.jsonl"));
            if !sfile.is_file() {
                ing.problems.push(format!(
                    "{rel}: task {task} has no samples file {} (run lm_eval with --log_samples)",
                    rel_path(dir, &sfile)
                ));
                continue;
            }
            claimed.insert(sfile.clone());
            let docs = read_samples(&sfile, &tc.metric, &tc.filter)?;
            let key = format!("{},{}", tc.metric, tc.filter);
            let t = TaskSamples {
                source: source.to_string(),
                label: label.to_string(),
                run: run.clone(),
                task: task.clone(),
                model: model.clone(),
                benchmark: tc.benchmark,
                subset: tc.subset,
                delimiter: tc.delimiter,
                variant: tc.variant,
                metric: key.clone(),
                docs,
            };
            agrees_with_results(&results, task, &key, &t, &rel, &mut ing.problems);
            ing.files_read.push(rel_path(dir, &sfile));
            ing.samples.push(t);
        }
    }
    let mut stray = 0usize;
    for f in &files {
        let n = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if n.starts_with("samples_") && n.ends_with(".jsonl") && !claimed.contains(f) {
            stray += 1;
            ing.notes.push(format!(
                "{}: no results file in its folder lists its task with the same date id; not read",
                rel_path(dir, f)
            ));
        }
    }
    if ing.files_read.is_empty() {
        return Err(SweepError::NothingRead {
            dir: dir.to_path_buf(),
            found: format!(
                "{} file(s), {results_files} results_*.json file(s) naming {tasks_seen} task(s), {stray} samples_*.jsonl file(s) that no results file names",
                files.len()
            ),
        });
    }
    Ok(ing)
}

/// lm-eval's own numbers for `task` (its metric `key` and its effective sample count, where
/// the `results` file gives them) agree with those of its samples `t`.
fn agrees_with_results(
    results: &Value,
    task: &str,
    key: &str,
    t: &TaskSamples,
    rel: &str,
    problems: &mut Vec<String>,
) {
    if let Some(want) = results
        .get("results")
        .and_then(|r| r.get(task))
        .and_then(|r| r.get(key))
        .and_then(Value::as_f64)
    {
        let got = t.correct() as f64 / t.n() as f64;
        if (got - want).abs() > 1e-12 {
            problems.push(format!(
                "{rel}: task {task}: {key} is {want} in the results but the samples give {}/{}",
                t.correct(),
                t.n()
            ));
        }
    }
    if let Some(want) = results
        .get("n-samples")
        .and_then(|r| r.get(task))
        .and_then(|r| r.get("effective"))
        .and_then(Value::as_u64)
    {
        if want != t.n() {
            problems.push(format!(
                "{rel}: task {task}: n-samples.effective is {want} but its samples file holds {} documents",
                t.n()
            ));
        }
    }
}

/// What [`check`] found, one message each, sorted.
#[derive(Debug, Default)]
pub(crate) struct Checked {
    /// What makes the comparison unsound: a task read twice, a cell from two runs, cells
    /// that saw different documents.
    pub(crate) problems: Vec<String>,
    /// Where the runs and the grid (`spec`'s delimiters x variants) differ: a cell of the grid
    /// that no run holds, or a run's cell outside the grid.
    pub(crate) gaps: Vec<String>,
}

/// Check that the samples form a sweep: no run's task read twice, no cell from two runs,
/// every (model, benchmark) has every delimiter x variant of `spec` and no other, and every
/// cell saw the same documents: the same (subject, doc_id) pairs, each with the same
/// `doc_hash` everywhere. Documents are identified by doc_id, so a data set holding the same
/// content twice is two documents.
pub(crate) fn check(samples: &[TaskSamples], spec: &SweepSpec) -> Checked {
    let mut problems = Vec::new();
    let mut gaps = Vec::new();
    read_twice(samples, &mut problems);
    from_two_runs(samples, &mut problems);
    let configured: BTreeSet<(&str, SweepVariant)> = spec
        .delimiters
        .iter()
        .flat_map(|d| spec.variants.iter().map(|v| (d.slug.as_str(), *v)))
        .collect();
    let mut by_bench: BTreeMap<(&str, &str), BenchCells> = BTreeMap::new();
    for t in samples {
        by_bench
            .entry((&t.model, &t.benchmark))
            .or_default()
            .entry((t.delimiter.slug.as_str(), t.variant))
            .or_default()
            .push(t);
    }
    for ((model, bench), cells) in &by_bench {
        grid_gaps(model, bench, cells, spec, &configured, &mut gaps);
        same_documents(model, bench, cells, &mut problems);
    }
    problems.sort();
    gaps.sort();
    Checked { problems, gaps }
}

/// The tasks of one model and benchmark by delimiter slug and variant.
type BenchCells<'a> = BTreeMap<(&'a str, SweepVariant), Vec<&'a TaskSamples>>;

/// A run's task read twice (the same folder given twice, a copy of a results file).
fn read_twice(samples: &[TaskSamples], problems: &mut Vec<String>) {
    let mut runs: BTreeMap<(&Path, &str), usize> = BTreeMap::new();
    for t in samples {
        *runs.entry((t.run.as_path(), t.task.as_str())).or_default() += 1;
    }
    for ((run, task), n) in &runs {
        if *n > 1 {
            problems.push(format!(
                "{}: task {task} ingested {n} times; give each run once",
                run.display()
            ));
        }
    }
}

/// A cell (model, benchmark, subset, delimiter, variant) from more than one run's task.
fn from_two_runs(samples: &[TaskSamples], problems: &mut Vec<String>) {
    type CellKey<'a> = (&'a str, &'a str, &'a str, &'a str, SweepVariant);
    let mut cells: BTreeMap<CellKey, Vec<&TaskSamples>> = BTreeMap::new();
    for t in samples {
        cells
            .entry((
                &t.model,
                &t.benchmark,
                &t.subset,
                t.delimiter.slug.as_str(),
                t.variant,
            ))
            .or_default()
            .push(t);
    }
    for ((model, bench, subset, slug, v), ts) in &cells {
        let distinct: BTreeSet<(&Path, &str)> = ts
            .iter()
            .map(|t| (t.run.as_path(), t.task.as_str()))
            .collect();
        if distinct.len() > 1 {
            let which: Vec<String> = distinct
                .iter()
                .map(|(r, t)| format!("task {t} of {}", r.display()))
                .collect();
            let sub = if subset.is_empty() {
                String::new()
            } else {
                format!(" ({subset})")
            };
            problems.push(format!(
                "model {model}, {bench}{sub}: delimiter {slug} variant {} comes from {} runs ({}); keep one",
                v.as_str(),
                distinct.len(),
                which.join(", ")
            ));
        }
    }
}

/// Where the cells of `model` on `bench` and the grid (`spec`'s delimiters x variants,
/// `configured`) differ.
fn grid_gaps(
    model: &str,
    bench: &str,
    cells: &BenchCells,
    spec: &SweepSpec,
    configured: &BTreeSet<(&str, SweepVariant)>,
    gaps: &mut Vec<String>,
) {
    for d in &spec.delimiters {
        for v in &spec.variants {
            if !cells.contains_key(&(d.slug.as_str(), *v)) {
                gaps.push(format!(
                    "model {model}, {bench}: delimiter {} ({}) variant {} is missing",
                    d.quoted(),
                    d.slug,
                    v.as_str()
                ));
            }
        }
    }
    for (slug, v) in cells.keys() {
        if !configured.contains(&(*slug, *v)) {
            gaps.push(format!(
                "model {model}, {bench}: delimiter {slug} variant {} is not in [sweep] delimiters x variants",
                v.as_str()
            ));
        }
    }
}

/// Every cell of `model` on `bench` saw the same documents, each with the same `doc_hash`.
fn same_documents(model: &str, bench: &str, cells: &BenchCells, problems: &mut Vec<String>) {
    // The union of documents, and the hash each (subject, doc_id) has.
    let mut union: BTreeMap<(&str, u64), &str> = BTreeMap::new();
    let mut differs: BTreeSet<(&str, u64)> = BTreeSet::new();
    for ts in cells.values() {
        for t in ts {
            let (ids, hashes) = (t.doc_ids(), t.doc_hashes());
            for row in 0..t.docs.num_rows() {
                let key = (t.subset.as_str(), ids.value(row));
                let h = hashes.value(row);
                if let Some(prev) = union.insert(key, h) {
                    if prev != h {
                        differs.insert(key);
                    }
                }
            }
        }
    }
    for (subset, id) in differs.iter().take(3) {
        problems.push(format!(
            "model {model}, {bench}: document {}doc_id {id} has different content (doc_hash) under different delimiters or variants",
            if subset.is_empty() {
                String::new()
            } else {
                format!("{subset}/")
            }
        ));
    }
    for ((slug, v), ts) in cells {
        let mut seen: BTreeSet<(&str, u64)> = BTreeSet::new();
        for t in ts {
            seen.extend(
                t.doc_ids()
                    .values()
                    .iter()
                    .map(|id| (t.subset.as_str(), *id)),
            );
        }
        if seen.len() != union.len() {
            let missing: Vec<String> = union
                .keys()
                .filter(|k| !seen.contains(*k))
                .take(3)
                .map(|(s, id)| {
                    if s.is_empty() {
                        id.to_string()
                    } else {
                        format!("{s}/{id}")
                    }
                })
                .collect();
            problems.push(format!(
                "model {model}, {bench}: delimiter {slug} variant {} saw {} of the {} documents seen by any variant (missing e.g. doc_id {})",
                v.as_str(),
                seen.len(),
                union.len(),
                missing.join(", ")
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_configs_that_say_too_little_are_typed_errors_naming_the_task() {
        use serde_json::json;
        use std::error::Error;
        let spec = SweepSpec::from_section(&protospread_core::SweepSection::default()).unwrap();
        let mut problems = Vec::new();
        let mut read = |cfg: Value| {
            task_config("t", &cfg, "", &spec, "r.json", &mut problems)
                .map(|_| ())
                .unwrap_err()
        };
        let e = read(json!({}));
        assert!(matches!(e, TaskConfigError::NoDelimiter { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            "task t: its delimiter cannot be determined: configs.t has no fewshot_delimiter"
        );
        let e = read(json!({"fewshot_delimiter": 3}));
        assert_eq!(
            e.to_string(),
            "task t: its delimiter cannot be determined: configs.t.fewshot_delimiter is 3"
        );
        let e = read(json!({"fewshot_delimiter": "\n"}));
        assert!(matches!(e, TaskConfigError::NoBenchmark { .. }), "{e:?}");
        let e = read(json!({
            "fewshot_delimiter": "\n", "dataset_path": "x",
            "metric_list": [{"metric": "m1"}, {"metric": "m2"}],
        }));
        assert!(
            e.to_string()
                .starts_with("task t: reports metrics m1, m2 and [sweep] metric is "),
            "{e}"
        );
        let e = read(json!({
            "fewshot_delimiter": "\n", "dataset_path": "x",
            "filter_list": [{"name": "a"}, {"name": "b"}],
        }));
        assert_eq!(
            e.to_string(),
            "task t: several filters (a, b); a sweep needs one"
        );
        // The results file's error names the file and keeps the task's error as its cause.
        let e = SweepError::Task {
            file: PathBuf::from("r.json"),
            source: e,
        };
        assert_eq!(
            e.to_string(),
            "r.json: task t: several filters (a, b); a sweep needs one"
        );
        assert!(e.source().is_some_and(|c| c.is::<TaskConfigError>()));
    }

    /// A samples line of exactly `len` bytes (padded in `doc`).
    fn line(len: usize) -> String {
        let hash = "0".repeat(64);
        let make = |pad: usize| {
            format!(
                "{{\"doc_id\":0,\"doc\":\"{}\",\"target\":\"a\",\"arguments\":[],\"resps\":[],\"filtered_resps\":[],\"filter\":\"none\",\"metrics\":[\"acc\"],\"doc_hash\":\"{hash}\",\"prompt_hash\":\"{hash}\",\"target_hash\":\"{hash}\",\"acc\":1}}",
                "p".repeat(pad)
            )
        };
        let base = make(0).len();
        make(len - base)
    }

    #[test]
    fn a_samples_line_over_the_record_limit_is_refused_naming_it() {
        let d = tempfile::tempdir().unwrap();
        let ok = d.path().join("ok.jsonl");
        fs_err::write(&ok, format!("{}\n", line(MAX_RECORD_BYTES))).unwrap();
        assert_eq!(read_samples(&ok, "acc", "none").unwrap().num_rows(), 1);
        let bad = d.path().join("bad.jsonl");
        fs_err::write(&bad, format!("{}\n", line(MAX_RECORD_BYTES + 1))).unwrap();
        let e = read_samples(&bad, "acc", "none").unwrap_err().to_string();
        assert!(
            e.contains("bad.jsonl: line 1: record over the limit of 64 MiB"),
            "{e}"
        );
    }
}
