//! The stored-answer part of the score stage: fetched stored answers -> parsed answers ->
//! scale scores in human units (docs/stored-answers.md, section 3).
//!
//! [`run`] reads `out/fetch/answers/<input>.parquet` for every `role = "answers"` input of
//! pipeline.toml and stages `parsed_answers.parquet` and `scale_scores.parquet` into the
//! score stage's [`Staged`] set, so that they appear together with the parity tables or not
//! at all.

use crate::format::{from_batches, Mode, StoredRecord, Vocabulary};
use crate::parse::{option_to_value, read_single, read_whole, Reading, Status};
use crate::AnswersError;
use arrow::array::{ArrayRef, BooleanArray, Float64Array, Int32Array, RecordBatch, StringArray};
use arrow::datatypes::SchemaRef;
use protospread_core::atomic::Staged;
use protospread_core::config::{Config, InputRole};
use protospread_score::norms::Norms;
use protospread_score::ScoringKey;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// File names written into the score stage's folder.
pub const PARSED_FILE: &str = "parsed_answers.parquet";
pub const SCALES_FILE: &str = "scale_scores.parquet";

/// One row of `parsed_answers.parquet`.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedRow {
    pub source: String,
    pub label: String,
    pub study: String,
    pub model: String,
    pub arm: String,
    pub cohort: Option<String>,
    pub condition: String,
    pub sample: i32,
    pub test: String,
    pub mode: String,
    pub item: i32,
    pub shown_position: Option<i32>,
    pub option_replied: Option<i32>,
    pub value: Option<i32>,
    pub status: Status,
}

/// One row of `scale_scores.parquet`.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleRow {
    pub source: String,
    pub label: String,
    pub study: String,
    pub model: String,
    pub arm: String,
    pub cohort: Option<String>,
    pub condition: String,
    pub sample: i32,
    pub test: String,
    pub dimension: String,
    pub temperature: Option<f64>,
    pub score: Option<f64>,
    pub complete: bool,
    pub n_items: i32,
    pub n_answered: i32,
    pub z: Option<f64>,
    pub percentile: Option<f64>,
    pub constant_answers: bool,
}

/// What one source produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SourceSummary {
    pub source: String,
    pub label: String,
    pub records: usize,
    pub administrations: usize,
    pub constant_administrations: usize,
    /// Parsed item rows by status name.
    pub statuses: BTreeMap<&'static str, usize>,
    pub scale_rows: usize,
    pub complete_scale_rows: usize,
}

/// What the stored-answer part wrote.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub sources: Vec<SourceSummary>,
    pub parsed_rows: usize,
    pub scale_rows: usize,
}

impl Summary {
    /// The printed summary: one line per source, naming its label (e.g. "simulated").
    pub fn lines(&self) -> Vec<String> {
        if self.sources.is_empty() {
            return vec!["stored answers: no input with role \"answers\" in pipeline.toml".into()];
        }
        self.sources
            .iter()
            .map(|x| {
                let label = if x.label.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", x.label)
                };
                let statuses: Vec<String> =
                    x.statuses.iter().map(|(k, n)| format!("{k} {n}")).collect();
                format!(
                    "stored answers {}{label}: {} requests, {} administrations; item readings: {}; {} constant-answer administrations; {} of {} scale scores complete",
                    x.source,
                    x.records,
                    x.administrations,
                    statuses.join(", "),
                    x.constant_administrations,
                    x.complete_scale_rows,
                    x.scale_rows
                )
            })
            .collect()
    }

    /// The summary as one JSON object `{"stored_answers": [...]}`.
    pub fn to_json(&self) -> serde_json::Value {
        let v: Vec<_> = self
            .sources
            .iter()
            .map(|x| {
                serde_json::json!({
                    "source": x.source, "label": x.label, "records": x.records,
                    "administrations": x.administrations, "statuses": x.statuses,
                    "constant_administrations": x.constant_administrations,
                    "scale_rows": x.scale_rows, "complete_scale_rows": x.complete_scale_rows,
                })
            })
            .collect();
        serde_json::json!({ "stored_answers": v })
    }
}

