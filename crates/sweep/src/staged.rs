//! The sweep's documents as a table between stages ([`SWEEP_SAMPLES`]): the fetch stage
//! ingests and checks the configured runs and writes them; the aggregate stage reads them back
//! and computes the sweep's tables. The round trip keeps every field the tables use.

use crate::delimiter::Delimiter;
use crate::ingest::{docs_schema, TaskSamples};
use crate::SweepError;
use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, BooleanBuilder, Int64Array, Int64Builder, StringArray,
    StringBuilder, UInt64Array,
};
use arrow::compute::{concat_batches, sort_to_indices, take_record_batch};
use arrow::datatypes::Int64Type;
use arrow::record_batch::RecordBatch;
use protospread_core::{SweepVariant, SWEEP_SAMPLES};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The sweep's documents as one [`SWEEP_SAMPLES`] batch, rows in the contract's order. A run
/// path under `base` (the configuration's folder) is written relative to it.
pub fn samples_batch(samples: &[TaskSamples], base: &Path) -> Result<RecordBatch, SweepError> {
    let base = fs_err::canonicalize(base).unwrap_or_else(|_| base.to_path_buf());
    let run_text = |t: &TaskSamples| -> String {
        let rel = t.run.strip_prefix(&base).unwrap_or(&t.run);
        rel.to_string_lossy().replace('\\', "/")
    };
    let mut order: Vec<(String, &TaskSamples)> = samples.iter().map(|t| (run_text(t), t)).collect();
    order.sort_by(|(ra, a), (rb, b)| (&a.source, ra, &a.task).cmp(&(&b.source, rb, &b.task)));

    let n: usize = samples.iter().map(|t| t.docs.num_rows()).sum();
    let mut text: Vec<StringBuilder> = (0..10).map(|_| StringBuilder::new()).collect();
    let mut doc_id = Int64Builder::with_capacity(n);
    let mut doc_hash = StringBuilder::new();
    let mut correct = BooleanBuilder::with_capacity(n);
    for (run, t) in order {
        let docs = sorted_docs(t)?;
        let ids: &UInt64Array = docs.column(0).as_primitive();
        let hashes: &StringArray = docs.column(1).as_string();
        let right: &BooleanArray = docs.column(2).as_boolean();
        let fixed = [
            t.source.as_str(),
            run.as_str(),
            t.task.as_str(),
            t.label.as_str(),
            t.model.as_str(),
            t.benchmark.as_str(),
            t.subset.as_str(),
            t.delimiter.text.as_str(),
            t.variant.as_str(),
            t.metric.as_str(),
        ];
        for r in 0..docs.num_rows() {
            for (b, v) in text.iter_mut().zip(fixed) {
                b.append_value(v);
            }
            let id = i64::try_from(ids.value(r)).map_err(|_| {
                SweepError::Check(vec![format!(
                    "{run}: task {}: doc_id {} is larger than the sweep table holds ({})",
                    t.task,
                    ids.value(r),
                    i64::MAX
                )])
            })?;
            doc_id.append_value(id);
            doc_hash.append_value(hashes.value(r));
            correct.append_value(right.value(r));
        }
    }
    let mut cols: Vec<ArrayRef> = text
        .into_iter()
        .map(|mut b| Arc::new(b.finish()) as ArrayRef)
        .collect();
    cols.push(Arc::new(doc_id.finish()));
    cols.push(Arc::new(doc_hash.finish()));
    cols.push(Arc::new(correct.finish()));
    Ok(RecordBatch::try_new(SWEEP_SAMPLES.schema(), cols)?)
}

/// A task's documents ordered by doc_id (stable), as the contract's sort key wants them.
fn sorted_docs(t: &TaskSamples) -> Result<RecordBatch, SweepError> {
    let idx = sort_to_indices(t.docs.column(0), None, None)?;
    Ok(take_record_batch(&t.docs, &idx)?)
}

