//! The import's shortcut for a file whose records already come in the output order.
//!
//! Stored-answer files are mostly written sorted (by protospread's own `simulate`, or exported
//! from a previous fetch). When every record's key is greater than the one before it, the keys
//! are unique and each model's and each administration's records are contiguous: then the
//! cross-record rules (one arm and cohort per model, one set of settings per administration)
//! hold exactly when they hold between neighbours, and the records need no sort. [`InOrder`]
//! checks that while the validated batches stream past, carrying the previous batch's last
//! row across the batch boundary, so that the import can skip the groupings and the sort over
//! every record (at 10^8 answers, most of the fetch stage's time and memory). A file that is
//! not in order, or that breaks a rule, goes through the full checks, which name the first
//! offending row whatever the order of the file.

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::{cast, SortOptions};
use arrow::datatypes::DataType;
use arrow::error::ArrowError;
use arrow::row::{OwnedRow, Row, RowConverter, Rows, SortField};

/// Columns of the output order (the import's `SORT_KEY`): item with nulls first.
const KEY: [&str; 5] = ["model", "condition", "sample", "test", "item"];
/// An administration: the key without the item.
const ADMIN: [&str; 4] = ["model", "condition", "sample", "test"];
/// Columns that must agree across a model's records.
const PER_MODEL: [&str; 2] = ["arm", "cohort"];

/// The row encodings compared, in this order: key, administration, model, the per-model
/// columns, the administration settings.
const PARTS: usize = 5;

/// Whether the records seen so far are in strictly increasing key order, with every
/// cross-record rule holding between neighbours.
pub(crate) struct InOrder {
    /// The administration settings as the full check compares them: each cast to text.
    settings: Vec<&'static str>,
    converters: Option<[RowConverter; PARTS]>,
    /// The last row seen, in each encoding.
    last: Option<[OwnedRow; PARTS]>,
    holds: bool,
}

fn column(batch: &RecordBatch, name: &str) -> Result<ArrayRef, ArrowError> {
    batch
        .column_by_name(name)
        .cloned()
        .ok_or_else(|| ArrowError::SchemaError(format!("no column {name}")))
}

impl InOrder {
    /// `settings` are the columns an administration must agree on.
    pub(crate) fn new(settings: Vec<&'static str>) -> Self {
        InOrder {
            settings,
            converters: None,
            last: None,
            holds: true,
        }
    }

    /// True while every record seen is in order and agrees with its neighbours.
    pub(crate) fn holds(&self) -> bool {
        self.holds
    }

    /// The columns of each encoding for `batch`.
    fn parts(&self, batch: &RecordBatch) -> Result<[Vec<ArrayRef>; PARTS], ArrowError> {
        let cols = |names: &[&str]| -> Result<Vec<ArrayRef>, ArrowError> {
            names.iter().map(|c| column(batch, c)).collect()
        };
        let settings = self
            .settings
            .iter()
            .map(|c| cast(&column(batch, c)?, &DataType::Utf8))
            .collect::<Result<Vec<_>, _>>()?;
        Ok([
            cols(&KEY)?,
            cols(&ADMIN)?,
            cols(&KEY[..1])?,
            cols(&PER_MODEL)?,
            settings,
        ])
    }

    /// Check the next batch of validated records.
    pub(crate) fn push(&mut self, batch: &RecordBatch) -> Result<(), ArrowError> {
        if !self.holds || batch.num_rows() == 0 {
            return Ok(());
        }
        let parts = self.parts(batch)?;
        if self.converters.is_none() {
            let converter = |cols: &[ArrayRef], key: bool| {
                RowConverter::new(
                    cols.iter()
                        .enumerate()
                        .map(|(i, c)| {
                            // Only the item (last of the key) is nullable in the order, and it
                            // sorts nulls first, as `ORDER BY ... item NULLS FIRST`.
                            let options = SortOptions {
                                descending: false,
                                nulls_first: key && i == KEY.len() - 1,
                            };
                            SortField::new_with_options(c.data_type().clone(), options)
                        })
                        .collect(),
                )
            };
            self.converters = Some([
                converter(&parts[0], true)?,
                converter(&parts[1], false)?,
                converter(&parts[2], false)?,
                converter(&parts[3], false)?,
                converter(&parts[4], false)?,
            ]);
        }
        let conv = self.converters.as_ref().expect("set above");
        let rows: Vec<Rows> = conv
            .iter()
            .zip(&parts)
            .map(|(c, cols)| c.convert_columns(cols))
            .collect::<Result<_, _>>()?;
        let at = |i: usize| [0, 1, 2, 3, 4].map(|p| rows[p].row(i));
        for i in 0..batch.num_rows() {
            let prev = match (i, &self.last) {
                (0, None) => continue,
                (0, Some(last)) => [0, 1, 2, 3, 4].map(|p| last[p].row()),
                _ => at(i - 1),
            };
            if !follows(prev, at(i)) {
                self.holds = false;
                self.last = None;
                return Ok(());
            }
        }
        self.last = Some(at(batch.num_rows() - 1).map(|r| r.owned()));
        Ok(())
    }
}