/// Parse and score the records of one source. `records` must be sorted by
/// [`StoredRecord::sort_key`] (as the importer returns them). `input_label` is the input's
/// `label` in pipeline.toml.
pub fn parse_and_score(
    source: &str,
    input_label: Option<&str>,
    records: &[StoredRecord],
    vocab: &Vocabulary,
    key: &ScoringKey,
    norms: &Norms,
) -> Result<(Vec<ParsedRow>, Vec<ScaleRow>, SourceSummary), AnswersError> {
    let mut parsed = Vec::new();
    let mut scales = Vec::new();
    let mut sum = SourceSummary {
        source: source.to_string(),
        label: input_label.unwrap_or("").to_string(),
        records: records.len(),
        ..Default::default()
    };
    let mut start = 0;
    while start < records.len() {
        let r0 = &records[start];
        let mut end = start + 1;
        while end < records.len() {
            let r = &records[end];
            if r.model != r0.model
                || r.condition != r0.condition
                || r.sample != r0.sample
                || r.test != r0.test
            {
                break;
            }
            end += 1;
        }
        let admin = &records[start..end];
        start = end;
        sum.administrations += 1;

        let label = match (&r0.label, input_label) {
            (Some(a), Some(b)) if a != b => {
                return Err(AnswersError::Score {
                    what: format!("source {source}"),
                    message: format!(
                    "records are labelled {a:?} but the input is labelled {b:?} in pipeline.toml"
                ),
                })
            }
            (Some(a), _) => a.clone(),
            (None, Some(b)) => b.to_string(),
            (None, None) => String::new(),
        };
        let score_err = |m: String| AnswersError::Score {
            what: format!(
                "{source}: {} {} sample {} {}",
                r0.model, r0.condition, r0.sample, r0.test
            ),
            message: m,
        };
        let n = vocab
            .items(&r0.test)
            .ok_or_else(|| score_err("unknown test".into()))? as usize;

        // readings[item - 1] = (reading, shown position)
        let mut readings: Vec<Option<(Reading, Option<i32>)>> = vec![None; n];
        match r0.mode {
            Mode::Single => {
                for r in admin {
                    let idx = r.item.expect("single-mode records have an item") as usize - 1;
                    let reading = if r.error.is_some() {
                        Reading {
                            option: None,
                            status: Status::RequestFailed,
                        }
                    } else {
                        read_single(&r.reply)
                    };
                    readings[idx] = Some((reading, None));
                }
            }
            Mode::Whole => {
                let order = r0
                    .item_order
                    .as_ref()
                    .expect("whole-mode records have an item order");
                let shown = if r0.error.is_some() {
                    vec![
                        Reading {
                            option: None,
                            status: Status::RequestFailed
                        };
                        n
                    ]
                } else {
                    read_whole(&r0.reply, n)
                };
                for (p, reading) in shown.into_iter().enumerate() {
                    readings[order[p] as usize - 1] = Some((reading, Some(p as i32 + 1)));
                }
            }
        }

        let mut answers: Vec<Option<u8>> = vec![None; n];
        let mut ok_options = Vec::new();
        for (i, rd) in readings.iter().enumerate() {
            let Some((reading, shown)) = rd else { continue };
            let value = match reading.status {
                Status::Ok => option_to_value(
                    reading.option.expect("ok readings have an option"),
                    r0.option_order,
                ),
                _ => None,
            };
            if let Some(v) = value {
                answers[i] = Some(v as u8);
                ok_options.push(reading.option);
            }
            *sum.statuses.entry(reading.status.as_str()).or_insert(0) += 1;
            parsed.push(ParsedRow {
                source: source.to_string(),
                label: label.clone(),
                study: r0.study.clone(),
                model: r0.model.clone(),
                arm: r0.arm.as_str().to_string(),
                cohort: r0.cohort.clone(),
                condition: r0.condition.clone(),
                sample: r0.sample,
                test: r0.test.clone(),
                mode: r0.mode.as_str().to_string(),
                item: i as i32 + 1,
                shown_position: *shown,
                option_replied: reading.option,
                value,
                status: reading.status,
            });
        }
        let constant = ok_options.len() >= 2 && ok_options.iter().all(|o| *o == ok_options[0]);
        if constant {
            sum.constant_administrations += 1;
        }
        let scored = protospread_score::score(key, &r0.test, &answers)
            .map_err(|e| score_err(e.to_string()))?;
        let mut dims = scored.dims;
        dims.sort_by(|a, b| a.dimension.cmp(&b.dimension));
        for d in dims {
            let norm = norms.get(&r0.test, &d.dimension);
            let finite = |x: f64| x.is_finite().then_some(x);
            let z = match (d.value, norm) {
                (Some(v), Some(nm)) => finite(nm.z(v)),
                _ => None,
            };
            let percentile = match (d.value, norm) {
                (Some(v), Some(nm)) => finite(nm.percentile(v)),
                _ => None,
            };
            sum.scale_rows += 1;
            if d.value.is_some() {
                sum.complete_scale_rows += 1;
            }
            scales.push(ScaleRow {
                source: source.to_string(),
                label: label.clone(),
                study: r0.study.clone(),
                model: r0.model.clone(),
                arm: r0.arm.as_str().to_string(),
                cohort: r0.cohort.clone(),
                condition: r0.condition.clone(),
                sample: r0.sample,
                test: r0.test.clone(),
                dimension: d.dimension.clone(),
                temperature: r0.temperature,
                score: d.value,
                complete: d.value.is_some(),
                n_items: d.n_items as i32,
                n_answered: d.n_answered as i32,
                z,
                percentile,
                constant_answers: constant,
            });
        }
        sum.label = label;
    }
    Ok((parsed, scales, sum))
}