/// The tasks of a [`SWEEP_SAMPLES`] table read from `path`: consecutive rows with the same
/// (source, run, task) are one task. The file's columns are checked against the contract.
pub fn samples_from_batches(
    path: &Path,
    batches: &[RecordBatch],
) -> Result<Vec<TaskSamples>, SweepError> {
    let bad = |message: String| SweepError::Malformed {
        file: path.to_path_buf(),
        line: 0,
        message,
    };
    for b in batches {
        SWEEP_SAMPLES
            .check_schema(&b.schema())
            .map_err(|source| SweepError::Contract {
                file: path.to_path_buf(),
                source: Box::new(source),
            })?;
    }
    let all = concat_batches(&SWEEP_SAMPLES.schema(), batches)?;
    let text =
        |name: &str| -> &StringArray { all.column_by_name(name).expect("checked").as_string() };
    let [source, run, task, label, model, benchmark, subset, delimiter, variant, metric, hash] = [
        "source",
        "run",
        "task",
        "label",
        "model",
        "benchmark",
        "subset",
        "delimiter",
        "variant",
        "metric",
        "doc_hash",
    ]
    .map(text);
    let ids: &Int64Array = all
        .column_by_name("doc_id")
        .expect("checked")
        .as_primitive::<Int64Type>();
    let right: &BooleanArray = all.column_by_name("correct").expect("checked").as_boolean();
    if let Some(c) = all.columns().iter().position(|c| c.null_count() > 0) {
        return Err(bad(format!(
            "column `{}` has a null; every column of {} is required",
            all.schema().field(c).name(),
            SWEEP_SAMPLES.name
        )));
    }
    let mut out = Vec::new();
    let mut start = 0;
    while start < all.num_rows() {
        let same = |r: usize| {
            [source, run, task]
                .iter()
                .all(|c| c.value(r) == c.value(start))
        };
        let mut end = start + 1;
        while end < all.num_rows() && same(end) {
            end += 1;
        }
        let row = start + 1;
        for (name, c) in [
            ("label", label),
            ("model", model),
            ("benchmark", benchmark),
            ("subset", subset),
            ("delimiter", delimiter),
            ("variant", variant),
            ("metric", metric),
        ] {
            if let Some(r) = (start..end).find(|&r| c.value(r) != c.value(start)) {
                return Err(bad(format!(
                    "row {}: column `{name}`: {:?} differs from {:?} of row {row}, the same run and task",
                    r + 1,
                    c.value(r),
                    c.value(start)
                )));
            }
        }
        let delim = Delimiter::new(delimiter.value(start))
            .map_err(|e| bad(format!("row {row}: column `delimiter`: {e}")))?;
        let v = match variant.value(start) {
            "plain" => SweepVariant::Plain,
            "named" => SweepVariant::Named,
            other => {
                return Err(bad(format!(
                    "row {row}: column `variant`: {other:?} is neither \"plain\" nor \"named\""
                )))
            }
        };
        let mut doc_ids = Vec::with_capacity(end - start);
        for r in start..end {
            doc_ids.push(u64::try_from(ids.value(r)).map_err(|_| {
                bad(format!(
                    "row {}: column `doc_id`: {} is negative",
                    r + 1,
                    ids.value(r)
                ))
            })?);
        }
        let docs = RecordBatch::try_new(
            docs_schema(),
            vec![
                Arc::new(UInt64Array::from(doc_ids)),
                Arc::new(hash.slice(start, end - start)),
                Arc::new(right.slice(start, end - start)),
            ],
        )?;
        out.push(TaskSamples {
            source: source.value(start).to_string(),
            label: label.value(start).to_string(),
            run: PathBuf::from(run.value(start)),
            task: task.value(start).to_string(),
            model: model.value(start).to_string(),
            benchmark: benchmark.value(start).to_string(),
            subset: subset.value(start).to_string(),
            delimiter: delim,
            variant: v,
            metric: metric.value(start).to_string(),
            docs,
        });
        start = end;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::SampleRecord;

    fn record(
        model: &str,
        delim: &str,
        variant: SweepVariant,
        doc_id: u64,
        ok: bool,
    ) -> SampleRecord {
        SampleRecord {
            model: model.into(),
            benchmark: "dictionary".into(),
            subset: String::new(),
            delimiter: Delimiter::new(delim).unwrap(),
            variant,
            doc_id,
            doc_hash: format!("h{doc_id}"),
            correct: ok,
        }
    }

    fn samples() -> Vec<TaskSamples> {
        let mut recs = Vec::new();
        // Documents out of doc_id order, so the round trip's sort is exercised.
        for (d, v) in [(",", SweepVariant::Plain), ("\n", SweepVariant::Named)] {
            for id in [3, 1, 2] {
                recs.push(record("m", d, v, id, id != 2));
            }
        }
        TaskSamples::from_records(&recs, "runs", "recorded", Path::new("/base/runs/r.jsonl"))
    }

    /// Task, delimiter, variant and (doc_id, correct) pairs of one task.
    type Seen = (String, String, String, Vec<(u64, bool)>);

    fn sorted(mut v: Vec<TaskSamples>) -> Vec<Seen> {
        v.sort_by(|a, b| a.task.cmp(&b.task));
        v.iter()
            .map(|t| {
                let ids: &UInt64Array = t.docs.column(0).as_primitive();
                let ok: &BooleanArray = t.docs.column(2).as_boolean();
                let mut docs: Vec<(u64, bool)> = (0..ids.len())
                    .map(|r| (ids.value(r), ok.value(r)))
                    .collect();
                docs.sort();
                (
                    t.task.clone(),
                    t.delimiter.text.clone(),
                    t.variant.as_str().to_string(),
                    docs,
                )
            })
            .collect()
    }

    #[test]
    fn samples_survive_the_round_trip_with_runs_relative_to_the_base() {
        let s = samples();
        let batch = samples_batch(&s, Path::new("/base")).unwrap();
        assert_eq!(batch.num_rows(), 6);
        let runs: &StringArray = batch.column_by_name("run").unwrap().as_string();
        assert_eq!(runs.value(0), "runs/r.jsonl");
        let ids: &Int64Array = batch.column_by_name("doc_id").unwrap().as_primitive();
        assert_eq!(ids.values()[..3], [1, 2, 3]);
        let back = samples_from_batches(Path::new("s.parquet"), &[batch]).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0].run, PathBuf::from("runs/r.jsonl"));
        assert_eq!(sorted(back), sorted(s));
    }

    /// Replace column `name` of `batch` by `col`.
    fn with(batch: &RecordBatch, name: &str, col: ArrayRef) -> RecordBatch {
        let i = batch.schema().index_of(name).unwrap();
        let mut cols = batch.columns().to_vec();
        cols[i] = col;
        RecordBatch::try_new(batch.schema(), cols).unwrap()
    }

    #[test]
    fn a_broken_samples_file_is_refused_naming_row_and_column() {
        let good = samples_batch(&samples(), Path::new("/base")).unwrap();
        let text = |v: Vec<&str>| Arc::new(StringArray::from(v)) as ArrayRef;
        let cases = [
            (
                with(&good, "variant", text(vec!["loud"; 6])),
                "row 1: column `variant`: \"loud\"",
            ),
            (
                with(
                    &good,
                    "doc_id",
                    Arc::new(Int64Array::from(vec![1, 2, -3, 1, 2, 3])),
                ),
                "row 3: column `doc_id`: -3 is negative",
            ),
            (
                with(&good, "model", text(vec!["m", "m", "x", "m", "m", "m"])),
                "row 3: column `model`: \"x\" differs from \"m\" of row 1",
            ),
            (
                with(&good, "delimiter", text(vec![""; 6])),
                "row 1: column `delimiter`",
            ),
        ];
        for (batch, want) in cases {
            let e = samples_from_batches(Path::new("s.parquet"), &[batch])
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("s.parquet: ") && e.contains(want), "{e}");
        }
        let short = good.project(&[0, 1, 2]).unwrap();
        let e = samples_from_batches(Path::new("s.parquet"), &[short]).unwrap_err();
        assert!(e.to_string().starts_with("s.parquet: "), "{e}");
        let cause = std::error::Error::source(&e)
            .expect("the contract's error")
            .to_string();
        assert!(cause.contains("column `label` is missing"), "{cause}");
    }
}
