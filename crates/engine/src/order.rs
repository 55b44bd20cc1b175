//! A check that a plan's rows come in strictly increasing key order.

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch};
use datafusion::arrow::compute::kernels::boolean::{and, is_not_null, is_null, or};
use datafusion::arrow::compute::kernels::cmp::{gt, not_distinct};
use datafusion::arrow::compute::prep_null_mask_filter;
use datafusion::arrow::error::ArrowError;

/// Checks, batch by batch, that rows come in strictly increasing order of some key columns
/// (ascending, nulls first), carrying the last key across batch boundaries.
///
/// For plans whose output order DataFusion cannot prove on its own, though the data has it by
/// construction (for example rows expanded from a list the plan built in order): the plan sorts
/// by the prefix DataFusion knows, which costs nothing, and the writer checks the whole key
/// here instead of paying for a sort of every row. A violation is a bug, and stops the write.
///
/// Each batch is compared with itself shifted by one row, a column at a time (and its first
/// row with the previous batch's last), so no row is encoded or copied: the check runs over
/// every row the score stage writes.
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
            if let Some(i) = first_not_greater(&slice(0, n - 1), &slice(1, n - 1))? {
                return Err(out_of_order(i + 1));
            }
        }
        self.last = Some(slice(n - 1, 1));
        self.rows += n;
        Ok(())
    }
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
    use datafusion::arrow::array::Int32Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

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