/// Schema of `parsed_answers.parquet` (the contract with the aggregate stage).
pub fn parsed_schema() -> SchemaRef {
    protospread_core::tables::parsed_answers_schema()
}

/// Schema of `scale_scores.parquet` (the contract with the aggregate stage).
pub fn scales_schema() -> SchemaRef {
    protospread_core::tables::scale_scores_schema()
}

fn strs<T>(rows: &[T], f: impl Fn(&T) -> Option<&str>) -> ArrayRef {
    Arc::new(rows.iter().map(f).collect::<StringArray>())
}
fn ints<T>(rows: &[T], f: impl Fn(&T) -> Option<i32>) -> ArrayRef {
    Arc::new(rows.iter().map(f).collect::<Int32Array>())
}
fn floats<T>(rows: &[T], f: impl Fn(&T) -> Option<f64>) -> ArrayRef {
    Arc::new(rows.iter().map(f).collect::<Float64Array>())
}
fn bools<T>(rows: &[T], f: impl Fn(&T) -> bool) -> ArrayRef {
    Arc::new(rows.iter().map(|r| Some(f(r))).collect::<BooleanArray>())
}

/// Parsed rows as one batch of [`parsed_schema`].
pub fn parsed_batch(rows: &[ParsedRow]) -> Result<RecordBatch, AnswersError> {
    Ok(RecordBatch::try_new(
        parsed_schema(),
        vec![
            strs(rows, |r| Some(&r.source)),
            strs(rows, |r| Some(&r.label)),
            strs(rows, |r| Some(&r.study)),
            strs(rows, |r| Some(&r.model)),
            strs(rows, |r| Some(&r.arm)),
            strs(rows, |r| r.cohort.as_deref()),
            strs(rows, |r| Some(&r.condition)),
            ints(rows, |r| Some(r.sample)),
            strs(rows, |r| Some(&r.test)),
            strs(rows, |r| Some(&r.mode)),
            ints(rows, |r| Some(r.item)),
            ints(rows, |r| r.shown_position),
            ints(rows, |r| r.option_replied),
            ints(rows, |r| r.value),
            strs(rows, |r| Some(r.status.as_str())),
        ],
    )?)
}

