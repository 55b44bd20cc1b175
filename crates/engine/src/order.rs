//! A check that a plan's rows come in strictly increasing key order.

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Int32Array, RecordBatch, StringViewArray,
};
use datafusion::arrow::compute::kernels::boolean::{and, is_not_null, is_null, or};
use datafusion::arrow::compute::kernels::cmp::{gt, not_distinct};
use datafusion::arrow::compute::prep_null_mask_filter;
use datafusion::arrow::datatypes::{DataType, Int32Type};
use datafusion::arrow::error::ArrowError;
use std::cmp::Ordering;

/// Checks, batch by batch, that rows come in strictly increasing order of some key columns
/// (ascending, nulls first), carrying the last key across batch boundaries.
///
/// For plans whose output order DataFusion cannot prove on its own, though the data has it by
/// construction (for example rows expanded from a list the plan built in order): the plan sorts
/// by the prefix DataFusion knows, which costs nothing, and the writer checks the whole key
/// here instead of paying for a sort of every row. A violation is a bug, and stops the write.
///
/// Within a batch whose key columns are string views and 32-bit integers, each row is compared
/// with the one before, column by column up to the first that differs (equal views of one
/// array are equal values, so most columns cost a 16-byte comparison); a batch of other
/// types is compared with itself shifted by one row, a kernel per column; a batch's first row
/// is compared with the previous batch's last. No row is encoded or copied: the check runs
/// over every row the score stage writes.
pub struct KeyOrder {
    columns: Vec<String>,
    /// The previous batch's last row: the key columns, one row each.
    last: Option<Vec<ArrayRef>>,
    rows: usize,
}

impl std::fmt::Debug for KeyOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyOrder")
            .field("columns", &self.columns)
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

impl KeyOrder {
    /// A check of the key `columns`, in order of significance.
    pub fn new(columns: &[&str]) -> Self {
        KeyOrder {
            columns: columns.iter().map(|c| c.to_string()).collect(),
            last: None,
            rows: 0,
        }
    }

    /// Check the next batch. The error names the 0-based row (counted over all batches) whose
    /// key is not greater than the one before it, or a key column the batch lacks.
    pub fn push(&mut self, batch: &RecordBatch) -> Result<(), ArrowError> {
        let n = batch.num_rows();
        if n == 0 {
            return Ok(());
        }
        let cols = self
            .columns
            .iter()
            .map(|c| {
                batch
                    .column_by_name(c)
                    .cloned()
                    .ok_or_else(|| ArrowError::SchemaError(format!("no key column {c}")))
            })
            .collect::<Result<Vec<ArrayRef>, _>>()?;
        let slice = |at: usize, len: usize| -> Vec<ArrayRef> {
            cols.iter().map(|c| c.slice(at, len)).collect()
        };
        let out_of_order = |i: usize| {
            ArrowError::ComputeError(format!(
                "row {} is not after the row before it in the order of ({})",
                self.rows + i,
                self.columns.join(", ")
            ))
        };
        if let Some(last) = &self.last {
            if first_not_greater(last, &slice(0, 1))?.is_some() {
                return Err(out_of_order(0));
            }
        }
        if n > 1 {
            let within = match first_not_increasing(&cols) {
                Some(found) => found,
                None => first_not_greater(&slice(0, n - 1), &slice(1, n - 1))?.map(|i| i + 1),
            };
            if let Some(i) = within {
                return Err(out_of_order(i));
            }
        }
        self.last = Some(slice(n - 1, 1));
        self.rows += n;
        Ok(())
    }
}

/// A key column of a type compared row by row in [`first_not_increasing`].
enum Rows<'a> {
    Views(&'a StringViewArray),
    Ints(&'a Int32Array),
}

impl Rows<'_> {
    /// Row `i - 1` against row `i` (nulls first).
    fn cmp_prev(&self, i: usize) -> Ordering {
        let (a, b) = match self {
            Rows::Views(c) => (c.is_valid(i - 1), c.is_valid(i)),
            Rows::Ints(c) => (c.is_valid(i - 1), c.is_valid(i)),
        };
        match (a, b) {
            (false, false) => return Ordering::Equal,
            (false, true) => return Ordering::Less,
            (true, false) => return Ordering::Greater,
            (true, true) => {}
        }
        match self {
            Rows::Views(c) => {
                // Two equal views of one array are one value: the same inline bytes, or the
                // same place in the same buffer. Most neighbours share most key columns.
                if c.views()[i - 1] == c.views()[i] {
                    Ordering::Equal
                } else {
                    c.value(i - 1).as_bytes().cmp(c.value(i).as_bytes())
                }
            }
            Rows::Ints(c) => c.value(i - 1).cmp(&c.value(i)),
        }
    }
}

