//! A streaming proof that a score table has no duplicate key, for the tables the score stage
//! writes in key order.
//!
//! The uniqueness checks are groupings over every scale score by the whole key: at 10^8
//! answers the two of them (`scale_scores`, `scale_scores_by_rule`) spilled gigabytes and were
//! a third of the stage. The score stage writes each source's rows (each source's and rule's,
//! in `scale_scores_by_rule`) as one run sorted by the rest of the key, and a run that is
//! strictly increasing cannot hold a key twice. So one pass over the key columns checks that:
//! every run of rows with the same `group` values is strictly increasing on `key`
//! ([`protospread_engine::KeyOrder`]), and no group comes back after another one started.
//! When that holds the keys are unique; when it does not, nothing is concluded and the
//! grouping decides (it names the duplicate, or finds none in a file merely out of order).

use crate::AggregateError;
use arrow::array::{ArrayRef, RecordBatch};
use arrow::row::{OwnedRow, RowConverter, SortField};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;
use protospread_engine::KeyOrder;
use std::collections::BTreeSet;
use std::path::Path;

/// Rows read at a time.
const BATCH_ROWS: usize = 65_536;

/// True when the rows of the Parquet file at `path` are proven unique on `group` + `key` by
/// the run order described in the module documentation; false when they are not proven so.
pub(crate) fn unique_in_runs(
    path: &Path,
    group: &[&str],
    key: &[&str],
) -> Result<bool, AggregateError> {
    let fail = |message: String| AggregateError::Input {
        path: path.to_path_buf(),
        message,
    };
    let read = |what: &str| {
        let what = what.to_string();
        move |e: arrow::error::ArrowError| AggregateError::read(path, what, e)
    };
    let file = fs_err::File::open(path).map_err(protospread_core::CoreError::Fs)?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file.into_parts().0)
        .map_err(|e| AggregateError::read(path, "not a Parquet file", e))?;
    let mask = ProjectionMask::columns(builder.parquet_schema(), group.iter().chain(key).copied());
    let reader = builder
        .with_projection(mask)
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| AggregateError::read(path, "", e))?;
    let mut groups: Option<RowConverter> = None;
    let mut seen: BTreeSet<OwnedRow> = BTreeSet::new();
    let mut current: Option<(OwnedRow, KeyOrder)> = None;
    for batch in reader {
        let batch: RecordBatch = batch.map_err(read("reading Parquet"))?;
        let cols = group
            .iter()
            .map(|c| {
                batch
                    .column_by_name(c)
                    .cloned()
                    .ok_or_else(|| fail(format!("column `{c}` is missing")))
            })
            .collect::<Result<Vec<ArrayRef>, _>>()?;
        let converter = match &mut groups {
            Some(c) => c,
            None => groups.insert(
                RowConverter::new(
                    cols.iter()
                        .map(|c| SortField::new(c.data_type().clone()))
                        .collect(),
                )
                .map_err(read(""))?,
            ),
        };
        let rows = converter.convert_columns(&cols).map_err(read(""))?;
        let runs = arrow::compute::partition(&cols).map_err(read(""))?;
        for run in runs.ranges() {
            let value = rows.row(run.start);
            let same = current.as_ref().is_some_and(|(g, _)| g.row() == value);
            if !same {
                if let Some((g, _)) = current.take() {
                    seen.insert(g);
                }
                if seen.contains(&value.owned()) {
                    return Ok(false);
                }
                current = Some((value.owned(), KeyOrder::new(key)));
            }
            let (_, order) = current.as_mut().expect("set above");
            if order.push(&batch.slice(run.start, run.len())).is_err() {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    /// A file of (source, model, sample) rows, written in `batch` rows per batch.
    fn file(dir: &Path, rows: &[(&str, &str, i32)], batch: usize) -> std::path::PathBuf {
        let schema = Arc::new(Schema::new(vec![
            Field::new("source", DataType::Utf8, false),
            Field::new("model", DataType::Utf8, false),
            Field::new("sample", DataType::Int32, false),
        ]));
        let path = dir.join(format!("t{}.parquet", rows.len() * 1000 + batch));
        let f = fs_err::File::create(&path).unwrap();
        let mut w = parquet::arrow::ArrowWriter::try_new(f, schema.clone(), None).unwrap();
        for chunk in rows.chunks(batch) {
            let cols: Vec<ArrayRef> = vec![
                Arc::new(chunk.iter().map(|r| Some(r.0)).collect::<StringArray>()),
                Arc::new(chunk.iter().map(|r| Some(r.1)).collect::<StringArray>()),
                Arc::new(chunk.iter().map(|r| r.2).collect::<Int32Array>()),
            ];
            w.write(&RecordBatch::try_new(schema.clone(), cols).unwrap())
                .unwrap();
        }
        w.close().unwrap();
        path
    }

    fn proven(rows: &[(&str, &str, i32)]) -> bool {
        let dir = tempfile::tempdir().unwrap();
        // Whole, and cut into batches of one and two rows: runs cross batch boundaries.
        let answers: Vec<bool> = [rows.len().max(1), 1, 2]
            .iter()
            .map(|b| {
                unique_in_runs(
                    &file(dir.path(), rows, *b),
                    &["source"],
                    &["model", "sample"],
                )
                .unwrap()
            })
            .collect();
        assert!(answers.iter().all(|a| *a == answers[0]), "{answers:?}");
        answers[0]
    }

    #[test]
    fn runs_in_key_order_prove_unique_keys_and_nothing_else_does() {
        // Sources in any order, each one run sorted by the rest of the key.
        assert!(proven(&[
            ("b", "m1", 1),
            ("b", "m1", 2),
            ("b", "m2", 0),
            ("a", "m1", 1),
            ("a", "m3", 1),
        ]));
        assert!(proven(&[]));
        // A repeated key next to itself: not proven (the grouping names it).
        assert!(!proven(&[("a", "m1", 1), ("a", "m1", 1)]));
        // A source that comes back: its second run could repeat a key of the first.
        assert!(!proven(&[("a", "m1", 1), ("b", "m1", 1), ("a", "m2", 1)]));
        // Unique but out of order within a source: not proven either.
        assert!(!proven(&[("a", "m2", 1), ("a", "m1", 1)]));
    }
}
