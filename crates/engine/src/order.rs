//! A check that a plan's rows come in strictly increasing key order.

use datafusion::arrow::array::{ArrayRef, RecordBatch};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::row::{OwnedRow, RowConverter, SortField};

/// Checks, batch by batch, that rows come in strictly increasing order of some key columns
/// (ascending, nulls first), carrying the last key across batch boundaries.
///
/// For plans whose output order DataFusion cannot prove on its own, though the data has it by
/// construction (for example rows expanded from a list the plan built in order): the plan sorts
/// by the prefix DataFusion knows, which costs nothing, and the writer checks the whole key
/// here instead of paying for a sort of every row. A violation is a bug, and stops the write.
pub struct KeyOrder {
    columns: Vec<String>,
    converter: Option<RowConverter>,
    last: Option<OwnedRow>,
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
            converter: None,
            last: None,
            rows: 0,
        }
    }

    /// Check the next batch. The error names the 0-based row (counted over all batches) whose
    /// key is not greater than the one before it, or a key column the batch lacks.
    pub fn push(&mut self, batch: &RecordBatch) -> Result<(), ArrowError> {
        if batch.num_rows() == 0 {
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
        if self.converter.is_none() {
            self.converter = Some(RowConverter::new(
                cols.iter()
                    .map(|c| SortField::new(c.data_type().clone()))
                    .collect(),
            )?);
        }
        let rows = self
            .converter
            .as_ref()
            .expect("set above")
            .convert_columns(&cols)?;
        let out_of_order = |i: usize| {
            ArrowError::ComputeError(format!(
                "row {} is not after the row before it in the order of ({})",
                self.rows + i,
                self.columns.join(", ")
            ))
        };
        if let Some(p) = &self.last {
            if p.row() >= rows.row(0) {
                return Err(out_of_order(0));
            }
        }
        for i in 1..rows.num_rows() {
            if rows.row(i - 1) >= rows.row(i) {
                return Err(out_of_order(i));
            }
        }
        self.last = Some(rows.row(rows.num_rows() - 1).owned());
        self.rows += batch.num_rows();
        Ok(())
    }
}