/// Within one batch whose key columns are all string views or 32-bit integers: the first row
/// whose key is not greater than the row before's, if any. `None` for other column types,
/// which the kernels of [`key_greater`] compare. Row by row, a row costs a comparison of views
/// per column up to the first that differs, instead of several kernels over every column.
fn first_not_increasing(cols: &[ArrayRef]) -> Option<Option<usize>> {
    if cols.is_empty() {
        return None;
    }
    let rows: Vec<Rows<'_>> = cols
        .iter()
        .map(|c| match c.data_type() {
            DataType::Utf8View => Some(Rows::Views(c.as_string_view())),
            DataType::Int32 => Some(Rows::Ints(c.as_primitive::<Int32Type>())),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let n = cols[0].len();
    Some((1..n).find(|&i| {
        rows.iter()
            .map(|r| r.cmp_prev(i))
            .find(|o| *o != Ordering::Equal)
            != Some(Ordering::Less)
    }))
}

/// The first position at which the key of `next` is not greater than the key of `prev` at the
/// same position, if any.
fn first_not_greater(prev: &[ArrayRef], next: &[ArrayRef]) -> Result<Option<usize>, ArrowError> {
    if prev.is_empty() {
        // No key column: no row is greater than another, so the first is already out of order.
        return Ok(Some(0));
    }
    let greater = key_greater(prev, next)?;
    if greater.true_count() == greater.len() {
        return Ok(None);
    }
    Ok((0..greater.len()).find(|&i| !greater.value(i)))
}

/// Whether, at each position, the key of `next` is greater than the key of `prev` (columns in
/// order of significance, ascending, nulls first), as a null-free boolean array. An error for
/// no key column: the rows' number would be unknown.
pub fn key_greater(prev: &[ArrayRef], next: &[ArrayRef]) -> Result<BooleanArray, ArrowError> {
    // Null-free booleans throughout: a comparison with a null is false, not null, and a null
    // sorts before every value.
    let greater_at = |i: usize| -> Result<BooleanArray, ArrowError> {
        let b = gt(&next[i], &prev[i])?;
        let b = if b.null_count() == 0 {
            b
        } else {
            prep_null_mask_filter(&b)
        };
        or(&b, &and(&is_null(&prev[i])?, &is_not_null(&next[i])?)?)
    };
    let Some(least) = prev.len().checked_sub(1) else {
        return Err(ArrowError::InvalidArgumentError(
            "key_greater: no key column".into(),
        ));
    };
    let mut greater = greater_at(least)?;
    for i in (0..least).rev() {
        greater = or(
            &greater_at(i)?,
            &and(&not_distinct(&prev[i], &next[i])?, &greater)?,
        )?;
    }
    Ok(greater)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::Field;
    use datafusion::arrow::datatypes::Schema;
    use std::sync::Arc;

    /// The row-by-row comparison of string views and integers agrees with the kernels on
    /// every pair of rows drawn from nulls, short texts, long texts sharing a prefix (stored
    /// twice, so equal values have different views) and integers.
    #[test]
    fn rows_compared_one_by_one_agree_with_the_kernels() {
        let texts = [
            None,
            Some("a"),
            Some("b"),
            Some("a-long-text-past-twelve-1"),
            Some("a-long-text-past-twelve-2"),
        ];
        let ints = [None, Some(1), Some(2)];
        let mut keys = Vec::new();
        for t in texts {
            for i in ints {
                keys.push((t, i));
            }
        }
        let mut compared = 0;
        for a in &keys {
            for b in &keys {
                let rows = [*a, *b, *a];
                let cols: Vec<ArrayRef> = vec![
                    Arc::new(StringViewArray::from_iter(rows.iter().map(|r| r.0))),
                    Arc::new(Int32Array::from_iter(rows.iter().map(|r| r.1))),
                ];
                let fast = first_not_increasing(&cols).expect("views and integers");
                let prev: Vec<ArrayRef> = cols.iter().map(|c| c.slice(0, 2)).collect();
                let next: Vec<ArrayRef> = cols.iter().map(|c| c.slice(1, 2)).collect();
                let kernels = first_not_greater(&prev, &next).unwrap().map(|i| i + 1);
                assert_eq!(fast, kernels, "{a:?} then {b:?} then {a:?}");
                compared += 1;
            }
        }
        assert_eq!(compared, 225);
        // Another type goes to the kernels.
        let other: Vec<ArrayRef> =
            vec![Arc::new(datafusion::arrow::array::Int64Array::from(vec![
                1, 2,
            ]))];
        assert!(first_not_increasing(&other).is_none());
    }

    #[test]
    fn with_no_key_column_no_row_follows_another() {
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int32, false)]));
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(Int32Array::from(vec![1, 2]))]).unwrap();
        let e = KeyOrder::new(&[]).push(&batch).unwrap_err().to_string();
        assert!(e.contains("row 1 is not after"), "{e}");
        assert!(key_greater(&[], &[]).is_err());
    }
}
