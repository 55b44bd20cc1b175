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

use arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch};
use arrow::compute::kernels::boolean::{and, not, or};
use arrow::compute::kernels::cmp::not_distinct;
use arrow::error::ArrowError;

/// Columns of the output order (the stored answers' sort key): item with nulls first.
const KEY: &[&str] = protospread_core::STORED_ANSWERS.sort_key;
/// How many leading key columns make an administration (the key without the item).
const ADMIN: usize = 4;
/// Columns that must agree across a model's records.
const PER_MODEL: [&str; 2] = ["arm", "cohort"];

/// Whether the records seen so far are in strictly increasing key order, with every
/// cross-record rule holding between neighbours.
///
/// Each batch is compared with itself shifted by one row, a column at a time (and its first
/// row with the previous batch's last), so no row is encoded or copied.
pub(crate) struct InOrder {
    /// The administration settings the full check compares.
    settings: Vec<&'static str>,
    /// The last row seen: the columns of [`Self::columns`], one row each.
    last: Option<Vec<ArrayRef>>,
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
            last: None,
            holds: true,
        }
    }

    /// True while every record seen is in order and agrees with its neighbours.
    pub(crate) fn holds(&self) -> bool {
        self.holds
    }

    /// The compared columns of `batch`: the key, the per-model columns, the settings.
    ///
    /// The settings are compared as values, not as the full check's text: two values of one
    /// column have the same text exactly when they are equal as Arrow compares them (floats
    /// by their bits, so -0 and 0 differ as their texts do; validated temperatures are never
    /// NaN, whose payloads would differ while the text does not).
    fn columns(&self, batch: &RecordBatch) -> Result<Vec<ArrayRef>, ArrowError> {
        KEY.iter()
            .chain(&PER_MODEL)
            .chain(&self.settings)
            .map(|c| column(batch, c))
            .collect()
    }

    /// Check the next batch of validated records.
    pub(crate) fn push(&mut self, batch: &RecordBatch) -> Result<(), ArrowError> {
        let n = batch.num_rows();
        if !self.holds || n == 0 {
            return Ok(());
        }
        let cols = self.columns(batch)?;
        let slice = |at: usize, len: usize| -> Vec<ArrayRef> {
            cols.iter().map(|c| c.slice(at, len)).collect()
        };
        let across = match &self.last {
            Some(last) => follows(last, &slice(0, 1))?,
            None => true,
        };
        if !across || (n > 1 && !follows(&slice(0, n - 1), &slice(1, n - 1))?) {
            self.holds = false;
            self.last = None;
            return Ok(());
        }
        self.last = Some(slice(n - 1, 1));
        Ok(())
    }
}

/// Whether every row of `next` may follow the row of `prev` at the same position (columns
/// as [`InOrder::columns`]): a greater key, the same arm and cohort within a model, the same
/// settings within an administration.
fn follows(prev: &[ArrayRef], next: &[ArrayRef]) -> Result<bool, ArrowError> {
    let same_at = |i: usize| not_distinct(&prev[i], &next[i]);
    // The key's order is the writer's (`KeyOrder`): the item sorts nulls first, so a
    // whole-test record (no item) precedes its single items.
    let greater = protospread_engine::key_greater(&prev[..KEY.len()], &next[..KEY.len()])?;
    let mut same_admin = same_at(0)?;
    let same_model = same_admin.clone();
    for i in 1..ADMIN {
        same_admin = and(&same_admin, &same_at(i)?)?;
    }
    let per_model = KEY.len();
    let arms = and(&same_at(per_model)?, &same_at(per_model + 1)?)?;
    let mut settings = BooleanArray::from(vec![true; prev[0].len()]);
    for i in per_model + PER_MODEL.len()..prev.len() {
        settings = and(&settings, &same_at(i)?)?;
    }
    let ok = and(
        &greater,
        &and(
            &or(&not(&same_model)?, &arms)?,
            &or(&not(&same_admin)?, &settings)?,
        )?,
    )?;
    Ok(ok.true_count() == ok.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use protospread_format::{Arm, StoredRecord};

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

    /// Stored answers (the contract's columns) of these records.
    fn batch(rows: &[Rec]) -> RecordBatch {
        let records: Vec<StoredRecord> = rows
            .iter()
            .map(|&(m, c, s, t, i, arm, temperature)| StoredRecord {
                arm: Arm::parse(arm).unwrap(),
                temperature: Some(temperature),
                ..protospread_testutils::keyed_request(m, c, s, t, i)
            })
            .collect();
        protospread_format::to_batch(&records).unwrap()
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