/// Scale rows as one batch of [`scales_schema`].
pub fn scales_batch(rows: &[ScaleRow]) -> Result<RecordBatch, AnswersError> {
    Ok(RecordBatch::try_new(
        scales_schema(),
        vec![
            strs(rows, |r| Some(&r.source)),
            strs(rows, |r| Some(&r.label)),
            strs(rows, |r| Some(&r.study)),
            strs(rows, |r| Some(&r.model)),
            strs(rows, |r| Some(&r.arm)),
            strs(rows, |r| r.cohort.as_deref()),
            strs(rows, |r| Some(&r.condition)),
            ints(rows, |r| Some(r.sample)),
            strs(rows, |r| Some(&r.test)),
            strs(rows, |r| Some(&r.dimension)),
            floats(rows, |r| r.temperature),
            floats(rows, |r| r.score),
            bools(rows, |r| r.complete),
            ints(rows, |r| Some(r.n_items)),
            ints(rows, |r| Some(r.n_answered)),
            floats(rows, |r| r.z),
            floats(rows, |r| r.percentile),
            bools(rows, |r| r.constant_answers),
        ],
    )?)
}

/// Where the fetch stage puts the stored answers of input `name`.
pub fn fetched_path(out: &Path, name: &str) -> PathBuf {
    out.join("fetch")
        .join("answers")
        .join(format!("{name}.parquet"))
}

/// Parse and score every `role = "answers"` input of `cfg` (inputs in name order) from
/// `out/fetch/answers/`, and stage [`PARSED_FILE`] and [`SCALES_FILE`] into `score_dir`
/// through `staged`. With no answer inputs, both files are written empty (with their
/// schemas), so that downstream stages always find them.
pub fn run(
    cfg: &Config,
    out: &Path,
    score_dir: &Path,
    key: &ScoringKey,
    norms: &Norms,
    staged: &mut Staged,
) -> Result<Summary, AnswersError> {
    let vocab = Vocabulary::from_section(&cfg.answers);
    let mut inputs: Vec<_> = cfg.inputs_with_role(InputRole::Answers).collect();
    inputs.sort_by(|a, b| a.name.cmp(&b.name));
    let mut parsed = Vec::new();
    let mut scales = Vec::new();
    let mut reruns = Vec::new();
    let mut summary = Summary::default();
    for input in inputs {
        let p = fetched_path(out, &input.name);
        if !p.exists() {
            return Err(AnswersError::File {
                file: p,
                message: "not found; run `protospread fetch` first".into(),
            });
        }
        let (_, batches) = protospread_core::pq::read(&p)?;
        let mut records = from_batches(&batches, &p)?;
        records.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
        reruns.extend(crate::reruns::compare(
            &input.name,
            input.label.as_deref().unwrap_or(""),
            &records,
            &cfg.aggregate.rerun_pairs,
        ));
        let (pr, sr, sum) = parse_and_score(
            &input.name,
            input.label.as_deref(),
            &records,
            &vocab,
            key,
            norms,
        )?;
        parsed.extend(pr);
        scales.extend(sr);
        summary.sources.push(sum);
    }
    summary.parsed_rows = parsed.len();
    summary.scale_rows = scales.len();
    let pp = score_dir.join(PARSED_FILE);
    let bytes = protospread_core::pq::encode(&pp, parsed_schema(), &[parsed_batch(&parsed)?])?;
    staged.put(&pp, &bytes)?;
    let sp = score_dir.join(SCALES_FILE);
    let bytes = protospread_core::pq::encode(&sp, scales_schema(), &[scales_batch(&scales)?])?;
    staged.put(&sp, &bytes)?;
    let rp = score_dir.join(crate::reruns::RERUNS_FILE);
    let bytes = protospread_core::pq::encode(
        &rp,
        crate::reruns::schema(),
        &[crate::reruns::batch(&reruns)?],
    )?;
    staged.put(&rp, &bytes)?;
    Ok(summary)
}