/// Whether `next` may follow `prev` (both in the encodings of [`PARTS`]): a greater key, the
/// same arm and cohort within a model, the same settings within an administration.
fn follows(prev: [Row<'_>; PARTS], next: [Row<'_>; PARTS]) -> bool {
    let [key, admin, model, arms, set] = next;
    let [key0, admin0, model0, arms0, set0] = prev;
    key > key0 && (model != model0 || arms == arms0) && (admin != admin0 || set == set0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, Int32Array, StringArray};
    use arrow::datatypes::{Field, Schema};
    use std::sync::Arc;

    /// A record as (model, condition, sample, test, item, arm, temperature).
    type Rec = (
        &'static str,
        &'static str,
        i32,
        &'static str,
        Option<i32>,
        &'static str,
        f64,
    );

    fn batch(rows: &[Rec]) -> RecordBatch {
        let s = |f: fn(&Rec) -> &'static str| {
            Arc::new(StringArray::from(rows.iter().map(f).collect::<Vec<_>>())) as ArrayRef
        };
        let schema = Schema::new(vec![
            Field::new("model", DataType::Utf8, false),
            Field::new("condition", DataType::Utf8, false),
            Field::new("sample", DataType::Int32, false),
            Field::new("test", DataType::Utf8, false),
            Field::new("item", DataType::Int32, true),
            Field::new("arm", DataType::Utf8, false),
            Field::new("cohort", DataType::Utf8, true),
            Field::new("temperature", DataType::Float64, true),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                s(|r| r.0),
                s(|r| r.1),
                Arc::new(Int32Array::from(
                    rows.iter().map(|r| r.2).collect::<Vec<_>>(),
                )),
                s(|r| r.3),
                Arc::new(Int32Array::from(
                    rows.iter().map(|r| r.4).collect::<Vec<_>>(),
                )),
                s(|r| r.5),
                Arc::new(StringArray::from(vec![None::<&str>; rows.len()])),
                Arc::new(Float64Array::from(
                    rows.iter().map(|r| r.6).collect::<Vec<_>>(),
                )),
            ],
        )
        .unwrap()
    }

    fn holds(batches: &[RecordBatch]) -> bool {
        let mut o = InOrder::new(vec!["temperature"]);
        for b in batches {
            o.push(b).unwrap();
        }
        o.holds()
    }

    #[test]
    fn neighbours_decide_order_uniqueness_and_agreement_across_batches() {
        let a = ("m1", "S0", 1, "big_five", None, "api", 0.0);
        let b = ("m1", "S0", 1, "big_five", Some(1), "api", 0.0);
        let c = ("m1", "S0", 1, "big_five", Some(2), "api", 0.0);
        let d = ("m2", "S0", 1, "big_five", Some(1), "cli", 0.5);
        // In order, whole-test record (no item) first, a new model may change arm and settings.
        assert!(holds(&[batch(&[a, b, c, d])]));
        assert!(holds(&[batch(&[a, b]), batch(&[c]), batch(&[d])]));
        // Out of order, or a repeated key, within a batch and across a boundary.
        assert!(!holds(&[batch(&[b, a])]));
        assert!(!holds(&[batch(&[a, b]), batch(&[b, c])]));
        assert!(!holds(&[batch(&[d]), batch(&[a])]));
        // The same model with another arm; the same administration with another temperature.
        let c_arm = ("m1", "S0", 1, "big_five", Some(2), "cli", 0.0);
        let c_temp = ("m1", "S0", 1, "big_five", Some(2), "api", 0.7);
        assert!(!holds(&[batch(&[a, b]), batch(&[c_arm])]));
        assert!(!holds(&[batch(&[a, b, c_temp])]));
        // Another administration of the same model may have another temperature.
        let e = ("m1", "S0", 2, "big_five", Some(1), "api", 0.7);
        assert!(holds(&[batch(&[a, b, c]), batch(&[e])]));
        // -0 and 0 are the same number but not the same text: the full check decides.
        let c_neg = ("m1", "S0", 1, "big_five", Some(2), "api", -0.0);
        assert!(!holds(&[batch(&[a, b, c_neg])]));
    }
}
